//! The SVG plot of a figure: its curves, the published points, the runs.

use crate::result::{Axis, ResultFile};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn axis_label(a: &Axis) -> String {
    if a.unit.is_empty() {
        a.label.clone()
    } else {
        format!("{} ({})", a.label, a.unit)
    }
}

/// The plot's ranges, `(x0, x1, y1)`, and whether x takes whole numbers only.
fn extent(r: &ResultFile, curves: &[(String, Vec<(f64, f64)>)]) -> (f64, f64, f64, bool) {
    let all = curves.iter().flat_map(|(_, c)| c.iter().copied()).chain(
        r.reference
            .iter()
            .flat_map(|rf| rf.points.iter().map(|p| (p[0], p[1]))),
    );
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for (x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x0 > 0.0 && x0 < (x1 - x0) * 0.5 {
        x0 = 0.0;
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    // Headroom above the highest point for the legend, which sits at the
    // top: a line per entry (none when it sits beside the plot).
    let entries = curves.len() + r.reference.len();
    let room = if beside(curves.len()) {
        1.08
    } else {
        1.08 + 0.06 * entries as f64
    };
    let y1 = if y1 <= 0.0 { 1.0 } else { y1 * room.min(1.6) };
    let integral = curves
        .iter()
        .flat_map(|(_, c)| c.iter())
        .all(|p| p.0.fract() == 0.0);
    if integral && x1 - x0 <= 20.0 {
        // Room around the first and last whole-number points.
        x0 -= 0.25;
        x1 += 0.25;
    }
    (x0, x1, y1, integral)
}

/// Whether a figure of `n` series gets its legend beside the plot: more
/// than eight entries in the plot would cover the curves.
fn beside(n: usize) -> bool {
    n > 8
}

/// Width of the legend beside the plot.
const LEGEND_W: u32 = 300;

/// `t` cut to `n` characters, with an ellipsis if it was longer.
fn fit(t: &str, n: usize) -> String {
    if t.chars().count() <= n {
        return t.to_string();
    }
    let mut s: String = t.chars().take(n.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// A figure's drawing area, in our units.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// What drawing can fail with.
type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Draws a result: our curves as lines with dots, the published points as
/// hollow squares of the same colour.
pub fn plot(r: &ResultFile) -> Result<String, Box<dyn std::error::Error>> {
    let mut svg = String::new();
    {
        let curves: Vec<(String, Vec<(f64, f64)>)> = r
            .series
            .iter()
            .map(|s| (s.label.clone(), r.curve(&s.label)))
            .collect();
        let side = beside(curves.len());
        let width = if side { 900 + LEGEND_W } else { 900 };
        let root = SVGBackend::with_string(&mut svg, (width, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let (area, legend) = root.split_horizontally(900);
        let (x0, x1, y1, integral) = extent(r, &curves);
        // The page's heading has the whole title; the figure's must fit.
        let title = fit(&format!("{}: {}", r.id, r.title), 78);
        let mut chart = ChartBuilder::on(&area)
            .caption(title, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(55)
            .y_label_area_size(80)
            .build_cartesian_2d(x0..x1 * 1.02, 0.0..y1)?;
        // Discrete x (packet numbers, burst sizes) gets whole-number ticks only.
        let fx = move |v: &f64| {
            if integral && (v - v.round()).abs() > 1e-9 {
                String::new()
            } else if integral {
                format!("{v:.0}")
            } else {
                tick(*v, x1 - x0)
            }
        };
        let fy = move |v: &f64| tick(*v, y1);
        chart
            .configure_mesh()
            .x_desc(axis_label(&r.x))
            .y_desc(axis_label(&r.y))
            .x_label_formatter(&fx)
            .y_label_formatter(&fy)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (i, (label, c)) in curves.iter().enumerate() {
            let col = PALETTE[i % PALETTE.len()];
            if r.scatter {
                // Runs as dots; each series a little aside, so none hides another.
                let dx = (i as f64 - (curves.len() as f64 - 1.0) / 2.0) * 0.008 * (x1 - x0);
                draw_runs(&mut chart, label, c, col, dx)?;
            } else {
                // Past the palette the colours come round again: dashed.
                draw_curve(&mut chart, r, label, c, col, i >= PALETTE.len())?;
            }
        }
        if side {
            for (i, (label, _)) in curves.iter().enumerate() {
                let col = PALETTE[i % PALETTE.len()];
                let y = 50 + 22 * i as i32;
                // Past the palette the colours come round again: dashed.
                let dashes: &[(i32, i32)] = if i >= PALETTE.len() {
                    &[(8, 13), (16, 21), (24, 29)]
                } else {
                    &[(8, 30)]
                };
                for &(a, b) in dashes {
                    legend.draw(&PathElement::new(vec![(a, y), (b, y)], col.stroke_width(2)))?;
                }
                if i < PALETTE.len() {
                    legend.draw(&Circle::new((19, y), 3, col.filled()))?;
                }
                legend.draw(&Text::new(label.clone(), (38, y - 8), ("sans-serif", 15)))?;
            }
        } else {
            chart
                .configure_series_labels()
                .label_font(("sans-serif", 15))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(legend_position(r.legend.as_deref()))
                .draw()?;
        }
        root.present()?;
    }
    Ok(svg)
}

/// A series whose points are runs of their own: dots, shifted by `dx`.
fn draw_runs(
    chart: &mut Chart,
    label: &str,
    c: &[(f64, f64)],
    col: RGBColor,
    dx: f64,
) -> DrawResult {
    chart
        .draw_series(
            c.iter()
                .map(|p| Circle::new((p.0 + dx, p.1), 3, col.filled())),
        )?
        .label(label)
        .legend(move |(x, y)| Circle::new((x + 9, y), 3, col.filled()));
    Ok(())
}

/// A series as a line (dashed: `dashed`; with dots where there are few
/// points), and the published points of the same series as hollow squares.
fn draw_curve(
    chart: &mut Chart,
    r: &ResultFile,
    label: &str,
    c: &[(f64, f64)],
    col: RGBColor,
    dashed: bool,
) -> DrawResult {
    let style = col.stroke_width(2);
    if dashed {
        chart
            .draw_series(DashedLineSeries::new(c.iter().copied(), 8, 5, style))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 7, y)], style));
    } else {
        chart
            .draw_series(LineSeries::new(c.iter().copied(), style))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    }
    if c.len() <= 60 {
        chart.draw_series(c.iter().map(|p| Circle::new(*p, 3, col.filled())))?;
    }
    let refs = r.reference_points(label);
    if !refs.is_empty() {
        chart
            .draw_series(refs.iter().map(|p| {
                EmptyElement::at(*p) + Rectangle::new([(-5, -5), (5, 5)], col.stroke_width(2))
            }))?
            .label(format!("{label} (published)"))
            .legend(move |(x, y)| {
                Rectangle::new([(x + 4, y - 5), (x + 14, y + 5)], col.stroke_width(2))
            });
    }
    Ok(())
}

/// Where a result's `legend` puts the legend (upper right unless it says).
fn legend_position(legend: Option<&str>) -> SeriesLabelPosition {
    match legend {
        Some("upper-left") => SeriesLabelPosition::UpperLeft,
        Some("lower-right") => SeriesLabelPosition::LowerRight,
        Some("lower-left") => SeriesLabelPosition::LowerLeft,
        _ => SeriesLabelPosition::UpperRight,
    }
}

/// Tick labels with as many decimals as the value needs (at most two);
/// large numbers with a k or M (`250k`, `1.5M`), not `14000000`. The unit
/// follows the axis span, so every tick of an axis has the same one.
pub fn tick(v: f64, span: f64) -> String {
    let short = |x: f64| {
        let d = (0..2)
            .find(|&d| {
                let m = 10f64.powi(d);
                ((x * m).round() - x * m).abs() < 1e-6
            })
            .unwrap_or(2) as usize;
        format!("{x:.d$}")
    };
    if v == 0.0 {
        "0".to_string()
    } else if span >= 1e6 {
        format!("{}M", short(v / 1e6))
    } else if span >= 2e4 {
        format!("{}k", short(v / 1e3))
    } else if span >= 20.0 {
        format!("{v:.0}")
    } else if span >= 2.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::tick;

    #[test]
    fn ticks_read_as_numbers_do() {
        assert_eq!(tick(14_000_000.0, 20e6), "14M");
        assert_eq!(tick(1_500_000.0, 4e6), "1.5M");
        assert_eq!(tick(250_000.0, 9e5), "250k");
        assert_eq!(tick(500_000.0, 1.5e6), "0.5M");
        assert_eq!(tick(1_000_000.0, 1.5e6), "1M");
        assert_eq!(tick(250_000.0, 1e6), "0.25M");
        assert_eq!(tick(0.0, 7e5), "0");
        assert_eq!(tick(4700.0, 10_000.0), "4700");
        assert_eq!(tick(0.25, 1.0), "0.25");
    }
}
