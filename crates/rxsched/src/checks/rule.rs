//! The rules a `[[check]]` may name (`kind`), each with exactly the
//! parameters it takes: the vocabulary of the scenario files' verdicts.

use serde::{Deserialize, Serialize};

/// Two series (or groups) compared by a ratio or a difference, with bounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compare {
    /// The series compared.
    pub series: Vec<String>,
    /// What it is compared with.
    pub other: Vec<String>,
    /// Lower bound.
    #[serde(default)]
    pub min: Option<f64>,
    /// Upper bound.
    #[serde(default)]
    pub max: Option<f64>,
}

/// Two series compared at one place: an x, or a distribution's quantile.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareAt {
    /// The series compared.
    pub series: Vec<String>,
    /// What it is compared with.
    pub other: Vec<String>,
    /// Where: an x, or a quantile.
    pub at: f64,
    /// Lower bound.
    #[serde(default)]
    pub min: Option<f64>,
    /// Upper bound.
    #[serde(default)]
    pub max: Option<f64>,
}

/// A target a point must meet: its value of `metric` within bounds, at
/// every x, or up to x = `until` only.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// The metric.
    pub metric: String,
    /// Lower bound.
    #[serde(default)]
    pub min: Option<f64>,
    /// Upper bound.
    #[serde(default)]
    pub max: Option<f64>,
    /// The target holds up to this x (default: everywhere).
    #[serde(default)]
    pub until: Option<f64>,
}

/// Series whose number must lie within bounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bounded {
    /// The series.
    pub series: Vec<String>,
    /// Lower bound.
    #[serde(default)]
    pub min: Option<f64>,
    /// Upper bound.
    #[serde(default)]
    pub max: Option<f64>,
}

/// The rules. Each applies to every series listed unless it compares.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Rule {
    /// Beyond its peak, a curve never falls below `min` of the peak.
    Flat { series: Vec<String>, min: f64 },
    /// The last point is at most `max` of the peak.
    Collapses { series: Vec<String>, max: f64 },
    /// Where the curve, past its peak, first falls to `fraction` of the peak
    /// (interpolated between points): the livelock point, within bounds.
    LivelockAt {
        series: Vec<String>,
        fraction: f64,
        #[serde(default)]
        min: Option<f64>,
        #[serde(default)]
        max: Option<f64>,
    },
    /// Peak of `series` over peak of `other`.
    PeakRatio(Compare),
    /// MLFRR of `series` over MLFRR of `other`.
    MlfrrRatio(Compare),
    /// The same, each MLFRR read between the swept rates
    /// ([`crate::result::ResultFile::mlfrr_between`]): where the swept
    /// rates are farther apart than the bounds, two curves a few percent
    /// apart can take their last loss-free points a whole step apart.
    MlfrrBetweenRatio(Compare),
    /// Last point of `series` over that of `other`.
    LastRatio(Compare),
    /// First point of `series` over that of `other`.
    FirstRatio(Compare),
    /// At the highest x, the series are in the listed order (each at least
    /// the next, less `tolerance` of the largest peak).
    OrderLast {
        series: Vec<String>,
        #[serde(default)]
        tolerance: f64,
    },
    /// Our curve passes within `tolerance` (relative) of every published
    /// point, or of those at the x values `at` (say, the points a profile
    /// is calibrated on, apart from the ones it predicts).
    Reference {
        series: Vec<String>,
        tolerance: f64,
        #[serde(default)]
        at: Vec<f64>,
    },
    /// Our peak is within `tolerance` of the published peak.
    PeakReference { series: Vec<String>, tolerance: f64 },
    /// Every point from x = `at` on is at most `max`.
    Below {
        series: Vec<String>,
        max: f64,
        #[serde(default)]
        at: Option<f64>,
    },
    /// Every point from x = `at` on is at least `min`.
    Above {
        series: Vec<String>,
        min: f64,
        #[serde(default)]
        at: Option<f64>,
    },
    /// From x = `at` on, the points span at most `max` (with `relative`,
    /// at most `max` of their mean).
    Stable {
        series: Vec<String>,
        max: f64,
        #[serde(default)]
        at: Option<f64>,
        #[serde(default)]
        relative: bool,
    },
    /// The points rise with x: a timeline's milestones happen in the listed order.
    Increasing { series: Vec<String> },
    /// The points lie on a line: r² at least `min`.
    Linear { series: Vec<String>, min: f64 },
    /// A distribution's quantile `at`: `other`'s less `series`'s.
    QuantileDiff(CompareAt),
    /// `series` has a narrower p10–p90 spread than `other`.
    SpreadOrder {
        series: Vec<String>,
        other: Vec<String>,
    },
    /// At x = `at`: `other`'s value less `series`'s.
    PointDiff(CompareAt),
    /// At x = `at`: `series`'s value over `other`'s.
    PointRatio(CompareAt),
    /// At every offered rate (points paired in x order), `series` passes on
    /// at least the share of x that `other` does, less `tolerance`.
    AtEveryRate {
        series: Vec<String>,
        other: Vec<String>,
        tolerance: f64,
    },
    /// At the highest x, drop point `point` holds at least `min` of the drops.
    DropShare {
        series: Vec<String>,
        point: String,
        min: f64,
    },
    /// A line fitted to the CPU-bound points has the published intercept.
    Fit { series: Vec<String>, tolerance: f64 },
    /// ... and the published slope, within `max`.
    FitSlope { series: Vec<String>, max: f64 },
    /// At x = `at` (default: the highest x), the runs of a series (a figure
    /// with `repeats`) split into levels: the widest gap between two
    /// consecutive values, as a share of the highest, within bounds.
    Splits {
        series: Vec<String>,
        #[serde(default)]
        at: Option<f64>,
        #[serde(default)]
        min: Option<f64>,
        #[serde(default)]
        max: Option<f64>,
    },
    /// At x = `at`, the mean of `series`'s runs over the mean of `other`'s
    /// (figures with `repeats`).
    MeanRatio(CompareAt),
    /// At every x (points paired in x order), `series`'s value over
    /// `other`'s, within bounds.
    RatioEverywhere(Compare),
    /// `series`'s values summed over the sweep over `other`'s (points
    /// paired in x order), within bounds; the point-by-point ratios are
    /// shown, not judged.
    PooledRatio(Compare),
    /// Delivered at the highest x over the MLFRR.
    LastOverMlfrr(Bounded),
    /// The MLFRR itself (highest loss-free offered rate), within bounds.
    Mlfrr(Bounded),
    /// Every point over the series' first (lowest-x) point, within bounds:
    /// a latency against its unloaded value.
    OverFirst(Bounded),
    /// Every point less the series' first (lowest-x) point, within bounds:
    /// what load takes from (or adds to) an unloaded value, such as the
    /// CPU share a process keeps.
    FromFirst(Bounded),
    /// The highest x over the MLFRR: how far past saturation the sweep went.
    RangeOverMlfrr(Bounded),
    /// At every x, `series` comes within `within` (a share) of the best of
    /// the `other` series that meet every target at that x: a policy that
    /// sets itself against a grid of hand-set constants.
    BestWithin {
        series: Vec<String>,
        other: Vec<String>,
        within: f64,
        targets: Vec<Target>,
    },
    /// At every point (paired in x order; with `past_peak`, only from
    /// `other`'s peak on), `series` lies within `rel` of `other` (a share of
    /// it) or within `abs` of it (in the metric's units): a prediction
    /// against a measurement.
    Tracks {
        series: Vec<String>,
        other: Vec<String>,
        rel: f64,
        #[serde(default)]
        abs: f64,
        #[serde(default)]
        past_peak: bool,
    },
}

impl Rule {
    /// Every series the rule names.
    pub fn series(&self) -> Vec<&String> {
        use Rule::*;
        match self {
            PeakRatio(c) | MlfrrRatio(c) | MlfrrBetweenRatio(c) | LastRatio(c) | FirstRatio(c)
            | RatioEverywhere(c) | PooledRatio(c) => c.series.iter().chain(&c.other).collect(),
            QuantileDiff(c) | PointDiff(c) | PointRatio(c) | MeanRatio(c) => {
                c.series.iter().chain(&c.other).collect()
            }
            SpreadOrder { series, other }
            | BestWithin { series, other, .. }
            | AtEveryRate { series, other, .. }
            | Tracks { series, other, .. } => series.iter().chain(other).collect(),
            LastOverMlfrr(b) | RangeOverMlfrr(b) | Mlfrr(b) | OverFirst(b) | FromFirst(b) => {
                b.series.iter().collect()
            }
            Flat { series, .. }
            | Collapses { series, .. }
            | LivelockAt { series, .. }
            | OrderLast { series, .. }
            | Reference { series, .. }
            | PeakReference { series, .. }
            | Below { series, .. }
            | Above { series, .. }
            | Stable { series, .. }
            | Linear { series, .. }
            | Increasing { series }
            | DropShare { series, .. }
            | Fit { series, .. }
            | Splits { series, .. }
            | FitSlope { series, .. } => series.iter().collect(),
        }
    }

    /// What makes the rule unable to fail, if anything: a comparison with no bound.
    pub fn vacuous(&self) -> Option<&'static str> {
        use Rule::*;
        let open = |min: &Option<f64>, max: &Option<f64>| min.is_none() && max.is_none();
        let unbounded = match self {
            PeakRatio(c) | MlfrrRatio(c) | MlfrrBetweenRatio(c) | LastRatio(c) | FirstRatio(c)
            | RatioEverywhere(c) | PooledRatio(c) => open(&c.min, &c.max),
            QuantileDiff(c) | PointDiff(c) | PointRatio(c) | MeanRatio(c) => open(&c.min, &c.max),
            LastOverMlfrr(b) | RangeOverMlfrr(b) | Mlfrr(b) | OverFirst(b) | FromFirst(b) => {
                open(&b.min, &b.max)
            }
            LivelockAt { min, max, .. } | Splits { min, max, .. } => open(min, max),
            BestWithin { targets, .. } => targets.iter().any(|t| open(&t.min, &t.max)),
            _ => false,
        };
        unbounded.then_some("needs `min` or `max`")
    }
}
