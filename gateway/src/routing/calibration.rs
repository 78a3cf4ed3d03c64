//! Online calibration of a cascade's threshold (`routes[].calibrate`).
//!
//! A share (`shadow`) of the route's calls, drawn uniformly, also run in
//! the background through both models of the cascade on the same inputs,
//! off the response path and only while the heavy model has an idle pool
//! (no queue, a worker free, not paused; otherwise the draw is counted as
//! skipped). Each row gives the cheap model's confidence and whether its
//! top class is the heavy model's, counted in 101 confidence buckets
//! (0.00, 0.01, ... 1.00). From them, for every threshold `t` of that grid:
//! the agreement among rows the cascade would accept (confidence >= `t`)
//! and the share it would escalate. The suggested threshold is the lowest
//! (so the least escalation) whose agreement reaches `target`. It is shown
//! in `/admin/stats` and `/metrics`; the live threshold never changes by
//! itself.
//!
//! Every call of a calibrated route may be shadowed, plain or streamed
//! (draft then final): [`super::execute`] calls [`Calibration::maybe_shadow`]
//! once per call it answered. The shadow runs ask [`ShadowModels`]: the
//! model repository, or a test's fake.

use crate::config::calibrate_section::CalibrateConfig;
use parking_lot::Mutex;
use router_policies::CascadePolicy;
use serde::Serialize;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use switchyard_runtime::{InferenceRequest, ModelRepository, RuntimeError, Tensor};

/// Grid steps between 0 and 1.
pub const GRID: usize = 100;

/// One route's observations: rows per confidence bucket and how many of
/// them agreed with the heavy model. The live calibration fills one per
/// route from shadow runs; `switchyard replay` fills one per cascade route
/// from the replayed calls, to suggest a threshold beside its report.
#[derive(Debug, Clone)]
pub struct Curve {
    rows: [u64; GRID + 1],
    agreeing: [u64; GRID + 1],
    shadow_runs: u64,
    skipped_busy: u64,
    failed: u64,
}

impl Default for Curve {
    fn default() -> Self {
        Curve { rows: [0; GRID + 1], agreeing: [0; GRID + 1], shadow_runs: 0, skipped_busy: 0, failed: 0 }
    }
}

/// One point of a route's curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CurvePoint {
    /// The threshold.
    pub threshold: f64,
    /// Agreement with the heavy model among rows accepted at it (1 when none).
    pub agreement: f64,
    /// Share of rows it would escalate.
    pub escalation: f64,
}

/// A route's calibration, as `/admin/stats` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrationView {
    /// Rows observed.
    pub rows: u64,
    /// Shadow runs done.
    pub shadow_runs: u64,
    /// Draws skipped because the heavy model had no idle pool.
    pub skipped_busy: u64,
    /// Shadow runs that failed.
    pub failed: u64,
    /// The agreement the suggestion must reach.
    pub target: f64,
    /// The lowest grid threshold reaching `target` (`None`: none yet).
    pub suggested_threshold: Option<f64>,
    /// The curve, every grid step.
    pub curve: Vec<CurvePoint>,
}

impl Curve {
    /// Counts one row: the cheap model's confidence and whether its top
    /// class is the heavy model's.
    pub fn add(&mut self, confidence: f32, agrees: bool) {
        let bucket = bucket(confidence);
        self.rows[bucket] += 1;
        self.agreeing[bucket] += u64::from(agrees);
    }

    /// The curve over the threshold grid and the lowest threshold whose
    /// agreement reaches `target`.
    pub fn view(&self, target: f64) -> CalibrationView {
        let total: u64 = self.rows.iter().sum();
        let mut curve = Vec::with_capacity(GRID + 1);
        let (mut accepted, mut agreeing) = (0u64, 0u64);
        // From the top down: rows at or above each threshold.
        let mut points = vec![CurvePoint { threshold: 0.0, agreement: 1.0, escalation: 0.0 }; GRID + 1];
        for k in (0..=GRID).rev() {
            accepted += self.rows[k];
            agreeing += self.agreeing[k];
            let agreement = if accepted == 0 { 1.0 } else { agreeing as f64 / accepted as f64 };
            let escalation = if total == 0 { 0.0 } else { 1.0 - accepted as f64 / total as f64 };
            points[k] = CurvePoint { threshold: k as f64 / GRID as f64, agreement, escalation };
        }
        curve.extend(points);
        let suggested_threshold =
            (total > 0).then(|| curve.iter().find(|p| p.agreement >= target).map(|p| p.threshold)).flatten();
        CalibrationView {
            rows: total,
            shadow_runs: self.shadow_runs,
            skipped_busy: self.skipped_busy,
            failed: self.failed,
            target,
            suggested_threshold,
            curve,
        }
    }
}

/// The grid bucket of a confidence: `floor(c * 100)` in `f32`, as the
/// cascade compares its `f32` threshold (`0.9f32 * 100` is 90: a row at
/// exactly the threshold is accepted at it), so a row is accepted at
/// threshold `k / 100` exactly when its bucket is `k` or more.
fn bucket(confidence: f32) -> usize {
    if confidence.is_nan() || confidence <= 0.0 {
        return 0;
    }
    ((confidence * GRID as f32).floor() as usize).min(GRID)
}

/// Every calibrated route's curve.
#[derive(Default)]
pub struct Calibration {
    curves: Mutex<HashMap<String, (Curve, f64)>>,
}

/// What one shadow run needs, owned (it outlives the request).
pub struct Shadow {
    /// The route.
    pub route: String,
    /// The cascade (models and confidence output).
    pub cheap: String,
    /// The heavy model.
    pub heavy: String,
    /// The output holding the confidence.
    pub output: String,
    /// The request's inputs (shared buffers).
    pub inputs: Vec<(String, Tensor)>,
}

impl Calibration {
    /// Draws whether this call of a calibrated route is shadowed; when it
    /// is and the heavy model has an idle pool, starts the shadow run on
    /// `repo` in the background (on the current runtime) and returns at once.
    pub fn maybe_shadow<M: ShadowModels>(
        self: &Arc<Self>,
        settings: &CalibrateConfig,
        policy: &CascadePolicy,
        models: &[String],
        repo: &Arc<M>,
        route: &str,
        inputs: &[(String, Tensor)],
    ) {
        if crate::random_draws::next_draw().value() >= settings.shadow {
            return;
        }
        let (Some(cheap), Some(heavy)) = (
            policy.cheap.clone().or_else(|| models.first().cloned()),
            policy.heavy.clone().or_else(|| models.last().cloned()),
        ) else {
            return;
        };
        if !repo.idle(&heavy) {
            self.with_curve(route, settings.target, |c| c.skipped_busy += 1);
            return;
        }
        let shadow = Shadow {
            route: route.to_string(),
            cheap,
            heavy,
            output: policy.confidence_output.clone(),
            inputs: inputs.to_vec(),
        };
        let (this, repo, target) = (self.clone(), repo.clone(), settings.target);
        tokio::spawn(async move { this.run(repo.as_ref(), shadow, target).await });
    }

    async fn run<M: ShadowModels>(&self, repo: &M, shadow: Shadow, target: f64) {
        let request = InferenceRequest { inputs: shadow.inputs, outputs: Some(vec![shadow.output.clone()]) };
        let cheap = repo.shadow_run(&shadow.cheap, request.clone()).await;
        let heavy = repo.shadow_run(&shadow.heavy, request).await;
        self.with_curve(&shadow.route, target, |curve| match (cheap, heavy) {
            (Ok(cheap), Ok(heavy)) => {
                curve.shadow_runs += 1;
                for (confidence, agrees) in rows(&cheap, &heavy, &shadow.output) {
                    curve.add(confidence, agrees);
                }
            }
            _ => curve.failed += 1,
        });
    }

    fn with_curve(&self, route: &str, target: f64, f: impl FnOnce(&mut Curve)) {
        let mut curves = self.curves.lock();
        let entry = curves.entry(route.to_string()).or_insert_with(|| (Curve::default(), target));
        entry.1 = target;
        f(&mut entry.0);
    }

    /// Every calibrated route's view.
    pub fn views(&self) -> Vec<(String, CalibrationView)> {
        let mut all: Vec<_> = self.curves.lock().iter().map(|(r, (c, t))| (r.clone(), c.view(*t))).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

/// What shadow runs ask of the models.
pub trait ShadowModels: Send + Sync + 'static {
    /// True when `model` has a pool with nothing queued, a free worker,
    /// not paused: only then is a drawn call shadowed.
    fn idle(&self, model: &str) -> bool;

    /// Runs `request` on `model`, on the pool it picks; the outputs.
    fn shadow_run(
        &self,
        model: &str,
        request: InferenceRequest,
    ) -> impl Future<Output = Result<Vec<(String, Tensor)>, RuntimeError>> + Send;
}

impl ShadowModels for ModelRepository {
    fn idle(&self, model: &str) -> bool {
        self.load_of(&[model.to_string()])
            .models
            .iter()
            .flat_map(|m| &m.pools)
            .any(|p| p.available && !p.paused && p.queue_depth == 0 && p.in_flight < p.workers)
    }

    async fn shadow_run(
        &self,
        model: &str,
        request: InferenceRequest,
    ) -> Result<Vec<(String, Tensor)>, RuntimeError> {
        Ok(self.infer(model, None, request).await?.outputs)
    }
}

/// Per row: the cheap model's confidence (the row's largest value, as
/// [`super::confidence`] reads it) and whether its top class is the heavy
/// model's, from `output` of both.
pub fn rows(cheap: &[(String, Tensor)], heavy: &[(String, Tensor)], output: &str) -> Vec<(f32, bool)> {
    let find = |outs: &[(String, Tensor)]| outs.iter().find(|(n, _)| n == output).map(|(_, t)| t.clone());
    let (Some(c), Some(h)) = (find(cheap), find(heavy)) else { return Vec::new() };
    let (Some(cv), Some(hv)) = (c.to_f32_vec(), h.to_f32_vec()) else { return Vec::new() };
    let width = match c.shape() {
        [] | [_] => 1,
        [_, rest @ ..] => rest.iter().product::<usize>().max(1),
    };
    let argmax = |row: &[f32]| {
        row.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &v)| if v > b.1 { (i, v) } else { b }).0
    };
    cv.chunks(width)
        .zip(hv.chunks(width))
        .map(|(cr, hr)| (cr.iter().copied().fold(f32::NEG_INFINITY, f32::max), argmax(cr) == argmax(hr)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suggestion_is_the_lowest_threshold_meeting_the_target() {
        let mut curve = Curve::default();
        // 100 rows: confident ones (>= 0.9) always agree; of the others
        // (0.50-0.89), those at 0.50, 0.60, 0.70 and 0.80 disagree.
        for i in 0..50 {
            curve.add(0.9 + (i % 10) as f32 / 100.0, true);
        }
        for i in 0..50 {
            curve.add(0.5 + (i % 40) as f32 / 100.0, i % 10 != 0);
        }
        let view = curve.view(0.995);
        assert_eq!(view.rows, 100);
        assert_eq!(view.suggested_threshold, Some(0.81), "the lowest threshold above every disagreement");
        let at = |t: f64| view.curve.iter().find(|p| (p.threshold - t).abs() < 1e-9).copied().unwrap();
        assert_eq!(at(0.9).escalation, 0.5);
        assert_eq!(at(0.5).agreement, 0.95);
        assert_eq!(at(0.0).escalation, 0.0);
        assert!(Curve::default().view(0.99).suggested_threshold.is_none());
    }

    #[test]
    fn buckets_floor_to_the_grid() {
        assert_eq!(bucket(0.8), 80);
        assert_eq!(bucket(0.799_999), 79);
        assert_eq!(bucket(1.0), 100);
        assert_eq!(bucket(f32::NAN), 0);
    }
}
