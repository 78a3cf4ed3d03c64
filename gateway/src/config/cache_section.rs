//! Checks the `[cache]` section and each route's `cache = { ... }` (see
//! [`crate::cache`] for what they do); problems are reported with field
//! paths like every other config error.

use super::client_tls_section::{self, ClientTls, RawRedisTls};
use super::issue::Issues;
use super::schema_default::{some_bool, some_u32, some_u64, some_usize};
use super::size::ByteSize;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// Default Redis key prefix.
pub const DEFAULT_NAMESPACE: &str = "switchyard";
/// Default Redis lookup timeout.
pub const DEFAULT_TIMEOUT_MS: u64 = 5;
/// Default Redis background write timeout.
pub const DEFAULT_WRITE_TIMEOUT_MS: u64 = 100;
/// Default Redis connection timeout.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 1000;
/// Default consecutive failures that open the breaker.
pub const DEFAULT_BREAKER_FAILURES: u32 = 3;
/// Default time L2 is skipped once the breaker opens.
pub const DEFAULT_BREAKER_COOL_DOWN_MS: u64 = 1000;
/// Default pending background writes before new ones are dropped.
pub const DEFAULT_WRITE_QUEUE: usize = 4096;
/// Default time to live of a route's cached answers (L1, and L2 unless
/// `l2_ttl_s` says otherwise).
pub const DEFAULT_TTL_S: u64 = 300;
/// Default wait for another replica's answer with `fleet_coalesce`.
pub const DEFAULT_FLEET_WAIT_MS: u64 = 2000;

/// `[cache]`: the response cache (L1 in process, optional Redis L2).
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawCache {
    /// L1 size bound in bytes, default 256MiB.
    #[schemars(default = "some_u64::<DEFAULT_L1_MAX_BYTES>", extend("minimum" = 1))]
    pub l1_max_bytes: Option<ByteSize>,
    /// Shared L2 in Redis; absent = in-process only.
    pub redis: Option<RawRedis>,
}

/// `[cache.redis]`: one node (`url`) or a Redis Cluster (`urls`, or
/// `cluster = true`).
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRedis {
    /// One server, e.g. `redis://127.0.0.1:6379`.
    pub url: Option<String>,
    /// Cluster seed nodes; implies `cluster = true`.
    pub urls: Option<Vec<String>>,
    /// Talk Redis Cluster protocol, default false (true with `urls`).
    pub cluster: Option<bool>,
    /// Key prefix, default `switchyard` (keys are `<namespace>:v2:{<hex>}`).
    #[schemars(default = "default_namespace")]
    pub namespace: Option<String>,
    /// Lookup timeout, default 5 ms.
    #[schemars(default = "some_u64::<DEFAULT_TIMEOUT_MS>", range(min = 1))]
    pub timeout_ms: Option<u64>,
    /// Background write timeout, default 100 ms.
    #[schemars(default = "some_u64::<DEFAULT_WRITE_TIMEOUT_MS>", range(min = 1))]
    pub write_timeout_ms: Option<u64>,
    /// Connection timeout, default 1000 ms.
    #[schemars(default = "some_u64::<DEFAULT_CONNECT_TIMEOUT_MS>", range(min = 1))]
    pub connect_timeout_ms: Option<u64>,
    /// Consecutive failures that open the breaker, default 3.
    #[schemars(default = "some_u32::<DEFAULT_BREAKER_FAILURES>", range(min = 1))]
    pub breaker_failures: Option<u32>,
    /// How long L2 is skipped once the breaker opens, default 1000 ms.
    #[schemars(default = "some_u64::<DEFAULT_BREAKER_COOL_DOWN_MS>", range(min = 1))]
    pub breaker_cool_down_ms: Option<u64>,
    /// Pending background writes before new ones are dropped, default 4096.
    #[schemars(default = "some_usize::<DEFAULT_WRITE_QUEUE>", range(min = 1))]
    pub write_queue: Option<usize>,
    /// TLS to `rediss://` URLs: `ca` (a private CA, default the system
    /// roots), `client_cert` and `client_key` (mTLS).
    pub tls: Option<RawRedisTls>,
}

/// A route's `cache = { enabled, ttl_s, l2_ttl_s }`.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRouteCache {
    /// Cache this route's answers, default true.
    #[schemars(default = "some_bool::<true>")]
    pub enabled: Option<bool>,
    /// L1 time to live, default 300 s.
    #[schemars(default = "some_u64::<DEFAULT_TTL_S>", range(min = 1))]
    pub ttl_s: Option<u64>,
    /// L2 time to live, default `ttl_s`.
    #[schemars(range(min = 1))]
    pub l2_ttl_s: Option<u64>,
    /// Coalesce identical misses across every gateway sharing the Redis
    /// L2, default false.
    #[schemars(default = "some_bool::<false>")]
    pub fleet_coalesce: Option<bool>,
    /// With `fleet_coalesce`: how long a replica waits for another one's
    /// answer before computing its own, default 2000 ms.
    #[schemars(default = "some_u64::<DEFAULT_FLEET_WAIT_MS>", range(min = 1, max = MAX_FLEET_WAIT_MS))]
    pub fleet_wait_ms: Option<u64>,
}

/// `[cache]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// L1 bound in bytes.
    pub l1_max_bytes: u64,
    /// Redis L2, if configured.
    pub redis: Option<RedisConfig>,
}

/// `[cache.redis]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// One URL (single node) or the cluster's seed nodes.
    pub urls: Vec<String>,
    /// Use the Redis Cluster protocol.
    pub cluster: bool,
    /// Key prefix; keys are `<namespace>:v2:{<hex key>}`.
    pub namespace: String,
    /// Timeout of a lookup on the request path.
    pub timeout: Duration,
    /// Timeout of a background write.
    pub write_timeout: Duration,
    /// Timeout of establishing a connection.
    pub connect_timeout: Duration,
    /// Consecutive failures that open the breaker.
    pub breaker_failures: u32,
    /// How long L2 is skipped once the breaker opens.
    pub breaker_cool_down: Duration,
    /// Pending background writes before new ones are dropped.
    pub write_queue: usize,
    /// CA and client certificate for `rediss://` URLs, when configured.
    pub tls: Option<ClientTls>,
}

/// A route's cache settings, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteCache {
    /// Whether answers of this route are cached.
    pub enabled: bool,
    /// L1 time to live.
    pub ttl: Duration,
    /// L2 time to live.
    pub l2_ttl: Duration,
    /// Fleet-wide coalescing (`fleet_coalesce = true`): how long a replica
    /// waits for the replica computing an identical miss. `None`: off.
    pub fleet_wait: Option<Duration>,
}

impl Default for RouteCache {
    /// On, 300 s in both tiers, no fleet-wide coalescing.
    fn default() -> Self {
        RouteCache {
            enabled: true,
            ttl: Duration::from_secs(DEFAULT_TTL_S),
            l2_ttl: Duration::from_secs(DEFAULT_TTL_S),
            fleet_wait: None,
        }
    }
}

/// Longest `fleet_wait_ms`: a minute (it is also the life of the marker of
/// a replica that died while computing).
pub const MAX_FLEET_WAIT_MS: u64 = 60_000;

/// Default L1 bound: 256 MiB.
pub const DEFAULT_L1_MAX_BYTES: u64 = 256 << 20;

/// The schema's `cache.redis.namespace` default.
fn default_namespace() -> Option<&'static str> {
    Some(DEFAULT_NAMESPACE)
}

/// `[cache]`: absent = no cache.
pub fn check(raw: Option<&RawCache>, base_dir: &Path, issues: &mut Issues) -> Option<CacheConfig> {
    let raw = raw?;
    let l1_max_bytes = raw.l1_max_bytes.map_or(DEFAULT_L1_MAX_BYTES, |s| s.0);
    if l1_max_bytes == 0 {
        issues.push("cache.l1_max_bytes", "must be at least 1 byte");
    }
    let redis = raw.redis.as_ref().and_then(|r| redis_config(r, base_dir, issues));
    Some(CacheConfig { l1_max_bytes, redis })
}

fn redis_config(raw: &RawRedis, base_dir: &Path, issues: &mut Issues) -> Option<RedisConfig> {
    let (urls, cluster) = match (&raw.url, &raw.urls) {
        (Some(url), None) => (vec![url.clone()], raw.cluster.unwrap_or(false)),
        (None, Some(urls)) if !urls.is_empty() => {
            if raw.cluster == Some(false) {
                issues.push("cache.redis.cluster", "`urls` lists cluster nodes; use `url` for one server");
            }
            (urls.clone(), true)
        }
        (None, Some(_)) => {
            issues.push("cache.redis.urls", "needs at least one node");
            return None;
        }
        (Some(_), Some(_)) => {
            issues.push("cache.redis", "give either `url` (one server) or `urls` (cluster nodes), not both");
            return None;
        }
        (None, None) => {
            issues.push("cache.redis.url", "missing: e.g. url = \"redis://127.0.0.1:6379\"");
            return None;
        }
    };
    for (i, url) in urls.iter().enumerate() {
        if let Err(e) = redis::Client::open(url.as_str()) {
            let path = if raw.url.is_some() {
                "cache.redis.url".to_string()
            } else {
                format!("cache.redis.urls[{i}]")
            };
            issues.push(path, format!("{:?} is not a Redis URL: {e}", super::redact::redact_url(url)));
        }
    }
    let tls = raw.tls.as_ref().and_then(|tls| {
        if !urls.iter().all(|u| u.starts_with("rediss://")) {
            issues.push("cache.redis.tls", "set, but not every URL is rediss:// (Redis over TLS)");
        }
        client_tls_section::check(&tls.as_client_tls(), base_dir, "cache.redis.tls", issues)
    });
    let namespace = raw.namespace.clone().unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    if namespace.is_empty() || namespace.contains(char::is_whitespace) {
        issues.push("cache.redis.namespace", "must be non-empty and contain no spaces");
    }
    let breaker_failures = raw.breaker_failures.unwrap_or(DEFAULT_BREAKER_FAILURES);
    if breaker_failures == 0 {
        issues.push("cache.redis.breaker_failures", "must be at least 1");
    }
    let write_queue = raw.write_queue.unwrap_or(DEFAULT_WRITE_QUEUE);
    if write_queue == 0 {
        issues.push("cache.redis.write_queue", "must be at least 1");
    }
    Some(RedisConfig {
        urls,
        cluster,
        namespace,
        timeout: issues.millis(raw.timeout_ms, DEFAULT_TIMEOUT_MS, "cache.redis.timeout_ms"),
        write_timeout: issues.millis(
            raw.write_timeout_ms,
            DEFAULT_WRITE_TIMEOUT_MS,
            "cache.redis.write_timeout_ms",
        ),
        connect_timeout: issues.millis(
            raw.connect_timeout_ms,
            DEFAULT_CONNECT_TIMEOUT_MS,
            "cache.redis.connect_timeout_ms",
        ),
        breaker_failures,
        breaker_cool_down: issues.millis(
            raw.breaker_cool_down_ms,
            DEFAULT_BREAKER_COOL_DOWN_MS,
            "cache.redis.breaker_cool_down_ms",
        ),
        write_queue,
        tls,
    })
}

/// A route's `cache = { ... }`: absent = on, 300 s; `l2_ttl_s` defaults
/// to `ttl_s`.
pub fn check_route(raw: Option<&RawRouteCache>, path: &str, issues: &mut Issues) -> RouteCache {
    let Some(raw) = raw else { return RouteCache::default() };
    let ttl_s = raw.ttl_s.unwrap_or(DEFAULT_TTL_S);
    let l2_ttl_s = raw.l2_ttl_s.unwrap_or(ttl_s);
    for (field, value) in [("ttl_s", raw.ttl_s), ("l2_ttl_s", raw.l2_ttl_s)] {
        if value == Some(0) {
            issues.push(format!("{path}.cache.{field}"), "must be at least 1 s (or set enabled = false)");
        }
    }
    let wait_ms = raw.fleet_wait_ms.unwrap_or(DEFAULT_FLEET_WAIT_MS);
    if !(1..=MAX_FLEET_WAIT_MS).contains(&wait_ms) {
        issues.push(format!("{path}.cache.fleet_wait_ms"), format!("must be 1 to {MAX_FLEET_WAIT_MS} ms"));
    }
    if raw.fleet_wait_ms.is_some() && raw.fleet_coalesce != Some(true) {
        issues.push(format!("{path}.cache.fleet_wait_ms"), "only applies with fleet_coalesce = true");
    }
    RouteCache {
        enabled: raw.enabled.unwrap_or(true),
        ttl: Duration::from_secs(ttl_s.max(1)),
        l2_ttl: Duration::from_secs(l2_ttl_s.max(1)),
        fleet_wait: (raw.fleet_coalesce == Some(true)).then(|| Duration::from_millis(wait_ms)),
    }
}

/// Fleet-wide coalescing needs the shared L2: a route (`path`) that asks
/// for it without `[cache] redis` is an error at
/// `routes[i].cache.fleet_coalesce`.
pub fn check_fleet_coalescing(
    cache: Option<&RawCache>,
    route: Option<&RawRouteCache>,
    path: &str,
    issues: &mut Issues,
) {
    let wanted = route.is_some_and(|r| r.fleet_coalesce == Some(true));
    if wanted && cache.and_then(|c| c.redis.as_ref()).is_none() {
        issues.push(
            format!("{path}.cache.fleet_coalesce"),
            "needs the shared L2: add [cache] redis (every replica pointing at the same Redis)",
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::config::parse;
    use std::path::Path;
    use std::time::Duration;

    const MODEL: &str = "[[models]]\nname = \"m\"\npath = \"m.onnx\"\n";

    #[test]
    fn defaults_and_route_settings() {
        let text = format!(
            "[cache]\n{MODEL}[[routes]]\nname = \"r\"\nmodels = [\"m\"]\ncache = {{ ttl_s = 5 }}\n\
             [[routes]]\nname = \"off\"\nmodels = [\"m\"]\ncache = {{ enabled = false }}\n\
             [[routes]]\nname = \"plain\"\nmodels = [\"m\"]\n"
        );
        let config = parse(&text, Path::new("/")).unwrap();
        let cache = config.cache.as_ref().unwrap();
        assert_eq!(cache.l1_max_bytes, 256 << 20);
        assert!(cache.redis.is_none());
        let r = config.route("r").unwrap().cache;
        assert_eq!((r.enabled, r.ttl, r.l2_ttl), (true, Duration::from_secs(5), Duration::from_secs(5)));
        assert!(!config.route("off").unwrap().cache.enabled);
        assert_eq!(config.route("plain").unwrap().cache.ttl, Duration::from_secs(300));
    }

    #[test]
    fn redis_single_and_cluster() {
        let single = parse("[cache]\nl1_max_bytes = \"1MiB\"\nredis = { url = \"redis://127.0.0.1:7000\", timeout_ms = 20 }\n", Path::new("/")).unwrap();
        let redis = single.cache.unwrap().redis.unwrap();
        assert!(!redis.cluster);
        assert_eq!(redis.timeout, Duration::from_millis(20));
        assert_eq!(redis.namespace, "switchyard");
        let cluster = parse(
            "[cache.redis]\nurls = [\"redis://127.0.0.1:7000\", \"redis://127.0.0.1:7001\"]\n",
            Path::new("/"),
        )
        .unwrap();
        let redis = cluster.cache.unwrap().redis.unwrap();
        assert!(redis.cluster);
        assert_eq!(redis.urls.len(), 2);
    }

    #[test]
    fn mistakes_name_their_field() {
        let cases = [
            ("[cache.redis]\ntimeout_ms = 5\n", "cache.redis.url"),
            ("[cache.redis]\nurl = \"http://x\"\n", "cache.redis.url"),
            ("[cache.redis]\nurl = \"redis://a\"\nurls = [\"redis://b\"]\n", "cache.redis"),
            ("[cache]\nl1_max_bytes = 0\n", "cache.l1_max_bytes"),
            ("[cache.redis]\nurl = \"redis://a\"\nbreaker_failures = 0\n", "cache.redis.breaker_failures"),
        ];
        for (text, path) in cases {
            let issues = parse(text, Path::new("/")).unwrap_err();
            assert!(issues.iter().any(|i| i.path == path), "{text}: {issues:?}");
        }
        let text = format!("{MODEL}[[routes]]\nname = \"r\"\nmodels = [\"m\"]\ncache = {{ ttl_s = 0 }}\n");
        let issues = parse(&text, Path::new("/")).unwrap_err();
        assert_eq!(issues[0].path, "routes[0].cache.ttl_s", "{issues:?}");
    }

    #[test]
    fn fleet_coalescing_needs_redis_and_a_sane_wait() {
        let route = |cache: &str| {
            format!("{MODEL}[[routes]]\nname = \"r\"\nmodels = [\"m\"]\ncache = {{ {cache} }}\n")
        };
        let redis = "[cache]\nredis = { url = \"redis://127.0.0.1:7000\" }\n";
        let on = parse(&format!("{redis}{}", route("fleet_coalesce = true")), Path::new("/")).unwrap();
        assert_eq!(on.route("r").unwrap().cache.fleet_wait, Some(Duration::from_millis(2000)));
        let off = parse(&format!("{redis}{}", route("ttl_s = 5")), Path::new("/")).unwrap();
        assert_eq!(off.route("r").unwrap().cache.fleet_wait, None);
        let cases = [
            (format!("[cache]\n{}", route("fleet_coalesce = true")), "routes[0].cache.fleet_coalesce"),
            (route("fleet_coalesce = true"), "routes[0].cache.fleet_coalesce"),
            (
                format!("{redis}{}", route("fleet_coalesce = true, fleet_wait_ms = 0")),
                "routes[0].cache.fleet_wait_ms",
            ),
            (format!("{redis}{}", route("fleet_wait_ms = 100")), "routes[0].cache.fleet_wait_ms"),
        ];
        for (text, path) in cases {
            let issues = parse(&text, Path::new("/")).unwrap_err();
            assert!(issues.iter().any(|i| i.path == path), "{text}: {issues:?}");
        }
    }

    #[test]
    fn a_bad_url_is_reported_without_its_password() {
        let issues = parse("[cache.redis]\nurl = \"http://:s3cret@h:1\"\n", Path::new("/")).unwrap_err();
        let text = format!("{issues:?}");
        assert!(text.contains("cache.redis.url") && !text.contains("s3cret"), "{text}");
    }
}
