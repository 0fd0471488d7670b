//! Timing statistics: median and interquartile range.

/// Summary of repeated timings in milliseconds. Quartiles use linear interpolation between
/// order statistics (numpy's default `percentile` method), so Python peers compute the same.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Number of timed calls.
    pub reps: usize,
    /// Median.
    pub median: f64,
    /// First quartile (25th percentile).
    pub q1: f64,
    /// Third quartile (75th percentile).
    pub q3: f64,
    /// Fastest call.
    pub min: f64,
}

impl Stats {
    /// Statistics of `samples`; all zero when empty.
    pub fn from_samples(samples: &[f64]) -> Stats {
        if samples.is_empty() {
            return Stats::default();
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        Stats {
            reps: v.len(),
            median: percentile(&v, 50.0),
            q1: percentile(&v, 25.0),
            q3: percentile(&v, 75.0),
            min: v[0],
        }
    }

    /// Interquartile range `q3 - q1`.
    pub fn iqr(&self) -> f64 {
        self.q3 - self.q1
    }
}

/// The `p`-th percentile of sorted, non-empty `v` with linear interpolation.
fn percentile(v: &[f64], p: f64) -> f64 {
    let pos = p / 100.0 * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quartiles_match_numpy_linear_method() {
        // numpy.percentile([4, 1, 3, 2, 10], [25, 50, 75]) == [2, 3, 4]
        let s = Stats::from_samples(&[4.0, 1.0, 3.0, 2.0, 10.0]);
        assert_eq!(
            (s.q1, s.median, s.q3, s.min, s.reps),
            (2.0, 3.0, 4.0, 1.0, 5)
        );
        // numpy.percentile([1, 2, 3, 4], [25, 50, 75]) == [1.75, 2.5, 3.25]
        let s = Stats::from_samples(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!((s.q1, s.median, s.q3), (1.75, 2.5, 3.25));
        assert_eq!(s.iqr(), 1.5);
        assert_eq!(Stats::from_samples(&[]).reps, 0);
    }
}
