use crate::test_util::*;
use crate::{
    CascadePolicy, Device, Draw, FixedPolicy, LatencyBudgetPolicy, ModelWeight, PolicyConfig, PolicyIssue,
    Reason, WeightedPolicy,
};
use std::collections::HashSet;

#[derive(serde::Deserialize)]
struct Route {
    policy: PolicyConfig,
}

fn parse(policy: &str) -> Result<PolicyConfig, toml::de::Error> {
    toml::from_str::<Route>(&format!("policy = {policy}")).map(|r| r.policy)
}

fn route(models: &[&str]) -> Vec<String> {
    models.iter().map(|m| m.to_string()).collect()
}

fn paths(result: Result<(), Vec<PolicyIssue>>) -> Vec<String> {
    result.unwrap_err().into_iter().map(|i| i.path).collect()
}

#[test]
fn every_policy_parses_from_toml() {
    assert_eq!(
        parse(r#"{ type = "fixed", model = "m" }"#).unwrap(),
        PolicyConfig::Fixed(FixedPolicy { model: "m".into() })
    );
    assert_eq!(
        parse(r#"{ type = "latency_budget" }"#).unwrap(),
        PolicyConfig::LatencyBudget(LatencyBudgetPolicy { shed_margin: 0.5 })
    );
    assert_eq!(
        parse(r#"{ type = "latency_budget", shed_margin = inf }"#).unwrap(),
        PolicyConfig::LatencyBudget(LatencyBudgetPolicy { shed_margin: f64::INFINITY })
    );
    let cascade =
        parse(r#"{ type = "cascade", confidence_output = "probabilities", threshold = 0.8 }"#).unwrap();
    assert_eq!(
        cascade.as_cascade(),
        Some(&CascadePolicy {
            confidence_output: "probabilities".into(),
            threshold: 0.8,
            cheap: None,
            heavy: None
        })
    );
    let weighted = parse(
        r#"{ type = "weighted", weights = [{ model = "a", weight = 95 }, { model = "b", weight = 5.5 }] }"#,
    )
    .unwrap();
    assert_eq!(
        weighted,
        PolicyConfig::Weighted(WeightedPolicy {
            weights: vec![
                ModelWeight { model: "a".into(), weight: 95.0 },
                ModelWeight { model: "b".into(), weight: 5.5 }
            ]
        })
    );
    assert_eq!(weighted.kind(), "weighted");
    assert!(weighted.as_cascade().is_none());
}

#[test]
fn typos_are_errors_not_defaults() {
    for bad in [
        r#"{ type = "fastest" }"#,
        r#"{ model = "m" }"#,
        r#"{ type = "fixed", model = "m", modle = "m" }"#,
        r#"{ type = "fixed" }"#,
        r#"{ type = "latency_budget", shed_margn = 0.5 }"#,
        r#"{ type = "cascade", confidence_output = "p", threshold = 0.8, treshold = 0.9 }"#,
        r#"{ type = "cascade", confidence_output = "p" }"#,
        r#"{ type = "weighted", weights = [{ model = "a", weight = 1, share = 2 }] }"#,
    ] {
        assert!(parse(bad).is_err(), "{bad} parsed");
    }
}

#[test]
fn valid_configs_pass() {
    let models = route(&["cheap", "heavy"]);
    for good in [
        r#"{ type = "fixed", model = "heavy" }"#,
        r#"{ type = "latency_budget", shed_margin = 0 }"#,
        r#"{ type = "cascade", confidence_output = "p", threshold = 1.0, cheap = "cheap", heavy = "heavy" }"#,
        r#"{ type = "weighted", weights = [{ model = "cheap", weight = 1 }] }"#,
    ] {
        assert_eq!(parse(good).unwrap().validate(&models), Ok(()), "{good}");
    }
}

#[test]
fn invalid_configs_name_every_failing_field() {
    let models = route(&["cheap", "heavy"]);
    let fixed = parse(r#"{ type = "fixed", model = "nope" }"#).unwrap();
    assert_eq!(paths(fixed.validate(&models)), ["policy.model"]);
    let latency = PolicyConfig::LatencyBudget(LatencyBudgetPolicy { shed_margin: -0.1 });
    assert_eq!(paths(latency.validate(&models)), ["policy.shed_margin"]);
    let nan = PolicyConfig::LatencyBudget(LatencyBudgetPolicy { shed_margin: f64::NAN });
    assert_eq!(paths(nan.validate(&models)), ["policy.shed_margin"]);

    let cascade = PolicyConfig::Cascade(CascadePolicy {
        confidence_output: " ".into(),
        threshold: 1.5,
        cheap: Some("x".into()),
        heavy: Some("x".into()),
    });
    assert_eq!(
        paths(cascade.validate(&route(&["only"]))),
        [
            "policy.threshold",
            "policy.confidence_output",
            "policy",
            "policy.cheap",
            "policy.heavy",
            "policy.heavy"
        ]
    );
    let nan_threshold = parse(r#"{ type = "cascade", confidence_output = "p", threshold = nan }"#).unwrap();
    assert_eq!(paths(nan_threshold.validate(&models)), ["policy.threshold"]);

    let weighted = parse(
        r#"{ type = "weighted", weights = [
            { model = "cheap", weight = 0 }, { model = "ghost", weight = 1 }, { model = "cheap", weight = -2 }] }"#,
    )
    .unwrap();
    assert_eq!(
        paths(weighted.validate(&models)),
        [
            "policy.weights[0].weight",
            "policy.weights[1].model",
            "policy.weights[2].weight",
            "policy.weights[2].model"
        ]
    );
    let empty = parse(r#"{ type = "weighted", weights = [] }"#).unwrap();
    assert_eq!(paths(empty.validate(&models)), ["policy.weights"]);
    let huge = parse(r#"{ type = "weighted", weights = [{ model = "cheap", weight = 1e308 }, { model = "heavy", weight = 1e308 }] }"#)
        .unwrap();
    assert_eq!(paths(huge.validate(&models)), ["policy.weights"]);
    let no_models = parse(r#"{ type = "latency_budget" }"#).unwrap();
    assert_eq!(paths(no_models.validate(&[])), ["policy"]);
}

#[test]
fn issues_read_well() {
    let issue =
        PolicyIssue::new("policy.threshold", "must be between 0 and 1, got 1.5").prefixed("routes[2]");
    assert_eq!(issue.to_string(), "routes[2].policy.threshold: must be between 0 and 1, got 1.5");
}

#[test]
fn decide_dispatches_to_the_policy() {
    let f = two_models();
    let cases = [
        (r#"{ type = "fixed", model = "heavy" }"#, Reason::Fixed),
        (r#"{ type = "latency_budget" }"#, Reason::BudgetFit),
        (r#"{ type = "cascade", confidence_output = "p", threshold = 0.5 }"#, Reason::Cascade),
        (r#"{ type = "weighted", weights = [{ model = "cheap", weight = 1 }] }"#, Reason::Weighted),
    ];
    for (config, reason) in cases {
        let plan = parse(config).unwrap().decide(budget_ms(50), &f, &estimator(), Draw::new(0.5));
        assert_eq!(plan.reason(), reason, "{config}");
    }
}

#[test]
fn labels_are_stable_and_unique() {
    let labels: HashSet<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(labels.len(), Reason::ALL.len());
    for reason in Reason::ALL {
        assert!(reason.as_str().bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        assert_eq!(reason.to_string(), reason.as_str());
        assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
    }
    assert_eq!(Reason::SpillOver.as_str(), "spill_over");
    assert_eq!(Reason::CascadeNoBudget.as_str(), "cascade_no_budget");
    assert_eq!(Device::Cuda.to_string(), "cuda");
    assert_eq!(serde_json::to_value(Device::Upstream).unwrap(), "upstream");
    for device in Device::ALL {
        assert_eq!(Device::from_label(device.as_str()), Some(device));
        assert_eq!(serde_json::to_value(device).unwrap(), device.as_str());
    }
    assert_eq!(Device::from_label("gpu"), None);
}
