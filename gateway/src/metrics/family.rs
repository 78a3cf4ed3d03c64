//! Building Prometheus metric families from values read at scrape time
//! (runtime pools, cache counters, routing decisions). These counters live
//! in their own modules as plain atomics; copying them into families when
//! `/metrics` is scraped exports them without counting anything twice.

use prometheus::proto::{Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType};
use switchyard_runtime::HistogramSnapshot;

/// One metric family being filled: a name, help text, type, label names,
/// and one sample (or histogram) per label-value set.
pub struct Family {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    labels: &'static [&'static str],
    metrics: Vec<Metric>,
}

impl Family {
    /// A counter family (the name should end in `_total`).
    pub fn counter(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Family {
        Family { name, help, kind: MetricType::COUNTER, labels, metrics: Vec::new() }
    }

    /// A gauge family.
    pub fn gauge(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Family {
        Family { name, help, kind: MetricType::GAUGE, labels, metrics: Vec::new() }
    }

    /// A histogram family.
    pub fn histogram(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Family {
        Family { name, help, kind: MetricType::HISTOGRAM, labels, metrics: Vec::new() }
    }

    /// Adds a counter or gauge sample. `values` pairs with the family's
    /// label names, in order.
    pub fn sample(&mut self, values: &[&str], value: f64) {
        let mut metric = self.labelled(values);
        match self.kind {
            MetricType::COUNTER => {
                let mut c = Counter::default();
                c.set_value(value);
                metric.set_counter(c);
            }
            _ => {
                let mut g = Gauge::default();
                g.set_value(value);
                metric.set_gauge(g);
            }
        }
        self.metrics.push(metric);
    }

    /// Adds a histogram from a runtime snapshot; bounds and sum are divided
    /// by `divisor` (1e6 turns microseconds into seconds, 1 keeps rows).
    pub fn histogram_sample(&mut self, values: &[&str], snapshot: &HistogramSnapshot, divisor: f64) {
        let mut cumulative = 0u64;
        let buckets = snapshot
            .upper_bounds
            .iter()
            .zip(&snapshot.counts)
            .map(|(&bound, &count)| {
                cumulative += count;
                let mut b = Bucket::default();
                b.set_upper_bound(bound as f64 / divisor);
                b.set_cumulative_count(cumulative);
                b
            })
            .collect();
        let mut h = Histogram::default();
        h.set_bucket(buckets);
        h.set_sample_count(snapshot.count());
        h.set_sample_sum(snapshot.sum as f64 / divisor);
        let mut metric = self.labelled(values);
        metric.set_histogram(h);
        self.metrics.push(metric);
    }

    fn labelled(&self, values: &[&str]) -> Metric {
        let pairs = self
            .labels
            .iter()
            .zip(values)
            .map(|(name, value)| {
                let mut pair = LabelPair::default();
                pair.set_name((*name).to_string());
                pair.set_value((*value).to_string());
                pair
            })
            .collect();
        let mut metric = Metric::default();
        metric.set_label(pairs);
        metric
    }

    /// The finished family; `None` without samples (the text encoder
    /// refuses empty families).
    pub fn finish(self) -> Option<MetricFamily> {
        if self.metrics.is_empty() {
            return None;
        }
        let mut mf = MetricFamily::default();
        mf.set_name(self.name.to_string());
        mf.set_help(self.help.to_string());
        mf.set_field_type(self.kind);
        mf.set_metric(self.metrics);
        Some(mf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Encoder, TextEncoder};

    fn text(families: Vec<MetricFamily>) -> String {
        let mut out = Vec::new();
        TextEncoder::new().encode(&families, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_scaled() {
        let snap = HistogramSnapshot { upper_bounds: vec![50, 1_000], counts: vec![2, 1, 4], sum: 9_000_100 };
        let mut f = Family::histogram("x_seconds", "help", &["pool"]);
        f.histogram_sample(&["cpu"], &snap, 1e6);
        let out = text(vec![f.finish().unwrap()]);
        assert!(out.contains("x_seconds_bucket{pool=\"cpu\",le=\"0.00005\"} 2\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{pool=\"cpu\",le=\"0.001\"} 3\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{pool=\"cpu\",le=\"+Inf\"} 7\n"), "{out}");
        assert!(out.contains("x_seconds_sum{pool=\"cpu\"} 9.0001\n"), "{out}");
        assert!(out.contains("x_seconds_count{pool=\"cpu\"} 7\n"), "{out}");
    }

    #[test]
    fn empty_families_are_dropped_and_labels_escaped() {
        assert!(Family::counter("a_total", "h", &[]).finish().is_none());
        let mut g = Family::gauge("g", "h", &["route"]);
        g.sample(&["we\"ird"], 1.5);
        let out = text(vec![g.finish().unwrap()]);
        assert!(out.contains("# TYPE g gauge\ng{route=\"we\\\"ird\"} 1.5\n"), "{out}");
    }
}
