//! L2: a shared cache in Redis, or Redis Cluster, through the async
//! client (a `ConnectionManager` for one node, which reconnects by itself;
//! a `ClusterConnection` for a cluster, which follows slot moves).
//!
//! Every command runs under a short timeout and through the [`Breaker`]:
//! when Redis is down or slow, a few requests pay the timeout, then L2 is
//! skipped (a lookup counts as a miss) until a probe succeeds. The
//! connection is made in the background (first by the cache's background
//! service at start-up, else by the first lookup), never while holding a
//! request longer than the command timeout.
//!
//! `rediss://` URLs speak TLS (rustls, the redis crate's own): verified
//! against the system roots, or against `cache.redis.tls.ca`, with the
//! client certificate of `tls.client_cert` when the server asks for one.
//!
//! Keys are `<namespace>:v2:{<hex key>}` (the hex key in braces is a
//! cluster hash tag); values are
//! [`super::value_codec`] bytes, stored with `SET .. PX ttl`.

use super::key::CacheKey;
use super::stats::CacheStats;
use crate::breaker::{Breaker, BreakerState};
use crate::config::redact::{redact_url, redact_urls};
use crate::config::RedisConfig;
use bytes::Bytes;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, ClientTlsConfig, Cmd, FromRedisValue, RedisError, TlsCertificates};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// A connection to one node or to a cluster; cheap to clone.
#[derive(Clone)]
pub enum Connection {
    /// One Redis server.
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

impl Connection {
    /// Opens a connection as `config` says. A cluster of one seed URL
    /// whose node is not in cluster mode (`urls = ["redis://host:6379"]`
    /// naming a plain server) is used as that plain server, with a
    /// warning: as a cluster it would fail every command.
    pub async fn open(config: &RedisConfig) -> Result<Connection, RedisError> {
        crate::config::client_tls_section::install_default_provider();
        let first = config.urls.first().map_or("redis://127.0.0.1:6379", String::as_str);
        match config.urls.as_slice() {
            [url] if config.cluster && !cluster_enabled(url, config).await? => {
                tracing::warn!(
                    url = %redact_url(url),
                    "cache.redis.urls names one server that is not a Redis Cluster node (cluster support \
                     disabled); using it as a plain server. Write `redis = {{ url = \"...\" }}` for one server"
                );
                Self::single(url, config).await
            }
            _ if config.cluster => {
                let mut builder = ClusterClientBuilder::new(config.urls.clone())
                    .connection_timeout(config.connect_timeout)
                    .response_timeout(response_timeout(config))
                    .retries(1);
                if let Some(certs) = tls_certificates(config) {
                    builder = builder.certs(certs);
                }
                let client = builder.build()?;
                Ok(Connection::Cluster(client.get_async_connection().await?))
            }
            _ => Self::single(first, config).await,
        }
    }

    /// A connection to the one server at `url`.
    async fn single(url: &str, config: &RedisConfig) -> Result<Connection, RedisError> {
        let client = client(url, config)?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(Some(response_timeout(config)))
            .set_number_of_retries(0);
        Ok(Connection::Single(ConnectionManager::new_with_config(client, manager_config).await?))
    }

    /// Runs one command.
    pub async fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> Result<T, RedisError> {
        match self {
            Connection::Single(c) => cmd.query_async(c).await,
            Connection::Cluster(c) => cmd.query_async(c).await,
        }
    }
}

/// The client's own limit on a command: the longest of ours (each command
/// is also wrapped in its own, shorter, timeout by the caller).
fn response_timeout(config: &RedisConfig) -> Duration {
    config.timeout.max(config.write_timeout)
}

/// Whether the node at `url` runs in cluster mode (asked with `INFO
/// cluster`, on a connection of its own under the connect timeout).
async fn cluster_enabled(url: &str, config: &RedisConfig) -> Result<bool, RedisError> {
    let client = client(url, config)?;
    let probe = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(Some(response_timeout(config)));
    let mut conn = client.get_multiplexed_async_connection_with_config(&probe).await?;
    let info: String = redis::cmd("INFO").arg("cluster").query_async(&mut conn).await?;
    Ok(reports_cluster(&info))
}

/// A client of the server at `url`, with the configured CA and client
/// certificate when there are some.
fn client(url: &str, config: &RedisConfig) -> Result<redis::Client, RedisError> {
    match tls_certificates(config) {
        Some(certs) => redis::Client::build_with_tls(url, certs),
        None => redis::Client::open(url),
    }
}

/// `cache.redis.tls` as the redis crate takes it (PEM).
fn tls_certificates(config: &RedisConfig) -> Option<TlsCertificates> {
    let tls = config.tls.as_ref()?;
    Some(TlsCertificates {
        client_tls: tls
            .identity
            .as_ref()
            .map(|id| ClientTlsConfig { client_cert: id.cert_pem.clone(), client_key: id.key_pem.clone() }),
        root_cert: tls.ca_pem.clone(),
    })
}

/// True when an `INFO cluster` answer says `cluster_enabled:1`.
fn reports_cluster(info: &str) -> bool {
    info.lines().any(|line| line.trim() == "cluster_enabled:1")
}

/// The outcome of an L2 lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L2Read {
    /// The stored value.
    Hit(Bytes),
    /// Nothing stored under the key.
    Miss,
    /// Not asked: the breaker is open.
    Skipped,
    /// The command failed or timed out.
    Failed,
}

/// The L2 client; one per process, shared by lookups and the writer.
pub struct L2 {
    config: RedisConfig,
    connection: Arc<OnceCell<Connection>>,
    breaker: Breaker,
    stats: Arc<CacheStats>,
}

impl L2 {
    /// A client for `config`; it connects on first use.
    pub fn new(config: RedisConfig, stats: Arc<CacheStats>) -> L2 {
        let breaker = Breaker::new(config.breaker_failures, config.breaker_cool_down);
        L2 { config, connection: Arc::new(OnceCell::new()), breaker, stats }
    }

    /// The Redis key for a cache key. The hex key is a hash tag, so that
    /// the key and its fleet marker ([`super::fleet`]) share a cluster slot.
    pub fn redis_key(&self, key: &CacheKey) -> String {
        format!("{}:v2:{{{}}}", self.config.namespace, key.to_hex())
    }

    /// The breaker's state, for stats.
    pub fn breaker_state(&self) -> BreakerState {
        self.breaker.state()
    }

    /// The configuration in force.
    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// Connects now (at start-up, from the background service) so that
    /// the first lookups find a connection. Failure is logged; lookups
    /// retry through the breaker.
    pub async fn warm_up(&self) {
        let config = self.config.clone();
        let result = tokio::time::timeout(
            config.connect_timeout,
            self.connection.get_or_try_init(|| async move { Connection::open(&config).await }),
        )
        .await;
        match result {
            Ok(Ok(_)) => tracing::info!(urls = ?redact_urls(&self.config.urls), "Redis L2 connected"),
            Ok(Err(e)) => tracing::warn!(error = %e, "Redis L2 not reachable at start-up; will retry"),
            Err(_) => tracing::warn!("Redis L2 connection timed out at start-up; will retry"),
        }
    }

    /// Looks `key` up under the command timeout.
    pub async fn get(&self, key: &CacheKey) -> L2Read {
        let now = Instant::now();
        if !self.breaker.allow(now) {
            CacheStats::bump(&self.stats.l2_skipped);
            return L2Read::Skipped;
        }
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.redis_key(key));
        match self.run::<Option<Vec<u8>>>(&cmd, self.config.timeout).await {
            Some(Some(value)) => L2Read::Hit(Bytes::from(value)),
            Some(None) => L2Read::Miss,
            None => L2Read::Failed,
        }
    }

    /// Stores `value` under `redis_key` for `ttl` (the writer's command;
    /// runs under the write timeout). Returns false when skipped or failed.
    pub async fn set(&self, redis_key: &str, value: &[u8], ttl: Duration) -> bool {
        if !self.breaker.allow(Instant::now()) {
            return false;
        }
        let cmd = set_command(redis_key, value, ttl);
        self.run::<()>(&cmd, self.config.write_timeout).await.is_some()
    }

    /// Whether the breaker lets a command through now; counts a skip when
    /// it does not (for commands other than [`L2::get`] and [`L2::set`],
    /// e.g. [`super::fleet`]'s and [`super::fleet_store`]'s).
    pub(super) fn allows(&self) -> bool {
        let allowed = self.breaker.allow(Instant::now());
        if !allowed {
            CacheStats::bump(&self.stats.l2_skipped);
        }
        allowed
    }

    /// The lookup timeout (`timeout_ms`) and the write timeout.
    pub(super) fn timeouts(&self) -> (Duration, Duration) {
        (self.config.timeout, self.config.write_timeout)
    }

    /// Runs `cmd` under `timeout` and feeds the breaker; `None` on failure.
    pub(super) async fn run<T: FromRedisValue + Send + 'static>(
        &self,
        cmd: &Cmd,
        timeout: Duration,
    ) -> Option<T> {
        let result = tokio::time::timeout(timeout, async {
            let mut conn = self.connection().await?;
            conn.query::<T>(cmd).await
        })
        .await;
        match result {
            Ok(Ok(value)) => {
                self.breaker.on_success();
                Some(value)
            }
            Ok(Err(e)) => {
                self.failed(&e.to_string());
                None
            }
            Err(_) => {
                self.failed("timed out");
                None
            }
        }
    }

    fn failed(&self, why: &str) {
        CacheStats::bump(&self.stats.l2_errors);
        if self.breaker.on_failure(Instant::now()) {
            tracing::warn!(
                error = why,
                cool_down_ms = self.config.breaker_cool_down.as_millis() as u64,
                "Redis L2 failing; skipping it until a probe succeeds"
            );
        } else {
            tracing::debug!(error = why, "Redis L2 command failed");
        }
    }

    /// The shared connection; the first caller starts connecting in a
    /// spawned task, so a caller that times out does not cancel it.
    async fn connection(&self) -> Result<Connection, RedisError> {
        if let Some(conn) = self.connection.get() {
            return Ok(conn.clone());
        }
        let cell = self.connection.clone();
        let config = self.config.clone();
        let task = tokio::spawn(async move {
            cell.get_or_try_init(|| async move { Connection::open(&config).await }).await.cloned()
        });
        match task.await {
            Ok(result) => result,
            Err(e) => Err(RedisError::from((redis::ErrorKind::Io, "connect task failed", e.to_string()))),
        }
    }
}

/// `SET key value PX ttl_ms`.
pub fn set_command(redis_key: &str, value: &[u8], ttl: Duration) -> Cmd {
    let mut cmd = redis::cmd("SET");
    cmd.arg(redis_key).arg(value).arg("PX").arg(ttl.as_millis().max(1) as u64);
    cmd
}

#[cfg(test)]
mod tests {
    use super::reports_cluster;

    #[test]
    fn info_cluster_says_whether_the_node_is_in_cluster_mode() {
        assert!(reports_cluster("# Cluster\r\ncluster_enabled:1\r\n"));
        assert!(!reports_cluster("# Cluster\r\ncluster_enabled:0\r\n"));
        assert!(!reports_cluster(""));
    }
}
