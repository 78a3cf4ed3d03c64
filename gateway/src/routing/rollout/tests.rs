//! The rollout registry's plan: steps, promotion, rollback, by hand, and
//! what a reload puts in force ([`Rollouts::overlay`]).

use super::*;
use crate::config::candidate_section::{CandidateSource, CompareConfig, CompareKind, GateConfig};
use crate::config::Config;
use router_policies::{FixedPolicy, PolicyConfig};

fn plan() -> CandidateConfig {
    CandidateConfig {
        model: "cand".into(),
        steps: vec![0.5, 0.75, 1.0],
        plan: true,
        gate: GateConfig { min_agreement: 0.99, max_p99_ratio: 10.0, max_error_ratio: 1.0 },
        min_rows: 100,
        compare: CompareConfig { kind: CompareKind::Auto, output: None, min_cosine: 0.99, tolerance: 1e-5 },
        step: 0,
        source: CandidateSource::File,
        serve: false,
        cpu_ceiling: 1.0,
    }
}

/// Counts `rows` compared rows on the route's step, `agreeing` of them agreeing.
fn observe(rollouts: &Rollouts, candidate: &CandidateConfig, rows: u64, agreeing: u64) {
    rollouts.with_record("r", candidate, |r| {
        for c in [&mut r.total, &mut r.at_step] {
            c.rows += rows;
            c.agreeing += agreeing;
            c.live.calls += 1;
            c.candidate.calls += 1;
            c.live.latency.add(1000.0);
            c.candidate.latency.add(1000.0);
        }
    });
}

fn config(candidate: &CandidateConfig) -> Config {
    let text = "[[models]]\nname = \"live\"\npath = \"live.onnx\"\n[[models]]\nname = \"cand\"\npath = \"cand.onnx\"\n\
                [[routes]]\nname = \"r\"\nmodels = [\"live\"]\ncandidate = { model = \"cand\", steps = [0.5, 0.75, 1.0] }\n";
    let mut config = crate::config::parse(text, std::path::Path::new("/tmp")).unwrap();
    config.routes[0].candidate = Some(candidate.clone());
    config
}

#[test]
fn agreeing_steps_advance_then_promote_through_the_overlay() {
    let rollouts = Rollouts::default();
    let c = plan();
    observe(&rollouts, &c, 100, 100);
    assert!(rollouts.evaluate().is_empty(), "100 perfect rows do not prove 0.99 yet: hold");
    observe(&rollouts, &c, 400, 400);
    let moves = rollouts.evaluate();
    assert_eq!(moves.len(), 1);
    assert_eq!((moves[0].step, &moves[0].status), (1, &Status::Mirroring));
    let mut cfg = config(&c);
    rollouts.overlay(&mut cfg);
    assert_eq!(cfg.routes[0].candidate.as_ref().unwrap().share(), 0.75, "the next share is in force");
    assert_eq!(rollouts.views()[0].step_comparison.rows, 0, "a step's evidence starts afresh");
    observe(&rollouts, &c, 500, 500);
    assert_eq!(rollouts.evaluate()[0].status, Status::Promoted { by: Actor::Gate });
    let mut cfg = config(&c);
    rollouts.overlay(&mut cfg);
    let route = &cfg.routes[0];
    assert_eq!(route.models, ["cand"]);
    assert!(route.candidate.is_none());
    assert_eq!(route.policy, PolicyConfig::Fixed(FixedPolicy { model: "cand".into() }));
    assert!(route.fingerprint.contains("cand@"), "{}", route.fingerprint);
    assert!(rollouts.evaluate().is_empty(), "a promoted rollout is done");
}

#[test]
fn disagreement_rolls_back_with_the_reason_and_the_file_is_what_serves() {
    let rollouts = Rollouts::default();
    let c = plan();
    observe(&rollouts, &c, 200, 180);
    let moves = rollouts.evaluate();
    let Status::RolledBack { by: Actor::Gate, reasons } = &moves[0].status else { panic!("{moves:?}") };
    assert!(reasons[0].contains("agreement 0.9000"), "{reasons:?}");
    let mut cfg = config(&c);
    rollouts.overlay(&mut cfg);
    assert_eq!(cfg.routes[0].models, ["live"]);
    assert!(cfg.routes[0].candidate.is_none(), "no more mirroring");
    assert_eq!(rollouts.by_hand("r", true), Err(RefusedMove::Finished("rolled_back")));
    // A changed candidate in the file starts a fresh rollout.
    let changed = CandidateConfig { min_rows: 50, ..c };
    let mut cfg = config(&changed);
    rollouts.overlay(&mut cfg);
    assert_eq!(cfg.routes[0].candidate.as_ref().unwrap().share(), 0.5);
    assert_eq!(rollouts.views()[0].status, Status::Mirroring);
}

#[test]
fn operators_promote_or_roll_back_by_hand() {
    let rollouts = Rollouts::default();
    assert_eq!(rollouts.by_hand("r", true), Err(RefusedMove::NoRollout("r".into())));
    let mut cfg = config(&plan());
    rollouts.overlay(&mut cfg);
    let t = rollouts.by_hand("r", false).unwrap();
    assert!(matches!(&t.status, Status::RolledBack { by: Actor::Operator, .. }));
    let rollouts = Rollouts::default();
    rollouts.overlay(&mut cfg);
    assert_eq!(rollouts.by_hand("r", true).unwrap().status, Status::Promoted { by: Actor::Operator });
}

#[test]
fn a_posted_candidate_replaces_the_files_until_undone_or_withdrawn() {
    let rollouts = Rollouts::default();
    let file = plan();
    let posted = CandidateConfig { model: "live2".into(), source: CandidateSource::Admin, ..plan() };
    let mut cfg = config(&file);
    rollouts.overlay(&mut cfg);
    observe(&rollouts, &file, 10, 10);
    let undo = rollouts.post("r", posted.clone());
    let mut cfg = config(&file);
    rollouts.overlay(&mut cfg);
    assert_eq!(cfg.routes[0].candidate.as_ref().map(|c| c.model.as_str()), Some("live2"));
    assert_eq!(rollouts.views()[0].comparison.rows, 0, "a posted candidate starts afresh");
    rollouts.undo(undo);
    let mut cfg = config(&file);
    rollouts.overlay(&mut cfg);
    assert_eq!(cfg.routes[0].candidate.as_ref().map(|c| c.model.as_str()), Some("cand"));
    assert_eq!(rollouts.views()[0].comparison.rows, 10, "undone: the file's rollout and its rows are back");
    assert!(rollouts.withdraw("r").is_none(), "nothing posted");
    let _ = rollouts.post("r", posted);
    assert!(rollouts.withdraw("r").is_some());
}

#[test]
fn a_store_versions_finished_rollout_stays_in_view_and_says_how_it_ended() {
    let rollouts = Rollouts::default();
    let store = CandidateConfig { source: CandidateSource::Store, ..plan() };
    let mut cfg = config(&store);
    rollouts.overlay(&mut cfg);
    assert_eq!(rollouts.status_of("cand"), Some(Status::Mirroring));
    assert!(rollouts.by_hand("r", true).is_ok());
    assert_eq!(rollouts.status_of("cand"), Some(Status::Promoted { by: Actor::Operator }));
    // The store's next resolution serves the version under its own name:
    // the route has no candidate, its models are untouched.
    let mut cfg = config(&store);
    cfg.routes[0].candidate = None;
    rollouts.overlay(&mut cfg);
    assert_eq!(cfg.routes[0].models, ["live"]);
    assert_eq!(rollouts.views()[0].status, Status::Promoted { by: Actor::Operator });
    assert_eq!(rollouts.status_of("nope"), None);
}
