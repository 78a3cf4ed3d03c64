//! Fleet-wide request limits (`[fleet_limits]`): each request rate (GCRA)
//! and daily quota of a tenant's scopes held in the cache's Redis, so a
//! tenant's limit holds across every replica instead of per process.
//!
//! One request is one script ([`SCRIPT`]) run atomically in Redis:
//! 1. Redis's own clock (`TIME`) is the time base, so replicas with skewed
//!    clocks agree on rates and on the UTC day.
//! 2. Each limited scope's daily quota is checked (a hash of the day and
//!    its count); a full one refuses (`daily`, until 00:00 UTC).
//! 3. Each scope's request rate is checked (GCRA: the theoretical arrival
//!    time, `tat`, in microseconds; a request passes when
//!    `max(tat, now) + T - T * burst <= now`); one over refuses
//!    (`requests`, with the wait).
//! 4. Only when every check passed is anything spent: each day's count is
//!    raised and each `tat` moved on. A refused request spends nothing in
//!    any scope (the local limiter keeps a rate cell one scope gave).
//!
//! Keys ([`scope_keys`]) are `<namespace>:tenant:{<tenant>}:<scope>:rate|day`,
//! `<scope>` `all` or `route:<route>`. The tenant is a Redis Cluster hash
//! tag: all of a tenant's keys share one slot, so one script can touch
//! them all in a cluster. Names outside `[A-Za-z0-9_.-]` are written as
//! `%` and their hex bytes, so no name can close the tag or fake another
//! scope's key.
//!
//! Rows per second and `concurrent` stay per replica (they meter compute,
//! which is local). While Redis is unreachable (the L2's breaker open, a
//! command failed or timed out) each replica falls back to its local share
//! ([`local_share`]) or, with `fail = "closed"`, refuses.

use super::refusal::Standing;
use super::LimitKind;
use crate::config::tenant_section::{Rate, TenantLimits};
use redis::{Cmd, Value};
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// Where the fleet's counts are kept: the cache's Redis L2
/// (`crate::cache::l2`) implements it with its connection, its lookup
/// timeout and its breaker, so this module needs no Redis client of its own.
pub trait FleetStore: Sync {
    /// The key prefix (`[cache] redis.namespace`).
    fn namespace(&self) -> &str;

    /// Runs `cmd`; `None` when Redis is unreachable: skipped by the open
    /// breaker, failed, or past the timeout (each failure feeds the breaker).
    fn eval<'a>(&'a self, cmd: Cmd) -> Pin<Box<dyn Future<Output = Option<Value>> + Send + 'a>>;
}

/// The admission script (module docs, steps 1-4). `KEYS[2i-1]`,
/// `KEYS[2i]`: scope i's rate and day keys; `ARGV[3i-2]`: its period in
/// microseconds (0: no rate), `ARGV[3i-1]`: its burst, `ARGV[3i]`: its
/// daily quota (0: none). Returns `{0, 0, 0, left_1, day_left_1, ...}`
/// (`-1`: that limit is not set) or `{1 | 2, i, wait_us}` (daily |
/// requests refused in scope i).
pub const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local today = math.floor(tonumber(t[1]) / 86400)
local n = #KEYS / 2
local function int(x) return string.format('%.0f', x) end
local used = {}
for i = 1, n do
  local quota = tonumber(ARGV[3 * i])
  if quota > 0 then
    local d = redis.call('HMGET', KEYS[2 * i], 'day', 'used')
    local count = 0
    if tonumber(d[1]) == today then count = tonumber(d[2]) or 0 end
    if count >= quota then return {1, i, (today + 1) * 86400000000 - now} end
    used[i] = count
  end
end
local tats = {}
for i = 1, n do
  local period = tonumber(ARGV[3 * i - 2])
  if period > 0 then
    local burst = tonumber(ARGV[3 * i - 1])
    local tat = tonumber(redis.call('GET', KEYS[2 * i - 1]) or '0')
    if tat < now then tat = now end
    local next_tat = tat + period
    local allow_at = next_tat - period * burst
    if allow_at > now then return {2, i, allow_at - now} end
    tats[i] = next_tat
  end
end
local out = {0, 0, 0}
for i = 1, n do
  local period = tonumber(ARGV[3 * i - 2])
  local left, day_left = -1, -1
  if tats[i] then
    local burst = tonumber(ARGV[3 * i - 1])
    redis.call('SET', KEYS[2 * i - 1], int(tats[i]), 'PX', int(math.ceil((tats[i] - now) / 1000) + 1000))
    left = math.floor((period * burst - (tats[i] - now)) / period)
  end
  if used[i] then
    redis.call('HSET', KEYS[2 * i], 'day', int(today), 'used', int(used[i] + 1))
    redis.call('EXPIRE', KEYS[2 * i], 172800)
    day_left = tonumber(ARGV[3 * i]) - used[i] - 1
  end
  out[#out + 1] = left
  out[#out + 1] = day_left
end
return out
";

/// `name` as it appears in a key: itself when it is made of
/// `[A-Za-z0-9_.-]`, else `%` and the hex of its bytes.
fn key_part(name: &str) -> Cow<'_, str> {
    let plain = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if plain {
        return Cow::Borrowed(name);
    }
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    Cow::Owned(format!("%{hex}"))
}

/// The rate key and the day key of `tenant`'s scope (`route`: its limits
/// on that route; `None`: across routes), under `namespace`.
pub fn scope_keys(namespace: &str, tenant: &str, route: Option<&str>) -> (String, String) {
    let scope = match route {
        None => Cow::Borrowed("all"),
        Some(route) => Cow::Owned(format!("route:{}", key_part(route))),
    };
    let base = format!("{namespace}:tenant:{{{}}}:{scope}", key_part(tenant));
    (format!("{base}:rate"), format!("{base}:day"))
}

/// GCRA's period (`1 / per_s`) in whole microseconds, at least 1.
fn period_us(rate: Rate) -> u64 {
    // per_s is in (0, 1e6] by the config check; `as` saturates.
    ((1_000_000.0 / rate.per_s).round() as u64).max(1)
}

/// The `EVAL` of [`SCRIPT`] for `tenant`'s `scopes` (route or `None`,
/// limits), in order.
pub fn command(namespace: &str, tenant: &str, scopes: &[(Option<&str>, TenantLimits)]) -> Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(SCRIPT).arg(scopes.len() * 2);
    for (route, _) in scopes {
        let (rate, day) = scope_keys(namespace, tenant, *route);
        cmd.arg(rate).arg(day);
    }
    for (_, limits) in scopes {
        let (period, burst) = limits.requests.map_or((0, 0), |r| (period_us(r), r.burst));
        cmd.arg(period).arg(burst).arg(limits.requests_per_day.unwrap_or(0));
    }
    cmd
}

/// What the script decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted; what is left in each scope, in order.
    Admitted(Vec<Standing>),
    /// Refused by `kind` in scope `scope` (0-based); a retry may pass
    /// after `retry_after`.
    Refused {
        /// The refusing scope's index.
        scope: usize,
        /// `Requests` or `Daily`.
        kind: LimitKind,
        /// The wait.
        retry_after: Duration,
    },
}

/// Reads the script's answer for `scopes` scopes; `None` when it has
/// another shape (an answer this version did not write).
pub fn verdict(value: &Value, scopes: usize) -> Option<Verdict> {
    let Value::Array(items) = value else { return None };
    let ints: Vec<i64> =
        items.iter().map(|v| if let Value::Int(n) = v { Some(*n) } else { None }).collect::<Option<_>>()?;
    match ints.as_slice() {
        [0, _, _, rest @ ..] if rest.len() == scopes * 2 => Some(Verdict::Admitted(
            rest.chunks(2)
                .map(|pair| Standing {
                    requests_left: u32::try_from(pair[0]).ok(),
                    day_left: u64::try_from(pair[1]).ok(),
                })
                .collect(),
        )),
        [code @ (1 | 2), i, wait_us] if (1..=scopes as i64).contains(i) => Some(Verdict::Refused {
            scope: usize::try_from(*i - 1).ok()?,
            kind: if *code == 1 { LimitKind::Daily } else { LimitKind::Requests },
            retry_after: Duration::from_micros(u64::try_from(*wait_us).unwrap_or(0)),
        }),
        _ => None,
    }
}

/// Whether `limits` has a limit the fleet holds (a request rate or a
/// daily quota).
pub fn held_by_fleet(limits: &TenantLimits) -> bool {
    limits.requests.is_some() || limits.requests_per_day.is_some()
}

/// The share of `limits` one of `replicas` replicas enforces while Redis
/// is unreachable: the request rate, its burst and the daily quota
/// divided by `replicas` (the burst and the quota at least 1); rows and
/// `concurrent` are per replica already and stay as they are.
pub fn local_share(limits: &TenantLimits, replicas: u32) -> TenantLimits {
    let n = replicas.max(1);
    let requests =
        limits.requests.map(|r| Rate { per_s: r.per_s / f64::from(n), burst: (r.burst / n).max(1) });
    let requests_per_day = limits.requests_per_day.map(|q| (q / u64::from(n)).max(1));
    TenantLimits { requests, requests_per_day, ..*limits }
}

#[cfg(test)]
mod tests;
