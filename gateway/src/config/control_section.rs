//! The operator-facing control settings: `[admin]` (the admin API's bearer
//! token), `[reload]` (watching the config file) and each route's
//! `auth = { keys = [...] }` (client API keys and their tenants). Raw
//! shapes, checked types and their checks live together here so that
//! access control has one home; secrets are kept as digests only
//! ([`SecretDigest`]), the plain text never outlives the check.

use super::issue::Issues;
use super::schema_default::{some_bool, some_u64};
use super::secret::{RawSecret, SecretDigest};
use super::tenant_section::{self, RawTenant, TenantConfig};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// Environment variable that sets the admin token; it wins over
/// `[admin] token`, so a deployment can keep the token out of files.
pub const ADMIN_TOKEN_ENV: &str = "SWITCHYARD_ADMIN_TOKEN";

/// Shortest accepted admin token or API key, in bytes.
pub const MIN_SECRET_LEN: usize = 16;

/// `[admin]`
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// Bearer token for `/admin/*`; `$SWITCHYARD_ADMIN_TOKEN` wins.
    pub token: Option<RawSecret>,
}

/// Default interval of the config file check.
pub const DEFAULT_RELOAD_INTERVAL_MS: u64 = 1000;

/// `[reload]`
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawReload {
    /// Reload when the config file changes, default true.
    #[schemars(default = "some_bool::<true>")]
    pub watch: Option<bool>,
    /// How often the file is checked, default 1000 ms.
    #[schemars(default = "some_u64::<DEFAULT_RELOAD_INTERVAL_MS>", range(min = 1))]
    pub interval_ms: Option<u64>,
}

/// A route's `auth = { keys = [...] }`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRouteAuth {
    /// Accepted API keys.
    pub keys: Vec<RawApiKey>,
    /// Limits of the keys' tenants on this route alone (beside their
    /// `[[tenants]]` limits across routes), the same shape as `[[tenants]]`.
    #[serde(default)]
    pub tenants: Vec<RawTenant>,
    /// Share the route between its keys' tenants while it is overloaded
    /// (the Tenants and limits page), default true; applies when the keys
    /// name two tenants or more.
    pub fair_share: Option<bool>,
}

/// One API key: `{ key = "...", tenant = "team-a" }` or
/// `{ key_env = "TEAM_A_KEY", tenant = "team-a" }`; or a client
/// certificate: `{ client_cert_cn = "svc-a", tenant = "team-a" }`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawApiKey {
    /// The key itself.
    pub key: Option<RawSecret>,
    /// Or the environment variable holding it.
    pub key_env: Option<String>,
    /// Or, instead of a key, the subject CN of a client certificate the
    /// listener verified (`client_ca` of `server.tls` or `grpc_tls`): a
    /// V2 or gRPC request on such a connection needs no key.
    pub client_cert_cn: Option<String>,
    /// Whose key it is; scopes the response cache.
    pub tenant: String,
}

/// Where the admin token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    /// No token: the admin listener must be on loopback.
    None,
    /// `[admin] token`.
    Config,
    /// `$SWITCHYARD_ADMIN_TOKEN`.
    Env,
}

/// `[admin]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminConfig {
    /// The token's digest, when one is configured.
    pub token: Option<SecretDigest>,
    /// Where it came from (shown by `/admin/config`, the token never is).
    pub token_source: TokenSource,
}

/// `[reload]`, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReloadConfig {
    /// Poll the config file and reload when its contents change.
    pub watch: bool,
    /// Poll interval.
    pub interval: Duration,
}

impl Default for ReloadConfig {
    /// Watching, every second.
    fn default() -> Self {
        ReloadConfig { watch: true, interval: Duration::from_millis(DEFAULT_RELOAD_INTERVAL_MS) }
    }
}

/// A route's client authentication, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteAuth {
    /// Accepted keys, in config order.
    pub keys: Vec<ApiKey>,
    /// Accepted client certificates (by subject CN), in config order.
    pub client_certs: Vec<ClientCert>,
    /// The keys' tenants' limits on this route (`auth.tenants`).
    pub tenants: Vec<TenantConfig>,
    /// Fair share between the keys' tenants under overload.
    pub fair_share: bool,
}

/// A client certificate accepted in place of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// The certificate's subject common name.
    pub cn: Arc<str>,
    /// The tenant it authenticates.
    pub tenant: Arc<str>,
}

impl RouteAuth {
    /// Every tenant the route's keys and certificates name.
    pub fn tenants_named(&self) -> impl Iterator<Item = &Arc<str>> {
        self.keys.iter().map(|k| &k.tenant).chain(self.client_certs.iter().map(|c| &c.tenant))
    }
}

/// One accepted API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// Digest of the key.
    pub digest: SecretDigest,
    /// The tenant it authenticates.
    pub tenant: Arc<str>,
    /// The environment variable it was read from, if any (not secret).
    pub from_env: Option<String>,
}

/// Checks a secret's length and returns its digest.
fn secret(text: &str, path: &str, issues: &mut Issues) -> SecretDigest {
    if text.len() < MIN_SECRET_LEN || text.chars().any(char::is_whitespace) {
        issues.push(path, format!("must be at least {MIN_SECRET_LEN} characters without spaces"));
    }
    SecretDigest::of(text.as_bytes())
}

/// `[admin]`, with `$SWITCHYARD_ADMIN_TOKEN` (non-empty) taking precedence.
pub fn check_admin(raw: Option<&RawAdmin>, issues: &mut Issues) -> AdminConfig {
    let env = std::env::var(ADMIN_TOKEN_ENV).ok().filter(|v| !v.is_empty());
    match (env, raw.and_then(|a| a.token.as_ref())) {
        (Some(token), _) => AdminConfig {
            token: Some(secret(&token, ADMIN_TOKEN_ENV, issues)),
            token_source: TokenSource::Env,
        },
        (None, Some(token)) => AdminConfig {
            token: Some(secret(&token.0, "admin.token", issues)),
            token_source: TokenSource::Config,
        },
        (None, None) => AdminConfig { token: None, token_source: TokenSource::None },
    }
}

/// `[reload]`: absent = watch every second.
pub fn check_reload(raw: Option<&RawReload>, issues: &mut Issues) -> ReloadConfig {
    let Some(raw) = raw else { return ReloadConfig::default() };
    if raw.interval_ms == Some(0) {
        issues.push("reload.interval_ms", "must be at least 1 ms (or set watch = false)");
    }
    ReloadConfig {
        watch: raw.watch.unwrap_or(true),
        interval: Duration::from_millis(raw.interval_ms.unwrap_or(DEFAULT_RELOAD_INTERVAL_MS).max(1)),
    }
}

/// A route's `auth`; `path` is the route's (`routes[2]`).
pub fn check_route_auth(raw: Option<&RawRouteAuth>, path: &str, issues: &mut Issues) -> Option<RouteAuth> {
    let raw = raw?;
    if raw.keys.is_empty() {
        issues.push(format!("{path}.auth.keys"), "list at least one key (or remove `auth`)");
    }
    let mut seen = HashSet::new();
    let mut keys = Vec::with_capacity(raw.keys.len());
    let mut client_certs = Vec::new();
    for (j, key) in raw.keys.iter().enumerate() {
        let at = format!("{path}.auth.keys[{j}]");
        if key.tenant.is_empty() {
            issues.push(format!("{at}.tenant"), "must not be empty");
        }
        if let Some(cn) = &key.client_cert_cn {
            if key.key.is_some() || key.key_env.is_some() {
                issues.push(at, "give `client_cert_cn` or a key (`key`, `key_env`), not both");
            } else if cn.is_empty() {
                issues.push(format!("{at}.client_cert_cn"), "must not be empty");
            } else if client_certs.iter().any(|c: &ClientCert| &*c.cn == cn) {
                issues.push(format!("{at}.client_cert_cn"), "the same certificate name is listed twice");
            } else {
                client_certs
                    .push(ClientCert { cn: Arc::from(cn.as_str()), tenant: Arc::from(key.tenant.as_str()) });
            }
            continue;
        }
        let text = match (&key.key, &key.key_env) {
            (Some(k), None) => Some((k.0.clone(), format!("{at}.key"))),
            (None, Some(var)) => match std::env::var(var) {
                Ok(v) if !v.is_empty() => Some((v, format!("{at}.key_env"))),
                _ => {
                    issues.push(format!("{at}.key_env"), format!("environment variable {var:?} is not set"));
                    None
                }
            },
            _ => {
                issues.push(at, "give either `key`, `key_env` or `client_cert_cn`");
                None
            }
        };
        let Some((text, field)) = text else { continue };
        let digest = secret(&text, &field, issues);
        if !seen.insert(digest) {
            issues.push(field, "the same key is listed twice");
        }
        keys.push(ApiKey { digest, tenant: Arc::from(key.tenant.as_str()), from_env: key.key_env.clone() });
    }
    let known: HashSet<&str> = raw.keys.iter().map(|k| k.tenant.as_str()).collect();
    let tenants = tenant_section::check(&raw.tenants, &known, &format!("{path}.auth.tenants"), issues);
    Some(RouteAuth { keys, client_certs, tenants, fair_share: raw.fair_share.unwrap_or(true) })
}

#[cfg(test)]
mod tests {
    use crate::config::{parse, ConfigIssue};
    use std::path::Path;

    const ROUTE: &str =
        "[[models]]\nname = \"m\"\npath = \"m.onnx\"\n[[routes]]\nname = \"r\"\nmodels = [\"m\"]\n";

    fn issues(text: &str) -> Vec<ConfigIssue> {
        parse(text, Path::new("/")).err().unwrap_or_default()
    }

    #[test]
    fn route_keys_are_kept_as_digests_with_their_tenants() {
        let text = format!(
            "{ROUTE}auth = {{ keys = [{{ key = \"aaaaaaaaaaaaaaaa1\", tenant = \"a\" }}, \
             {{ key = \"bbbbbbbbbbbbbbbb2\", tenant = \"b\" }}] }}\n"
        );
        let config = parse(&text, Path::new("/")).unwrap_or_else(|e| panic!("{e:?}"));
        let auth = config.route("r").and_then(|r| r.auth.clone()).unwrap_or_else(|| panic!("auth"));
        assert_eq!(auth.keys.len(), 2);
        assert!(auth.keys[0].digest.matches(b"aaaaaaaaaaaaaaaa1"));
        assert_eq!(&*auth.keys[1].tenant, "b");
        assert!(!format!("{config:?}").contains("aaaaaaaaaaaaaaaa1"), "Debug must not show keys");
    }

    #[test]
    fn a_client_certificate_entry_names_its_tenant_without_a_key() {
        let text = format!(
            "{ROUTE}auth = {{ keys = [{{ client_cert_cn = \"svc-a\", tenant = \"a\" }}], \
             tenants = [{{ name = \"a\", limits = {{ requests_per_day = 5 }} }}] }}\n"
        );
        let config = parse(&text, Path::new("/")).unwrap_or_else(|e| panic!("{e:?}"));
        let auth = config.route("r").and_then(|r| r.auth.clone()).unwrap_or_else(|| panic!("auth"));
        assert!(auth.keys.is_empty());
        assert_eq!((&*auth.client_certs[0].cn, &*auth.client_certs[0].tenant), ("svc-a", "a"));
    }

    #[test]
    fn mistakes_name_their_field() {
        let cases = [
            (format!("{ROUTE}auth = {{ keys = [] }}\n"), "routes[0].auth.keys"),
            (format!("{ROUTE}auth = {{ keys = [{{ key = \"short\", tenant = \"a\" }}] }}\n"), "routes[0].auth.keys[0].key"),
            (format!("{ROUTE}auth = {{ keys = [{{ tenant = \"a\" }}] }}\n"), "routes[0].auth.keys[0]"),
            (
                format!("{ROUTE}auth = {{ keys = [{{ key_env = \"SWITCHYARD_TEST_UNSET_KEY\", tenant = \"a\" }}] }}\n"),
                "routes[0].auth.keys[0].key_env",
            ),
            (
                format!(
                    "{ROUTE}auth = {{ keys = [{{ key = \"aaaaaaaaaaaaaaaa1\", tenant = \"a\" }}, \
                     {{ key = \"aaaaaaaaaaaaaaaa1\", tenant = \"b\" }}] }}\n"
                ),
                "routes[0].auth.keys[1].key",
            ),
            (
                format!("{ROUTE}auth = {{ keys = [{{ key = \"aaaaaaaaaaaaaaaa1\", client_cert_cn = \"svc\", tenant = \"a\" }}] }}\n"),
                "routes[0].auth.keys[0]",
            ),
            (
                format!(
                    "{ROUTE}auth = {{ keys = [{{ client_cert_cn = \"svc\", tenant = \"a\" }}, \
                     {{ client_cert_cn = \"svc\", tenant = \"b\" }}] }}\n"
                ),
                "routes[0].auth.keys[1].client_cert_cn",
            ),
            (format!("{ROUTE}auth = {{ keys = [{{ client_cert_cn = \"\", tenant = \"a\" }}] }}\n"), "routes[0].auth.keys[0].client_cert_cn"),
            ("[admin]\ntoken = \"short\"\n".to_string(), "admin.token"),
            ("[reload]\ninterval_ms = 0\n".to_string(), "reload.interval_ms"),
        ];
        for (text, path) in cases {
            let found = issues(&text);
            assert!(found.iter().any(|i| i.path == path), "{text}: {found:?}");
        }
    }

    #[test]
    fn admin_token_and_reload_defaults() {
        let config = parse("[admin]\ntoken = \"0123456789abcdef0123\"\n", Path::new("/"))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(config.admin.token.is_some_and(|t| t.matches(b"0123456789abcdef0123")));
        assert!(config.reload.watch);
        let config = parse("[reload]\nwatch = false\n", Path::new("/")).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(!config.reload.watch);
    }
}
