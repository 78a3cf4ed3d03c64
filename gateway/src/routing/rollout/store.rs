//! New model versions from the store through the routes' rollout plan
//! (`[repository] rollout = "gated"`), decided on each resolution of the
//! store (start-up, and every reload: the poller's, a rollout move's, an
//! operator's), per store model, by [`decide`]. With `A` the version the
//! model served under its own name in the previous generation and `N` its
//! newest selected version now:
//! 1. not gated, first sight of the model (start-up), `N` is `A`, `N` is
//!    older than `A` (a version was deleted) or `A` left the store: `N`
//!    serves under the model's name (the immediate swap);
//! 2. `N` was rolled back before: `A` keeps serving, `N` is not served;
//! 3. the rollout of candidate `<model>@N` was promoted: `N` serves;
//! 4. it was rolled back: `A` keeps serving, `N` is refused from now on;
//! 5. no route serves the model: there are no live answers to compare
//!    with, so `N` serves (logged);
//! 6. otherwise `A` keeps serving under the model's name, `N` is served as
//!    `<model>@N` and is the candidate ([`offer`]) of every route that
//!    serves the model and has no candidate of its own.
//!
//! A promotion or rollback is a reload like any rollout move; since the
//! resolution makes the decision, restarting forgets a refusal (the newest
//! version serves at start-up).

use super::Status;
use crate::config::candidate_section::CandidateConfig;
use crate::config::store_section::GateState;
use crate::config::RouteConfig;

/// What one store model serves after [`decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The newest version serves under the model's name.
    Newest,
    /// Version `serving` keeps the model's name; the newest is mirrored as
    /// a candidate (`mirror`) or not served at all.
    Keep {
        /// The version that keeps serving.
        serving: u64,
        /// Whether the newest version is served as `<model>@<version>`
        /// and offered to the routes as their candidate.
        mirror: bool,
    },
}

/// One store model as this resolution found it.
pub struct Found<'a> {
    /// Its name.
    pub model: &'a str,
    /// Its newest selected version.
    pub newest: u64,
    /// Whether `version` is still in the store with its model file.
    pub listed: &'a dyn Fn(u64) -> bool,
    /// Whether a route serves it.
    pub routed: bool,
}

/// The candidate name of a store model's version: `<model>@<version>`.
pub fn candidate_name(model: &str, version: u64) -> String {
    switchyard_store::triton::served_name(model, version, false)
}

/// Decides what `found` serves (module docs, steps 1-6) and records it in
/// `next`, from the previous generation's `previous`; `status` says where
/// the rollout of a candidate name stands.
pub fn decide(
    found: &Found<'_>,
    previous: Option<&GateState>,
    status: &dyn Fn(&str) -> Option<Status>,
    next: &mut GateState,
) -> Decision {
    let model = found.model.to_string();
    let refused = previous.and_then(|p| p.refused.get(found.model)).cloned().unwrap_or_default();
    let serving = previous.and_then(|p| p.serving.get(found.model)).copied();
    let keep = match serving {
        Some(a) if found.newest > a && (found.listed)(a) => a,
        _ => return newest(found, next, refused),
    };
    if refused.contains(&found.newest) {
        return keep_serving(next, &model, keep, refused, false);
    }
    match status(&candidate_name(found.model, found.newest)) {
        Some(Status::Promoted { .. }) => newest(found, next, refused),
        Some(Status::RolledBack { .. }) => {
            let mut refused = refused;
            refused.insert(found.newest);
            keep_serving(next, &model, keep, refused, false)
        }
        _ if !found.routed => {
            tracing::warn!(model = %found.model, version = found.newest,
                "gated store version: no route serves the model, nothing to compare with; it serves at once");
            newest(found, next, refused)
        }
        _ => {
            next.candidates.insert(model.clone(), found.newest);
            keep_serving(next, &model, keep, refused, true)
        }
    }
}

fn newest(found: &Found<'_>, next: &mut GateState, refused: std::collections::BTreeSet<u64>) -> Decision {
    next.serving.insert(found.model.to_string(), found.newest);
    if !refused.is_empty() {
        next.refused.insert(found.model.to_string(), refused);
    }
    Decision::Newest
}

fn keep_serving(
    next: &mut GateState,
    model: &str,
    serving: u64,
    refused: std::collections::BTreeSet<u64>,
    mirror: bool,
) -> Decision {
    next.serving.insert(model.to_string(), serving);
    if !refused.is_empty() {
        next.refused.insert(model.to_string(), refused);
    }
    Decision::Keep { serving, mirror }
}

/// Makes `candidate` (a copy of the store's plan named `<model>@<version>`)
/// the candidate of every route that serves `model` and has none.
pub fn offer(routes: &mut [RouteConfig], model: &str, candidate: &CandidateConfig) {
    for route in routes.iter_mut().filter(|r| r.models.iter().any(|m| m == model)) {
        if route.candidate.is_none() {
            route.candidate = Some(candidate.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::rollout::Actor;

    fn run(
        previous: Option<&GateState>,
        newest: u64,
        status: Option<Status>,
        routed: bool,
    ) -> (Decision, GateState) {
        let listed = |v: u64| v >= 1;
        let found = Found { model: "m", newest, listed: &listed, routed };
        let mut next = GateState::default();
        let decision =
            decide(&found, previous, &|name| (name == "m@2").then(|| status.clone()).flatten(), &mut next);
        (decision, next)
    }

    fn serving(v: u64) -> GateState {
        GateState { serving: [("m".to_string(), v)].into(), ..GateState::default() }
    }

    #[test]
    fn a_newer_version_is_mirrored_then_promoted_or_refused() {
        let (d, first) = run(None, 1, None, true);
        assert_eq!((d, first.serving["m"]), (Decision::Newest, 1), "start-up serves the newest");
        let (d, held) = run(Some(&first), 2, None, true);
        assert_eq!(d, Decision::Keep { serving: 1, mirror: true });
        assert_eq!(held.candidates["m"], 2);
        let (d, next) = run(Some(&held), 2, Some(Status::Mirroring), true);
        assert_eq!(d, Decision::Keep { serving: 1, mirror: true }, "still mirroring");
        let (d, promoted) = run(Some(&next), 2, Some(Status::Promoted { by: Actor::Gate }), true);
        assert_eq!((d, promoted.serving["m"]), (Decision::Newest, 2));
        let back = Status::RolledBack { by: Actor::Gate, reasons: vec![] };
        let (d, refused) = run(Some(&next), 2, Some(back), true);
        assert_eq!(d, Decision::Keep { serving: 1, mirror: false });
        assert!(refused.refused["m"].contains(&2));
        let (d, _) = run(Some(&refused), 2, None, true);
        assert_eq!(d, Decision::Keep { serving: 1, mirror: false }, "a refused version stays out");
    }

    #[test]
    fn no_route_an_older_newest_or_a_vanished_version_swap_at_once() {
        assert_eq!(run(Some(&serving(1)), 2, None, false).0, Decision::Newest, "nothing to compare with");
        assert_eq!(run(Some(&serving(3)), 2, None, true).0, Decision::Newest, "the newest went away");
        assert_eq!(run(Some(&serving(0)), 2, None, true).0, Decision::Newest, "the serving version left");
    }
}
