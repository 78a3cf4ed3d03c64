//! What the rollouts put in force on a reload ([`Rollouts::overlay`]),
//! the candidates posted to the admin API ([`Rollouts::post`]) and what a
//! store version's rollout came to ([`Rollouts::status_of`]).

use super::{Record, Rollouts, Status};
use crate::config::candidate_section::{CandidateConfig, CandidateSource};
use crate::config::draft_section::DraftConfig;
use crate::config::{Config, RouteConfig};
use router_policies::{FixedPolicy, PolicyConfig};
use std::collections::HashMap;

impl Rollouts {
    /// Applies what the rollouts want in force to `config`, the file's
    /// config about to be reloaded (or started with), after the model
    /// store's versions were resolved:
    /// 1. a candidate posted to the admin API replaces the route's own;
    /// 2. a route's candidate keeps its record when it is the same plan
    ///    (a changed or new one gets a fresh record): mirroring, the
    ///    step wanted is put in force; promoted, the candidate serves the
    ///    route alone (a store version needs nothing: its resolution
    ///    already serves it under the model's name); rolled back, the
    ///    route loses its candidate;
    /// 3. records of routes without a candidate are dropped, except a store
    ///    version's finished rollout (kept in view: it says why the
    ///    version serves or does not).
    pub fn overlay(&self, config: &mut Config) {
        let posted = self.posted.lock().clone();
        let mut records = self.records.lock();
        let mut kept = HashMap::new();
        let mut promoted = Vec::new();
        for route in &mut config.routes {
            if let Some(candidate) = posted.get(&route.name) {
                route.candidate = Some(candidate.clone());
            }
            let Some(candidate) = route.candidate.clone() else {
                let finished_store = |r: &Record| {
                    r.candidate.source == CandidateSource::Store && r.status != Status::Mirroring
                };
                if let Some(record) = records.remove(&route.name).filter(finished_store) {
                    kept.insert(route.name.clone(), record);
                }
                continue;
            };
            let record = match records.remove(&route.name) {
                Some(r) if r.candidate.same_plan(&candidate) => r,
                _ => Record::new(&candidate),
            };
            match &record.status {
                Status::Mirroring => {
                    if let Some(c) = &mut route.candidate {
                        c.step = record.step;
                    }
                }
                Status::Promoted { .. } if candidate.source == CandidateSource::Store => {
                    route.candidate = None
                }
                Status::Promoted { .. } => {
                    promote_route(route, &candidate.model);
                    promoted.push(route.name.clone());
                }
                Status::RolledBack { .. } => route.candidate = None,
            }
            kept.insert(route.name.clone(), record);
        }
        *records = kept;
        for route in config.routes.iter_mut().filter(|r| promoted.contains(&r.name)) {
            *route = crate::config::route_section::with_fingerprint(
                route.clone(),
                &config.models,
                &config.proxy.upstreams,
            );
        }
    }

    /// Where the rollout of `candidate` (a model name) stands, over every
    /// route that mirrors it: rolled back on any route wins, then promoted
    /// on any, then mirroring; `None` when no route has it.
    pub fn status_of(&self, candidate: &str) -> Option<Status> {
        let records = self.records.lock();
        let states: Vec<&Status> =
            records.values().filter(|r| r.candidate.model == candidate).map(|r| &r.status).collect();
        let rank = |s: &&Status| match s {
            Status::RolledBack { .. } => 0,
            Status::Promoted { .. } => 1,
            Status::Mirroring => 2,
        };
        states.into_iter().min_by_key(rank).cloned()
    }

    /// Puts `candidate` (checked, source [`CandidateSource::Admin`]) on
    /// `route` from the next reload on, in place of the file's, as a fresh
    /// rollout; what it returns undoes it if that reload is rejected
    /// ([`Rollouts::undo`]).
    pub fn post(&self, route: &str, candidate: CandidateConfig) -> Undo {
        let record = self.records.lock().remove(route);
        let posted = self.posted.lock().insert(route.to_string(), candidate);
        Undo { route: route.to_string(), posted, record }
    }

    /// Withdraws the candidate posted on `route` (the file's is in force
    /// again from the next reload); `None` when none was posted.
    pub fn withdraw(&self, route: &str) -> Option<Undo> {
        let posted = self.posted.lock().remove(route)?;
        let record = self.records.lock().remove(route);
        Some(Undo { route: route.to_string(), posted: Some(posted), record })
    }

    /// Puts back what a [`Rollouts::post`] or [`Rollouts::withdraw`]
    /// changed, when its reload was rejected.
    pub fn undo(&self, undo: Undo) {
        let mut posted = self.posted.lock();
        match undo.posted {
            Some(c) => posted.insert(undo.route.clone(), c),
            None => posted.remove(&undo.route),
        };
        let mut records = self.records.lock();
        match undo.record {
            Some(r) => records.insert(undo.route, r),
            None => records.remove(&undo.route),
        };
    }
}

/// What a posted candidate replaced: the candidate posted before (if any)
/// and the route's rollout record.
pub struct Undo {
    route: String,
    posted: Option<CandidateConfig>,
    record: Option<Record>,
}

/// The route as the promoted candidate serves it: the candidate alone,
/// `fixed` on it; the live models' pair (draft), calibration and the
/// candidate itself are gone. The caller refreshes the fingerprint.
fn promote_route(route: &mut RouteConfig, model: &str) {
    route.models = vec![model.to_string()];
    route.policy = PolicyConfig::Fixed(FixedPolicy { model: model.to_string() });
    route.draft = DraftConfig::default();
    route.calibrate = None;
    route.candidate = None;
}
