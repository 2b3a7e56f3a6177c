//! The Prometheus text exposition format (version 0.0.4): families with HELP and TYPE, samples
//! with escaped labels, cumulative histograms. `metrics.rs` says what is exported; this file
//! only how it is spelled.

use std::fmt::Write as _;

use super::histogram::Histogram;

/// A sample value as the text format spells it.
pub(crate) trait SampleValue {
    fn write_to(&self, out: &mut String);
}

impl SampleValue for f64 {
    fn write_to(&self, out: &mut String) {
        if self.is_nan() {
            out.push_str("NaN");
        } else if self.is_infinite() {
            out.push_str(if *self > 0.0 { "+Inf" } else { "-Inf" });
        } else {
            let _ = write!(out, "{self}");
        }
    }
}

macro_rules! integer_sample {
    ($($t:ty),*) => {$(
        impl SampleValue for $t {
            fn write_to(&self, out: &mut String) {
                let _ = write!(out, "{self}");
            }
        }
    )*};
}
integer_sample!(u8, u64, usize);

#[derive(Default)]
pub(super) struct Exposition {
    pub(super) out: String,
}

impl Exposition {
    pub(super) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(
            self.out,
            "# HELP {name} {}\n# TYPE {name} {kind}",
            escape_help(help)
        );
    }

    pub(super) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl SampleValue) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (label, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{label}=\"{}\"", escape_label_value(v));
            }
            self.out.push('}');
        }
        self.out.push(' ');
        value.write_to(&mut self.out);
        self.out.push('\n');
    }

    pub(super) fn histogram(&mut self, name: &str, help: &str, h: &Histogram) {
        self.family(name, "histogram", help);
        self.histogram_samples(name, &[], h);
    }

    /// The samples of one histogram of a family declared with [`Exposition::family`]: several
    /// histograms told apart by `labels` share one HELP and TYPE.
    pub(super) fn histogram_samples(&mut self, name: &str, labels: &[(&str, &str)], h: &Histogram) {
        let bucket = format!("{name}_bucket");
        let les = h.bounds.iter().map(|bound| {
            let mut le = String::new();
            bound.write_to(&mut le);
            le
        });
        let counts = h.counts.iter().copied();
        for (le, count) in les.chain(["+Inf".to_string()]).zip(counts.chain([h.count])) {
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, count);
        }
        self.sample(&format!("{name}_sum"), labels, h.sum_seconds);
        self.sample(&format!("{name}_count"), labels, h.count);
    }
}

/// The text format requires escaping only `\`, `"` and line feed in label values; anything else
/// (the NUL inside zone keys) goes out raw, as upstream emits it.
pub(crate) fn escape_label_value(v: &str) -> std::borrow::Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return v.into();
    }
    let mut out = String::with_capacity(v.len() + 2);
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.into()
}

/// HELP text escapes `\` and line feed.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslash_quote_and_newline_and_keep_nul() {
        assert_eq!(escape_label_value("a:\0:b"), "a:\0:b");
        assert_eq!(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    }

    #[test]
    fn histogram_lines_are_cumulative_with_inf_sum_and_count() {
        let mut h = Histogram::new(vec![0.5, 1.0]);
        h.observe(std::time::Duration::from_millis(250));
        h.observe(std::time::Duration::from_secs(2));
        let mut e = Exposition::default();
        e.histogram("x_seconds", "help", &h);
        assert_eq!(
            e.out,
            "# HELP x_seconds help\n# TYPE x_seconds histogram\n\
             x_seconds_bucket{le=\"0.5\"} 1\nx_seconds_bucket{le=\"1\"} 1\n\
             x_seconds_bucket{le=\"+Inf\"} 2\nx_seconds_sum 2.25\nx_seconds_count 2\n"
        );
    }

    #[test]
    fn labelled_histograms_share_one_family_and_keep_their_labels_before_le() {
        let mut h = Histogram::new(vec![0.5]);
        h.observe(std::time::Duration::from_millis(100));
        let mut e = Exposition::default();
        e.family("y_seconds", "histogram", "help");
        e.histogram_samples("y_seconds", &[("verb", "GET")], &h);
        e.histogram_samples(
            "y_seconds",
            &[("verb", "PATCH")],
            &Histogram::new(vec![0.5]),
        );
        assert_eq!(
            e.out,
            "# HELP y_seconds help\n# TYPE y_seconds histogram\n\
             y_seconds_bucket{verb=\"GET\",le=\"0.5\"} 1\n\
             y_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 1\n\
             y_seconds_sum{verb=\"GET\"} 0.1\ny_seconds_count{verb=\"GET\"} 1\n\
             y_seconds_bucket{verb=\"PATCH\",le=\"0.5\"} 0\n\
             y_seconds_bucket{verb=\"PATCH\",le=\"+Inf\"} 0\n\
             y_seconds_sum{verb=\"PATCH\"} 0\ny_seconds_count{verb=\"PATCH\"} 0\n"
        );
    }

    #[test]
    fn special_float_values_use_the_format_spelling() {
        for (v, s) in [
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (66.5, "66.5"),
            (100.0, "100"),
        ] {
            let mut out = String::new();
            v.write_to(&mut out);
            assert_eq!(out, s);
        }
    }
}
