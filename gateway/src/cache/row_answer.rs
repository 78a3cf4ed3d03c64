//! Answering a batched request row by row ([`super::rows`]): the plan,
//! then the lookups, the smaller batch and the stores.
//!
//! How a request goes through it ([`ResponseCache::row_plan`], then
//! [`ResponseCache::answer_rows`] around `routing::execute`):
//! 1. Plan: as for a whole request ([`ResponseCache::plan`]), and besides
//!    the route answers with one model, fixed (a cascade decides per
//!    request which model answers, so its rows are cached whole), that model's rows are
//!    independent, and the request has two rows or more. Otherwise the
//!    request takes the whole-request path.
//! 2. Each distinct row key is looked up in L1 (a batch holding one text
//!    twice computes it once).
//! 3. The rows not found are claimed in the coalescer: a row another
//!    request computes now is waited for; the others this request leads,
//!    looks up in L1 once more (a leader may have stored it between the
//!    lookup and the claim), then in L2.
//! 4. The rows still missing run as one batch, in request order; each
//!    row of its answer is stored on its own (a degraded answer is not)
//!    and handed to the requests waiting for it.
//! 5. The waited-for rows arrive; those whose leader failed or went away
//!    (or whose outcome belongs to the leader's budget) run as a second
//!    batch of this request's own.
//! 6. The rows are joined in request order ([`super::rows::assemble`]).
//!
//! `x-cache`: `hit-l1` (every row from L1), `hit-l2` (every row from
//! L1 or L2, some from L2), `miss` (none cached), `partial` (some), `bypass`
//! (`no-cache`: every row computed and stored); `x-switchyard-cached-rows:
//! k/n` counts the rows served from L1 or L2.

use super::coalesce::{Claim, Lead, Wait};
use super::control::Control;
use super::key::CacheKey;
use super::l1::L1Entry;
use super::rows::{self, RowPlan, RowsServed};
use super::stats::CacheStats;
use super::{fleet, key_scope, value_codec, CacheStatus, Compute, ResponseCache, Shared, Tiers};
use crate::config::Config;
use crate::error::GatewayError;
use crate::target::Target;
use http::HeaderMap;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_protocol::answer::Answer;
use switchyard_protocol::v2::DecodedRequest;

/// Runs the model on the given rows (indices into the request's rows, in
/// that order) and answers with one output row per given row.
pub type RowCompute<'a> = Box<dyn FnMut(Vec<usize>) -> Compute<'a> + Send + 'a>;

/// What a request answered row by row gets: the assembled answer, the
/// `x-cache` status and how many rows were cached.
pub type RowOutcome = Result<(Arc<Answer>, CacheStatus, RowsServed), GatewayError>;

/// Where one distinct row's answer came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    L1,
    L2,
    Computed,
}

/// One distinct row key of the request, and its answer once known.
struct Slot {
    key: CacheKey,
    answer: Option<(Arc<Answer>, Source)>,
}

/// A distinct row this request computes: its slot, its coalescer lead
/// (none for a `no-cache` refresh or a retry) and its fleet marker.
struct Pending<'c> {
    slot: usize,
    lead: Option<Lead<'c, Shared>>,
    marker: Option<String>,
}

impl Pending<'_> {
    fn own(slot: usize) -> Self {
        Pending { slot, lead: None, marker: None }
    }
}

/// What one computed batch gave: each slot's stored row, and the batch's
/// answer (its explain fields describe the assembled answer).
struct Computed {
    rows: Vec<(usize, Arc<Answer>)>,
    meta: Answer,
}

impl ResponseCache {
    /// The row plan for a request to `target` when it is answered row by
    /// row (module docs, step 1); `None` sends it the whole-request way.
    pub fn row_plan(
        &self,
        config: &Config,
        target: &Target,
        tenant: Option<&str>,
        request: &DecodedRequest,
        headers: &HeaderMap,
    ) -> Option<RowPlan> {
        self.tiers.as_ref()?;
        let route = config.route(&target.public_name).filter(|r| target.is_route && r.cache.enabled)?;
        let [model] = target.models.as_slice() else { return None };
        if !config.rows_independent(model) {
            return None;
        }
        let control = Control::from_headers(headers);
        if control == Control::NoStore {
            return None;
        }
        let rows = rows::batch_rows(request)?;
        let keys = rows::row_keys(&key_scope(config, target, route, tenant), request, rows).ok()?;
        Some(RowPlan { keys, policy: route.cache, refresh: control == Control::NoCache })
    }

    /// Answers per the row `plan` (module docs), running `compute` only
    /// for the rows no cache and no other request has. `budget` decides, as
    /// for a whole request, which outcomes of other requests' rows this one takes.
    pub async fn answer_rows(
        &self,
        plan: &RowPlan,
        budget: Duration,
        mut compute: RowCompute<'_>,
    ) -> RowOutcome {
        let total = plan.keys.len();
        let Some(tiers) = &self.tiers else {
            let answer = compute((0..total).collect()).await?;
            return Ok((Arc::new(answer), CacheStatus::Bypass, RowsServed { cached: 0, total }));
        };
        let (mut slots, row_slot) = distinct(&plan.keys);
        let mut waits = Vec::new();
        let mut leads = Vec::new();
        if plan.refresh {
            CacheStats::bump(&self.stats.bypass);
            leads.extend((0..slots.len()).map(Pending::own));
        } else {
            for (s, slot) in slots.iter_mut().enumerate() {
                if let Some(found) = tiers.l1.get(&slot.key).await {
                    CacheStats::bump(&self.stats.l1_hits);
                    slot.answer = Some((found, Source::L1));
                    continue;
                }
                CacheStats::bump(&self.stats.l1_misses);
                match tiers.coalescer.claim(slot.key) {
                    Claim::Lead(lead) => match tiers.l1.get(&slot.key).await {
                        // Stored by a leader that finished between the
                        // lookup and the claim: not computed again.
                        Some(found) => {
                            let outcome = Ok((found.clone(), CacheStatus::HitL1));
                            lead.publish(Shared { outcome, budget: Duration::ZERO });
                            slot.answer = Some((found, Source::L1));
                        }
                        None => leads.push(Pending { slot: s, lead: Some(lead), marker: None }),
                    },
                    Claim::Wait(wait) => waits.push((s, wait)),
                }
            }
            leads = self.look_up_l2(tiers, plan, &mut slots, leads).await;
        }
        let mut meta = None;
        if !leads.is_empty() {
            let computed = self.compute_rows(tiers, plan, &mut compute, &row_slot, leads, budget).await?;
            meta = Some(fill(&mut slots, computed));
        }
        let retry = self.await_rows(&mut slots, waits, budget).await?;
        if !retry.is_empty() {
            let own = retry.into_iter().map(Pending::own).collect();
            let computed = self.compute_rows(tiers, plan, &mut compute, &row_slot, own, budget).await?;
            let batch = fill(&mut slots, computed);
            meta.get_or_insert(batch);
        }
        finish(&slots, &row_slot, meta, plan.refresh)
    }

    /// Step 3's L2 lookups, for the rows this request leads; a row found
    /// is stored in L1 and handed to its waiters. Returns the rows still missing.
    async fn look_up_l2<'c>(
        &self,
        tiers: &'c Tiers,
        plan: &RowPlan,
        slots: &mut [Slot],
        leads: Vec<Pending<'c>>,
    ) -> Vec<Pending<'c>> {
        let Some(l2) = &tiers.l2 else { return leads };
        let mut still = Vec::with_capacity(leads.len());
        for mut pending in leads {
            let slot = &mut slots[pending.slot];
            let (found, marker) = fleet::look_up(l2, &slot.key, &plan.policy, &self.stats).await;
            let decoded = found.and_then(|bytes| match value_codec::decode(&bytes) {
                Ok(answer) => Some((Arc::new(answer), bytes.len())),
                Err(e) => {
                    CacheStats::bump(&self.stats.l2_decode_errors);
                    tracing::debug!(error = %e, "undecodable L2 value; treated as a miss");
                    None
                }
            });
            let Some((answer, size)) = decoded else {
                pending.marker = marker;
                still.push(pending);
                continue;
            };
            CacheStats::bump(&self.stats.l2_hits);
            tiers.l1.insert(slot.key, L1Entry::new(answer.clone(), plan.policy.ttl, size)).await;
            if let Some(lead) = pending.lead {
                lead.publish(Shared {
                    outcome: Ok((answer.clone(), CacheStatus::HitL2)),
                    budget: Duration::ZERO,
                });
            }
            slot.answer = Some((answer, Source::L2));
        }
        still
    }

    /// Runs the `pending` rows as one batch, in request order, and stores
    /// each row of its answer (module docs, step 4). An error reaches
    /// every row's waiters.
    async fn compute_rows(
        &self,
        tiers: &Tiers,
        plan: &RowPlan,
        compute: &mut RowCompute<'_>,
        row_slot: &[usize],
        pending: Vec<Pending<'_>>,
        budget: Duration,
    ) -> Result<Computed, GatewayError> {
        let rows: Vec<usize> = pending.iter().map(|p| first_row(row_slot, p.slot)).collect();
        let count = rows.len();
        let answer = match compute(rows).await {
            Ok(answer) => answer,
            Err(e) => {
                for Pending { lead, marker, .. } in pending {
                    super::release(tiers, marker);
                    if let Some(lead) = lead {
                        lead.publish(Shared { outcome: Err(e.clone()), budget });
                    }
                }
                return Err(e);
            }
        };
        let pieces = rows::split_answer(&answer, count).map_err(|e| {
            GatewayError::Internal(format!("model {:?} is set rows_independent, but {e}", answer.model))
        })?;
        let mut stored = Vec::with_capacity(count);
        for (Pending { slot, lead, marker }, piece) in pending.into_iter().zip(pieces) {
            let key = plan.keys[first_row(row_slot, slot)];
            let row = self.store(tiers, &key, &plan.policy, piece, marker).await;
            if let Some(lead) = lead {
                lead.publish(Shared { outcome: Ok((row.clone(), CacheStatus::Miss)), budget });
            }
            stored.push((slot, row));
        }
        Ok(Computed { rows: stored, meta: answer })
    }

    /// Step 5: the rows other requests computed. Returns the slots to
    /// compute here after all; an error the leader's request shares with
    /// this one (one about the input) fails it.
    async fn await_rows(
        &self,
        slots: &mut [Slot],
        waits: Vec<(usize, Wait<Shared>)>,
        budget: Duration,
    ) -> Result<Vec<usize>, GatewayError> {
        let mut retry = Vec::new();
        for (s, wait) in waits {
            match wait.outcome().await.filter(|shared| shared.serves(budget)) {
                Some(Shared { outcome: Ok((answer, status)), .. }) => {
                    CacheStats::bump(&self.stats.coalesced);
                    let source = if status == CacheStatus::HitL2 { Source::L2 } else { Source::Computed };
                    slots[s].answer = Some((answer, source));
                }
                Some(Shared { outcome: Err(e), .. }) => return Err(e),
                None => retry.push(s),
            }
        }
        Ok(retry)
    }
}

/// The distinct keys of `keys` as slots, and each row's slot.
fn distinct(keys: &[CacheKey]) -> (Vec<Slot>, Vec<usize>) {
    let mut slots: Vec<Slot> = Vec::new();
    let mut index: HashMap<CacheKey, usize> = HashMap::new();
    let row_slot = keys
        .iter()
        .map(|key| {
            *index.entry(*key).or_insert_with(|| {
                slots.push(Slot { key: *key, answer: None });
                slots.len() - 1
            })
        })
        .collect();
    (slots, row_slot)
}

/// The first row of the request whose key is slot `slot`'s.
fn first_row(row_slot: &[usize], slot: usize) -> usize {
    row_slot.iter().position(|&s| s == slot).unwrap_or(0)
}

/// Puts a computed batch's rows in their slots; returns its answer.
fn fill(slots: &mut [Slot], computed: Computed) -> Answer {
    for (s, row) in computed.rows {
        slots[s].answer = Some((row, Source::Computed));
    }
    computed.meta
}

/// Step 6: the rows joined in request order, the `x-cache` status and the
/// count of cached rows.
fn finish(slots: &[Slot], row_slot: &[usize], meta: Option<Answer>, refresh: bool) -> RowOutcome {
    let mut rows = Vec::with_capacity(row_slot.len());
    let (mut cached, mut from_l2) = (0, false);
    for &s in row_slot {
        let Some((answer, source)) = &slots[s].answer else {
            return Err(GatewayError::Internal("a row was neither cached nor computed".into()));
        };
        cached += usize::from(*source != Source::Computed);
        from_l2 |= *source == Source::L2;
        rows.push(answer.clone());
    }
    let total = rows.len();
    let status = match (cached, refresh) {
        (_, true) => CacheStatus::Bypass,
        (0, false) => CacheStatus::Miss,
        (c, false) if c < total => CacheStatus::Partial,
        _ if from_l2 => CacheStatus::HitL2,
        _ => CacheStatus::HitL1,
    };
    let assembled = match &meta {
        Some(meta) => rows::assemble(&rows, meta),
        None => rows.first().map_or(Err("no rows".into()), |first| rows::assemble(&rows, first)),
    };
    let answer = assembled.map_err(GatewayError::Internal)?;
    Ok((Arc::new(answer), status, RowsServed { cached, total }))
}
