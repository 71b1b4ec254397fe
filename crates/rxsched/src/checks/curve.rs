//! Numbers read off a curve (`(x, y)` points sorted by x) that the rules
//! share: its peak, its last point, a value at some x, a quantile, a fitted
//! line; and how a bound is tested and written.

/// A curve: `(x, y)` points sorted by x.
pub(super) type Curve = [(f64, f64)];

/// The highest point, as `(x, y)`.
pub(super) fn peak(c: &Curve) -> (f64, f64) {
    c.iter()
        .copied()
        .fold((0.0, f64::MIN), |a, p| if p.1 > a.1 { p } else { a })
}

/// The peak read between the sweep's points: where the line through the
/// two points rising to the highest one meets the line through the two
/// after it, if they meet between the highest point and the next one above
/// it; otherwise the highest point. Unlike the highest point, it moves
/// continuously with a cost that moves the curve, which a fit needs.
pub(super) fn interpolated_peak(c: &Curve) -> f64 {
    let Some(i) = (0..c.len()).max_by(|&a, &b| c[a].1.total_cmp(&c[b].1)) else {
        return 0.0;
    };
    let top = c[i].1;
    if i == 0 || i + 2 >= c.len() {
        return top;
    }
    let slope = |a: (f64, f64), b: (f64, f64)| (b.1 - a.1) / (b.0 - a.0);
    let (up, down) = (slope(c[i - 1], c[i]), slope(c[i + 1], c[i + 2]));
    if up <= down {
        return top;
    }
    // up·(x − x_i) + y_i = down·(x − x_{i+1}) + y_{i+1}
    let x = (c[i + 1].1 - down * c[i + 1].0 - top + up * c[i].0) / (up - down);
    let y = top + up * (x - c[i].0);
    if x >= c[i].0 && x <= c[i + 1].0 && y >= top {
        y
    } else {
        top
    }
}

/// The y of the last point, 0 for none.
pub(super) fn last(c: &Curve) -> f64 {
    c.last().map_or(0.0, |p| p.1)
}

/// The y values from x = `at` on.
pub(super) fn from(cv: &Curve, at: f64) -> Vec<f64> {
    cv.iter().filter(|p| p.0 >= at).map(|p| p.1).collect()
}

/// The values of the points at x (runs of one setting), as (mean, count).
pub(super) fn mean_at(cv: &Curve, x: f64) -> (f64, usize) {
    let ys: Vec<f64> = at_x(cv, x);
    let n = ys.len();
    (ys.iter().sum::<f64>() / n.max(1) as f64, n)
}

/// The y values of every point at x (runs of one setting).
pub(super) fn at_x(cv: &Curve, x: f64) -> Vec<f64> {
    cv.iter()
        .filter(|p| (p.0 - x).abs() <= 1e-9 * x.abs().max(1.0))
        .map(|p| p.1)
        .collect()
}

/// Linear interpolation of a curve at `x` (clamped to its ends).
pub(super) fn interpolate(c: &Curve, x: f64) -> Option<f64> {
    let (first, lastp) = (c.first()?, c.last()?);
    if x <= first.0 {
        return Some(first.1);
    }
    if x >= lastp.0 {
        return Some(lastp.1);
    }
    let i = c.iter().position(|p| p.0 >= x)?;
    let (a, b) = (c[i - 1], c[i]);
    Some(a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0))
}

/// The x at which a distribution's cumulative fraction reaches `q`.
pub(super) fn quantile(c: &Curve, q: f64) -> f64 {
    c.iter()
        .find(|p| p.1 >= q)
        .or(c.last())
        .map_or(0.0, |p| p.0)
}

/// The y of the point whose x is nearest `x`.
pub(super) fn nearest(c: &Curve, x: f64) -> Option<f64> {
    c.iter()
        .min_by(|a, b| (a.0 - x).abs().total_cmp(&(b.0 - x).abs()))
        .map(|p| p.1)
}

/// Least-squares line `y = a + b x` through the points.
pub(super) fn line_fit(c: &Curve) -> Option<(f64, f64)> {
    let n = c.len() as f64;
    if n < 2.0 {
        return None;
    }
    let (mx, my) = (
        c.iter().map(|p| p.0).sum::<f64>() / n,
        c.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = c.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let b = c.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
    Some((my - b * mx, b))
}

/// How well a line explains the points: r², 0 for fewer than three.
pub(super) fn r2(c: &Curve) -> f64 {
    let n = c.len() as f64;
    if n < 3.0 {
        return 0.0;
    }
    let (mx, my) = (
        c.iter().map(|p| p.0).sum::<f64>() / n,
        c.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxy: f64 = c.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = c.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let syy: f64 = c.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx == 0.0 || syy == 0.0 {
        return 0.0;
    }
    sxy * sxy / (sxx * syy)
}

/// Whether `v` lies within the bounds given.
pub(super) fn within(v: f64, min: Option<f64>, max: Option<f64>) -> bool {
    min.is_none_or(|m| v >= m) && max.is_none_or(|m| v <= m)
}

/// The bounds in words, for a check's detail.
pub(super) fn bounds(min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(a), Some(b)) => format!("in [{a}, {b}]"),
        (Some(a), None) => format!(">= {a}"),
        (None, Some(b)) => format!("<= {b}"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_and_fit() {
        let c = vec![(0.0, 0.0), (10.0, 10.0), (20.0, 0.0)];
        assert_eq!(interpolate(&c, 5.0), Some(5.0));
        assert_eq!(interpolate(&c, 15.0), Some(5.0));
        assert_eq!(interpolate(&c, 30.0), Some(0.0));
        assert!((r2(&[(1.0, 2.0), (2.0, 4.0), (3.0, 6.1)]) - 1.0).abs() < 0.01);
        assert!(r2(&c) < 0.1);
        assert_eq!(peak(&c), (10.0, 10.0));
        assert_eq!(quantile(&[(1.0, 0.2), (2.0, 0.6), (3.0, 1.0)], 0.5), 2.0);
    }

    #[test]
    fn the_peak_between_the_points_moves_with_the_curve() {
        // Rising along y = x to (20, 20), then falling along y = 45 - x
        // from (30, 15): the two lines meet at (22.5, 22.5).
        let c = vec![(10.0, 10.0), (20.0, 20.0), (30.0, 15.0), (40.0, 5.0)];
        assert!((interpolated_peak(&c) - 22.5).abs() < 1e-9);
        // A curve that falls from a little higher reads a little higher,
        // where the highest point stays put.
        let higher = vec![(10.0, 10.0), (20.0, 20.0), (30.0, 15.5), (40.0, 5.5)];
        assert!(interpolated_peak(&higher) > interpolated_peak(&c));
        assert_eq!(peak(&higher), peak(&c));
        // No falling line after it, or a peak at an end: the highest point.
        assert_eq!(
            interpolated_peak(&[(0.0, 1.0), (1.0, 5.0), (2.0, 5.0)]),
            5.0
        );
        assert_eq!(
            interpolated_peak(&[(0.0, 9.0), (1.0, 5.0), (2.0, 1.0)]),
            9.0
        );
        assert_eq!(interpolated_peak(&[]), 0.0);
    }
}
