//! The compute cost of a mirrored pair, as `switchyard replay` counts it:
//! each model run weighs its `models[].cost`, by default 1 + the model's
//! position in the route (the candidate counts as placed after the
//! route's models); a cascade that escalated ran its cheap model too.

use crate::config::Config;
use router_policies::Reason;

/// `(live, candidate)` cost of one call answered by `model` for `reason`
/// on a route of `models`, and of one run of `candidate`.
pub fn pair_cost(config: &Config, models: &[String], answer: (&str, Reason), candidate: &str) -> (f64, f64) {
    let cost_of = |model: &str| {
        let position = models.iter().position(|m| m == model).unwrap_or(models.len());
        config.model_routing.get(model).and_then(|r| r.cost).unwrap_or(1.0 + position as f64)
    };
    let (model, reason) = answer;
    let cheap = models.first().map(String::as_str).unwrap_or_default();
    let live = match reason {
        Reason::CascadeEscalate if model != cheap => cost_of(cheap) + cost_of(model),
        _ => cost_of(model),
    };
    (live, cost_of(candidate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_costs_or_positions_and_the_cascades_cheap_run() {
        let text = "[[models]]\nname = \"a\"\npath = \"a.onnx\"\n[[models]]\nname = \"b\"\npath = \"b.onnx\"\ncost = 5\n\
                    [[models]]\nname = \"c\"\npath = \"c.onnx\"\n[[routes]]\nname = \"r\"\nmodels = [\"a\", \"b\"]\n";
        let config = crate::config::parse(text, std::path::Path::new("/tmp")).unwrap();
        let models = ["a".to_string(), "b".to_string()];
        assert_eq!(pair_cost(&config, &models, ("a", Reason::Fixed), "c"), (1.0, 3.0));
        assert_eq!(pair_cost(&config, &models, ("b", Reason::Fixed), "c"), (5.0, 3.0));
        assert_eq!(pair_cost(&config, &models, ("b", Reason::CascadeEscalate), "b"), (6.0, 5.0));
    }
}
