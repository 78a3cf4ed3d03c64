//! The exact-match response cache: identical inference requests to a
//! route are answered from memory (L1, moka) or from a shared Redis (L2)
//! instead of running a model again.
//!
//! How a request goes through it ([`ResponseCache::plan`], then
//! [`ResponseCache::answer`] around `routing::execute`):
//! 1. Plan: no `[cache]` section, a directly addressed model (not a
//!    route), a route with `cache = { enabled = false }`, or
//!    `Cache-Control: no-store` -> bypass (`x-cache: bypass`).
//!    `no-cache` -> compute and store, without lookup (`bypass`).
//!    Otherwise the request's [`key`] is computed.
//! 2. L1 lookup -> `hit-l1`.
//! 3. Concurrent identical misses [`coalesce`]: one leader, the others
//!    wait for its outcome (see "Sharing" below).
//! 4. The leader looks up L2 (skipped while its breaker is open) ->
//!    `hit-l2` (also stored in L1).
//! 5. Otherwise the model runs -> `miss`; a final answer is stored in L1
//!    at once and queued for L2 (written in the background, never
//!    delaying the response). Errors are never stored.
//!
//! Requests reach the cache fully validated: the handler resolves the
//! latency budget (400 for an invalid one) before the plan, so a hit never
//! hides a request's own error.
//!
//! What is keyed, and what is not, is documented in [`key`]. The latency
//! budget (header or `timeout` parameter) is not keyed: a cached answer
//! is one the route's policy gives without pressure, served faster than
//! any budget. A degraded answer (the policy answered with another model
//! because of a tight budget, a busy or unavailable model:
//! [`Answer::degraded`]) is never stored ([`cacheable`]): a budget chooses
//! how fast, not what.
//!
//! A rollout's canary answer ([`Reason::Canary`]) is neither stored nor
//! shared with coalesced followers: it is the candidate's answer, for the
//! share of clients the canary drew.
//!
//! Sharing among coalesced requests: a follower takes the leader's
//! outcome unless it depends on the leader's budget and the follower asked
//! for more. A degraded answer, or an error a larger budget might have
//! avoided ([`GatewayError::budget_bound`]: a shed, an overload, a failed
//! fallback chain, a timeout), is shared only with followers whose budget
//! is no larger than the leader's (they would have been served the same or
//! worse); the others compute their own answer, leading a new computation
//! or joining one. Everything else (answers without pressure, errors about
//! the request's content, which every identical request shares) is
//! shared with all.
//!
//! Row by row: a batched request to a route whose one model has
//! independent rows (`[[models]] rows_independent`, on by default for text
//! models) has one key per row instead ([`rows`], [`row_answer`]): rows
//! seen before are not computed, the others run as one smaller batch, and
//! `x-cache: partial` with `x-switchyard-cached-rows: k/n` says so. A
//! route that chooses its model per request (a cascade, a budget policy
//! over several models) keeps the whole-request key, as does an event stream.
//!
//! Sizes and TTLs: L1 holds at most `[cache] l1_max_bytes` (weighed by
//! encoded size); each route has `ttl_s` (L1) and `l2_ttl_s` (Redis).
//! The L1 bound is fixed when the process starts.

pub mod coalesce;
pub mod control;
pub mod fleet;
pub mod fleet_store;
pub mod key;
pub mod l1;
pub mod l2;
pub mod repeat;
pub mod row_answer;
pub mod rows;
pub mod service;
pub mod stats;
pub mod value_codec;
pub mod writer;

use crate::config::{CacheConfig, Config, RouteCache, RouteConfig};
use crate::error::GatewayError;
use crate::reply::Reply;
use crate::target::Target;
use crate::telemetry;
use crate::tenants::fleet::FleetStore;
use coalesce::Coalescer;
use control::Control;
use http::HeaderMap;
use key::{CacheKey, KeyScope, ModelGeneration};
use l1::{L1Entry, L1};
use l2::L2;
pub use repeat::RepeatParts;
use repeat::{RepeatCache, RepeatEntry, RepeatKey};
use router_policies::Reason;
use stats::{CacheSnapshot, CacheStats};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use switchyard_protocol::answer::Answer;
use switchyard_protocol::v2::DecodedRequest;
use tracing::Instrument;
use writer::{WriteJob, Writer};

/// The model's run that [`ResponseCache::answer`] starts on a miss, boxed.
/// The future passes through the lookup, the coalescer and the leader, and
/// an async function keeps its argument both as an argument and as a moved
/// local: unboxed, each layer held the whole model run twice (57 KB for the
/// inference path), and every request copied that much when pingora boxed
/// its handler. Boxed it is 16 bytes at every layer.
pub type Compute<'a> = Pin<Box<dyn Future<Output = Result<Answer, GatewayError>> + Send + 'a>>;

/// The `x-cache` response header's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStatus {
    /// Served from this process's memory.
    HitL1,
    /// Served from Redis.
    HitL2,
    /// Computed (and stored when cacheable); also what a request that
    /// waited for an identical in-flight computation gets, unless that
    /// computation found the answer in L2.
    Miss,
    /// Some rows of a batched request came from the cache and the others
    /// were computed ([`rows`]; `x-switchyard-cached-rows` says how many).
    Partial,
    /// The cache was not read.
    Bypass,
}

impl CacheStatus {
    /// The header value: `hit-l1`, `hit-l2`, `miss`, `partial` or `bypass`.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStatus::HitL1 => "hit-l1",
            CacheStatus::HitL2 => "hit-l2",
            CacheStatus::Miss => "miss",
            CacheStatus::Partial => "partial",
            CacheStatus::Bypass => "bypass",
        }
    }
}

/// What to do for one request, decided before any work is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CachePlan {
    /// Neither read nor write the cache.
    Bypass,
    /// Do not read; store the fresh answer (`Cache-Control: no-cache`).
    Refresh(CacheKey, RouteCache),
    /// Read L1, then L2; compute and store on a miss.
    Lookup(CacheKey, RouteCache),
}

/// Whether an answer may be stored. Only final answers reach the cache
/// (drafts are streamed by the handler, errors are `Err`), and of those
/// only the ones the policy gives without pressure: not
/// [`Answer::degraded`] ones; nor a rollout's canary answer
/// ([`Reason::Canary`]: the candidate answers its share of the route's
/// clients, not the route).
pub fn cacheable(answer: &Answer) -> bool {
    !answer.degraded && answer.reason != Reason::Canary
}

/// What one request gets from the cache: the answer and how it was served.
type Outcome = Result<(Arc<Answer>, CacheStatus), GatewayError>;

/// What a coalesced computation publishes: its outcome and the budget of
/// the request that led it.
#[derive(Clone)]
struct Shared {
    outcome: Outcome,
    budget: Duration,
}

impl Shared {
    /// Whether a follower whose budget is `budget` takes this outcome (the
    /// rule is in the module docs).
    fn serves(&self, budget: Duration) -> bool {
        let leaders_own = match &self.outcome {
            // A canary answer is the candidate's, for its share of clients.
            Ok((answer, _)) if answer.reason == Reason::Canary => return false,
            Ok((answer, _)) => answer.degraded,
            Err(e) => e.budget_bound(),
        };
        !leaders_own || budget <= self.budget
    }
}

struct Tiers {
    l1: L1,
    l2: Option<Arc<L2>>,
    writer: Option<Arc<Writer>>,
    coalescer: Coalescer<Shared>,
    repeats: RepeatCache,
}

/// The cache: L1, optional L2, the in-flight map and the counters.
pub struct ResponseCache {
    tiers: Option<Tiers>,
    stats: Arc<CacheStats>,
}

impl ResponseCache {
    /// A cache as `config` says; `None` (no `[cache]` section) gives a
    /// cache that bypasses every request.
    pub fn new(config: Option<&CacheConfig>) -> ResponseCache {
        let stats = Arc::new(CacheStats::default());
        let tiers = config.map(|c| {
            let l2 = c.redis.clone().map(|r| Arc::new(L2::new(r, stats.clone())));
            let writer = c.redis.as_ref().map(|r| Arc::new(Writer::new(r.write_queue, stats.clone())));
            Tiers {
                l1: L1::new(c.l1_max_bytes, stats.clone()),
                l2,
                writer,
                coalescer: Coalescer::default(),
                repeats: RepeatCache::new(c.l1_max_bytes / 4),
            }
        });
        ResponseCache { tiers, stats }
    }

    /// The Redis L2, when `[cache] redis` is set, as the store of the
    /// tenants' fleet-wide limits (`[fleet_limits]`,
    /// [`crate::tenants::fleet`]): its connection, timeouts and breaker.
    pub fn fleet_store(&self) -> Option<&dyn FleetStore> {
        let l2: &L2 = self.tiers.as_ref()?.l2.as_deref()?;
        Some(l2)
    }

    /// Decides what the cache does for a request to `target`; computes
    /// the key only when it will be used. Call before the request's
    /// inputs are moved out of `request`.
    pub fn plan(
        &self,
        config: &Config,
        target: &Target,
        tenant: Option<&str>,
        request: &DecodedRequest,
        headers: &HeaderMap,
    ) -> CachePlan {
        if self.tiers.is_none() || !target.is_route {
            return CachePlan::Bypass;
        }
        let Some(route) = config.route(&target.public_name).filter(|r| r.cache.enabled) else {
            return CachePlan::Bypass;
        };
        let control = Control::from_headers(headers);
        if control == Control::NoStore {
            return CachePlan::Bypass;
        }
        let key = key::request_key(&key_scope(config, target, route, tenant), request);
        match control {
            Control::NoCache => CachePlan::Refresh(key, route.cache),
            _ => CachePlan::Lookup(key, route.cache),
        }
    }

    /// Answers per `plan`, running `compute` (the model) only when needed.
    /// `compute` is not polled on a hit. `budget` is the request's resolved
    /// latency budget: it decides which outcomes of an identical in-flight
    /// request this one shares (module docs).
    pub async fn answer(&self, plan: &CachePlan, budget: Duration, compute: Compute<'_>) -> Outcome {
        let (tiers, key, policy) = match (plan, &self.tiers) {
            (CachePlan::Lookup(key, policy), Some(tiers)) => (tiers, key, policy),
            (CachePlan::Refresh(key, policy), Some(tiers)) => {
                CacheStats::bump(&self.stats.bypass);
                let fresh = compute.await?;
                let answer = self
                    .store(tiers, key, policy, fresh, None)
                    .instrument(telemetry::spans::cache_fill())
                    .await;
                return Ok((answer, CacheStatus::Bypass));
            }
            _ => {
                CacheStats::bump(&self.stats.bypass);
                return Ok((Arc::new(compute.await?), CacheStatus::Bypass));
            }
        };
        let lookup = telemetry::spans::cache_lookup("l1");
        let found = tiers.l1.get(key).instrument(lookup.clone()).await;
        lookup.record("cache.hit", found.is_some());
        if let Some(answer) = found {
            CacheStats::bump(&self.stats.l1_hits);
            return Ok((answer, CacheStatus::HitL1));
        }
        CacheStats::bump(&self.stats.l1_misses);
        let lead = async { Shared { outcome: self.lead(tiers, key, policy, compute).await, budget } };
        // Boxed: only a miss gets here, and unboxed this future would make
        // every request's future (hits and bypasses too) 4 KB larger.
        let joined = Box::pin(tiers.coalescer.run(*key, lead, |shared| shared.serves(budget))).await;
        if joined.coalesced {
            CacheStats::bump(&self.stats.coalesced);
        }
        joined.outcome.outcome
    }

    /// The coalescing leader's work: L2, then (with fleet-wide coalescing)
    /// the fleet's claim, then the model.
    async fn lead(
        &self,
        tiers: &Tiers,
        key: &CacheKey,
        policy: &RouteCache,
        compute: Compute<'_>,
    ) -> Outcome {
        let mut marker = None;
        if let Some(l2) = &tiers.l2 {
            let lookup = telemetry::spans::cache_lookup("l2");
            let (found, claimed) =
                fleet::look_up(l2, key, policy, &self.stats).instrument(lookup.clone()).await;
            lookup.record("cache.hit", found.is_some());
            marker = claimed;
            if let Some(bytes) = found {
                match value_codec::decode(&bytes) {
                    Ok(answer) => {
                        CacheStats::bump(&self.stats.l2_hits);
                        let answer = Arc::new(answer);
                        tiers.l1.insert(*key, L1Entry::new(answer.clone(), policy.ttl, bytes.len())).await;
                        return Ok((answer, CacheStatus::HitL2));
                    }
                    Err(e) => {
                        CacheStats::bump(&self.stats.l2_decode_errors);
                        tracing::debug!(error = %e, "undecodable L2 value; treated as a miss");
                    }
                }
            }
        }
        let answer = match compute.await {
            Ok(answer) => answer,
            Err(e) => {
                release(tiers, marker);
                return Err(e);
            }
        };
        let stored =
            self.store(tiers, key, policy, answer, marker).instrument(telemetry::spans::cache_fill()).await;
        Ok((stored, CacheStatus::Miss))
    }

    /// Stores a fresh answer in L1 and queues it for L2 (then deletes the
    /// fleet `marker` this replica holds, if any); returns the compact copy
    /// that L1 holds.
    async fn store(
        &self,
        tiers: &Tiers,
        key: &CacheKey,
        policy: &RouteCache,
        answer: Answer,
        marker: Option<String>,
    ) -> Arc<Answer> {
        if !cacheable(&answer) {
            release(tiers, marker);
            return Arc::new(answer);
        }
        let encoded = value_codec::encode(&answer);
        // One contiguous copy: the entry's size is its weight, and it does
        // not keep the batch's output buffers alive.
        let confidence = answer.confidence;
        let mut compact = value_codec::decode(&encoded).unwrap_or(answer);
        compact.confidence = confidence;
        let compact = Arc::new(compact);
        tiers.l1.insert(*key, L1Entry::new(compact.clone(), policy.ttl, encoded.len())).await;
        CacheStats::bump(&self.stats.stores);
        if let (Some(l2), Some(writer)) = (&tiers.l2, &tiers.writer) {
            let job = WriteJob {
                redis_key: l2.redis_key(key),
                value: encoded,
                ttl: policy.l2_ttl,
                release: marker,
            };
            writer.enqueue(job);
        }
        compact
    }

    /// The raw-bytes key of an infer request (`parts`) when exact-repeat
    /// cache applies to it ([`repeat`]): a cached route, no
    /// `Cache-Control` directive, not an event stream.
    pub fn repeat_key(
        &self,
        config: &Config,
        target: &Target,
        headers: &HeaderMap,
        parts: RepeatParts<'_>,
    ) -> Option<RepeatKey> {
        self.tiers.as_ref()?;
        config.route(&target.public_name).filter(|r| target.is_route && r.cache.enabled)?;
        if Control::from_headers(headers) != Control::Normal || crate::endpoint::accepts_event_stream(headers)
        {
            return None;
        }
        Some(RepeatKey::of(&parts))
    }

    /// The remembered reply for `key`, while L1 still holds the very
    /// answer it was built from; counted as an L1 hit. A stale entry is
    /// dropped and `None` returned (the request then takes the full path).
    pub async fn remembered(&self, key: &RepeatKey) -> Option<Arc<RepeatEntry>> {
        let tiers = self.tiers.as_ref()?;
        let entry = tiers.repeats.get(key).await?;
        match tiers.l1.get(&entry.canonical).await {
            Some(held) if Arc::ptr_eq(&held, &entry.answer) => {
                CacheStats::bump(&self.stats.l1_hits);
                CacheStats::bump(&self.stats.repeat_hits);
                Some(entry)
            }
            _ => {
                tiers.repeats.invalidate(key).await;
                None
            }
        }
    }

    /// Remembers `reply` (built from `answer`) for exact repeats of the
    /// request under `key`; only after a lookup plan, whose answer L1 holds.
    pub async fn remember(
        &self,
        key: RepeatKey,
        plan: &CachePlan,
        answer: &Arc<Answer>,
        reply: &Reply,
        request_id: Option<String>,
    ) {
        let (Some(tiers), CachePlan::Lookup(canonical, policy)) = (&self.tiers, plan) else { return };
        if !cacheable(answer) {
            return;
        }
        let entry = RepeatEntry::new(*canonical, answer.clone(), reply.clone(), request_id, policy.ttl);
        tiers.repeats.insert(key, entry).await;
    }

    /// Background work for the server's lifetime: connect L2, then run the
    /// L2 writer. Returns at once without L2. Run it inside the server's
    /// runtime ([`service::CacheService`]).
    pub async fn run_background(&self) {
        let Some(Tiers { l2: Some(l2), writer: Some(writer), .. }) = &self.tiers else { return };
        l2.warm_up().await;
        writer.run(l2).await;
    }

    /// Writes what is still queued for L2, best effort within `deadline`.
    /// Call after the server stopped (it builds its own runtime).
    pub fn flush_on_shutdown(&self, deadline: Duration) {
        if let Some(Tiers { l2: Some(l2), writer: Some(writer), .. }) = &self.tiers {
            writer.flush_blocking(l2, deadline);
        }
    }

    /// Counters and gauges, for the admin stats and metrics.
    pub fn snapshot(&self) -> CacheSnapshot {
        let mut snap = self.stats.counters();
        if let Some(tiers) = &self.tiers {
            snap.enabled = true;
            snap.l1_entries = tiers.l1.entry_count();
            snap.l1_bytes = tiers.l1.weighted_size();
            snap.l1_max_bytes = tiers.l1.max_bytes();
            snap.l2_configured = tiers.l2.is_some();
            snap.l2_breaker = tiers.l2.as_ref().map_or("none", |l2| l2.breaker_state().label());
        } else {
            snap.l2_breaker = "none";
        }
        snap
    }
}

/// Who and what `target`'s requests address, as their keys take it.
fn key_scope<'a>(
    config: &'a Config,
    target: &'a Target,
    route: &'a RouteConfig,
    tenant: Option<&'a str>,
) -> KeyScope<'a> {
    let models = target
        .models
        .iter()
        .map(|name| {
            let spec = config.models.iter().find(|m| &m.name == name);
            ModelGeneration {
                name,
                version: spec.map_or(0, |s| s.version),
                path: spec.map_or(Path::new(""), |s| s.path.as_path()),
            }
        })
        .collect();
    KeyScope {
        name: &target.public_name,
        is_route: target.is_route,
        models,
        policy: &route.fingerprint,
        tenant,
    }
}

/// Deletes a fleet marker in the background: the replicas waiting on it
/// then compute their own answer at once instead of at the end of their wait.
fn release(tiers: &Tiers, marker: Option<String>) {
    if let (Some(l2), Some(marker)) = (tiers.l2.clone(), marker) {
        tokio::spawn(async move { fleet::release(&l2, &marker).await });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_runtime::RuntimeError;

    fn shared(outcome: Result<bool, GatewayError>) -> Shared {
        let outcome = outcome.map(|degraded| {
            let answer = Answer {
                model: "m".into(),
                version: 1,
                device: router_policies::Device::Cpu,
                pool: "cpu".into(),
                reason: router_policies::Reason::CascadeNoBudget,
                batch_size: 1,
                outputs: Vec::new(),
                budget_ms: 10,
                degraded,
                confidence: None,
            };
            (Arc::new(answer), CacheStatus::Miss)
        });
        Shared { outcome, budget: Duration::from_millis(10) }
    }

    #[test]
    fn budget_dependent_outcomes_reach_only_followers_with_no_larger_budget() {
        let (tighter, same, roomier) =
            (Duration::from_millis(5), Duration::from_millis(10), Duration::from_secs(1));
        let shed = GatewayError::Shed {
            route: "r".into(),
            reason: router_policies::Reason::Shed,
            retry_after: Duration::ZERO,
        };
        let overload = GatewayError::Runtime(RuntimeError::Overloaded {
            model: "m".into(),
            pool: "cpu".into(),
            retry_after: Duration::ZERO,
        });
        for own in [shared(Ok(true)), shared(Err(shed)), shared(Err(overload))] {
            assert!(own.serves(tighter) && own.serves(same));
            assert!(!own.serves(roomier), "a roomier budget computes its own");
        }
        let bad_input = GatewayError::Runtime(RuntimeError::UnknownOutput {
            model: "m".into(),
            output: "o".into(),
            expected: "label".into(),
        });
        for common in [shared(Ok(false)), shared(Err(bad_input))] {
            assert!(common.serves(tighter) && common.serves(roomier));
        }
    }
}
