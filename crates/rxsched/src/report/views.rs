//! A figure's two companion views: where its packets died (for each
//! offered rate, the share delivered and the share dropped at each drop
//! point, drops before any work in blues apart from drops after work in
//! reds), and where its CPU went (the share of each context). One panel
//! per series; a drop point and a context have the same colour in every
//! figure.

use super::plot::tick;
use crate::result::{Point, ResultFile};
use plotters::prelude::*;
use rxsched_core::DropPoint;
use serde_json::Value;

/// Delivered.
const DELIVERED: RGBColor = RGBColor(44, 160, 44);
/// The grey of losses a bench counts without a drop point of ours, by
/// name, the same in every figure: what a peer or receiver did not take
/// (light), what the lab's output side lost (mid), what a guard dropped
/// in XDP (dark), what no counter claims (lightest).
fn unnamed_colour(name: &str) -> RGBColor {
    match name {
        "guard_in_xdp" => RGBColor(95, 95, 95),
        "output_link" => RGBColor(140, 140, 140),
        "unattributed" => RGBColor(215, 215, 215),
        _ => RGBColor(175, 175, 175),
    }
}

/// Drops before any work: blues and teals.
const BEFORE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(23, 190, 207),
    RGBColor(120, 170, 220),
    RGBColor(60, 80, 160),
    RGBColor(150, 210, 230),
    RGBColor(90, 140, 170),
];
/// Drops after work: reds, oranges and browns.
const AFTER: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 80, 20),
    RGBColor(250, 170, 100),
    RGBColor(150, 30, 60),
    RGBColor(200, 150, 120),
];

/// A drop point's colour, the same in every figure.
fn drop_colour(p: DropPoint) -> RGBColor {
    let same: Vec<DropPoint> = DropPoint::ALL
        .iter()
        .copied()
        .filter(|q| q.before_work() == p.before_work())
        .collect();
    let i = same.iter().position(|q| *q == p).unwrap_or(0);
    if p.before_work() {
        BEFORE[i % BEFORE.len()]
    } else {
        AFTER[i % AFTER.len()]
    }
}

/// A CPU context's colour, the same in every figure.
fn cpu_colour(ctx: &str) -> RGBColor {
    match ctx {
        "idle" => RGBColor(225, 225, 225),
        // A real compute process's time that made no progress.
        "lost" => RGBColor(180, 180, 180),
        "interrupt" | "isr" => RGBColor(214, 39, 40),
        // The device's receive work: a softirq, a DPC, or (Linux's threaded
        // NAPI, real and simulated lab) the device's thread.
        "softirq" | "dpc" | "napi" => RGBColor(255, 127, 14),
        // A polling thread: the simulator's, or a real router's.
        "poll" | "router" => RGBColor(148, 103, 189),
        "screen" => RGBColor(188, 189, 34),
        "writer" => RGBColor(23, 190, 207),
        "kernel_thread" => RGBColor(140, 86, 75),
        "locking" => RGBColor(100, 100, 100),
        c if c.starts_with("user:") => {
            let greens = [
                RGBColor(44, 160, 44),
                RGBColor(120, 200, 100),
                RGBColor(20, 110, 60),
            ];
            let h = c
                .bytes()
                .fold(0usize, |a, b| a.wrapping_mul(31) + b as usize);
            greens[h % greens.len()]
        }
        _ => RGBColor(31, 119, 180),
    }
}

/// One layer of a stack: its name, colour and share at each x.
struct Layer {
    name: String,
    colour: RGBColor,
    shares: Vec<f64>,
}

/// A series' x values and its layers (shares of 1 at each x).
struct Panel {
    label: String,
    xs: Vec<f64>,
    layers: Vec<Layer>,
}

/// The points of a series that have the group `group`, sorted by x.
fn sorted<'a>(r: &'a ResultFile, label: &'a str, group: &str) -> Vec<(f64, &'a Point)> {
    let mut v: Vec<(f64, &Point)> = r
        .points(label)
        .filter(|p| p.0.get(group).is_some_and(Value::is_object))
        .filter_map(|p| Some((p.get(&r.x.metric)?, p)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn count(p: &Point, group: &str, key: &str) -> f64 {
    p.0.get(group)
        .and_then(|g| g.get(key))
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
}

/// Where each series' packets died, as shares of what arrived.
fn drop_panels(r: &ResultFile) -> Vec<Panel> {
    let mut out = Vec::new();
    for s in &r.series {
        let pts = sorted(r, &s.label, "drops");
        if pts.len() < 2 {
            continue;
        }
        let present: Vec<DropPoint> = DropPoint::ALL
            .iter()
            .copied()
            .filter(|d| pts.iter().any(|(_, p)| count(p, "drops", d.name()) > 0.0))
            .collect();
        // Losses a series counts without a drop point of ours (a peer's
        // frames sent and not written): shown, but not as a drop point.
        let mut unnamed: Vec<String> = Vec::new();
        for (_, p) in &pts {
            for k in
                p.0.get("drops")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flat_map(|m| m.keys())
            {
                if DropPoint::ALL.iter().all(|d| d.name() != k) && !unnamed.contains(k) {
                    unnamed.push(k.clone());
                }
            }
        }
        // What got through: delivered, written (a monitor's) or received
        // (a consumer's).
        let delivered = |p: &Point| {
            p.get("delivered")
                .or_else(|| p.get("written"))
                .or_else(|| p.get("received"))
                .unwrap_or(0.0)
        };
        let total = |p: &Point| {
            let drops: f64 = present
                .iter()
                .map(|d| count(p, "drops", d.name()))
                .sum::<f64>()
                + unnamed.iter().map(|k| count(p, "drops", k)).sum::<f64>();
            p.get("arrived")
                .unwrap_or(0.0)
                .max(delivered(p) + drops)
                .max(1.0)
        };
        let mut layers = vec![Layer {
            name: "delivered".into(),
            colour: DELIVERED,
            shares: pts.iter().map(|(_, p)| delivered(p) / total(p)).collect(),
        }];
        for k in &unnamed {
            layers.push(Layer {
                name: format!("{k} (counted by the bench)"),
                colour: unnamed_colour(k),
                shares: pts
                    .iter()
                    .map(|(_, p)| count(p, "drops", k) / total(p))
                    .collect(),
            });
        }
        // After work next to what was delivered, before work on top.
        let mut order = present.clone();
        order.sort_by_key(|d| d.before_work());
        for d in order {
            layers.push(Layer {
                name: format!(
                    "{} ({})",
                    d.name(),
                    if d.before_work() {
                        "before work"
                    } else {
                        "after work"
                    }
                ),
                colour: drop_colour(d),
                shares: pts
                    .iter()
                    .map(|(_, p)| count(p, "drops", d.name()) / total(p))
                    .collect(),
            });
        }
        out.push(Panel {
            label: s.label.clone(),
            xs: pts.iter().map(|(x, _)| *x).collect(),
            layers,
        });
    }
    out
}

/// Where each series' CPU went, as shares of all of it.
fn cpu_panels(r: &ResultFile) -> Vec<Panel> {
    let mut out = Vec::new();
    for s in &r.series {
        let pts = sorted(r, &s.label, "cpu");
        if pts.len() < 2 {
            continue;
        }
        let mut names: Vec<String> = pts
            .iter()
            .flat_map(|(_, p)| p.0["cpu"].as_object().into_iter().flat_map(|o| o.keys()))
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        // Idle on top, below it what a real compute process lost; the
        // rest by name.
        names.sort_by_key(|n| match n.as_str() {
            "idle" => 2,
            "lost" => 1,
            _ => 0,
        });
        let layers = names
            .iter()
            .map(|n| Layer {
                name: n.clone(),
                colour: cpu_colour(n),
                shares: pts.iter().map(|(_, p)| count(p, "cpu", n)).collect(),
            })
            .filter(|l| l.shares.iter().any(|v| *v > 0.0))
            .collect();
        out.push(Panel {
            label: s.label.clone(),
            xs: pts.iter().map(|(x, _)| *x).collect(),
            layers,
        });
    }
    out
}

/// Where a result's packets died, or `None` if its points do not say.
pub fn drops_svg(r: &ResultFile) -> Option<String> {
    let panels = drop_panels(r);
    let title = format!("{}: where the packets went", r.id);
    draw(r, &panels, &title, "Share of the packets that arrived").ok()?
}

/// Where a result's CPU went, or `None` if its points do not say.
pub fn cpu_svg(r: &ResultFile) -> Option<String> {
    let panels = cpu_panels(r);
    let title = format!("{}: where the CPU went", r.id);
    draw(r, &panels, &title, "Share of the CPU").ok()?
}

type Drawn = Result<Option<String>, Box<dyn std::error::Error>>;

/// Stacked areas, a panel per series, the legend (every layer of every
/// panel, once) at the right.
fn draw(r: &ResultFile, panels: &[Panel], title: &str, y: &str) -> Drawn {
    if panels.is_empty() {
        return Ok(None);
    }
    let cols = panels.len().min(3);
    let rows = panels.len().div_ceil(cols);
    let mut seen: Vec<(&str, RGBColor)> = Vec::new();
    for l in panels.iter().flat_map(|p| &p.layers) {
        if !seen.iter().any(|(n, _)| *n == l.name) {
            seen.push((&l.name, l.colour));
        }
    }
    // Wide enough for the longest name at 14 px (about 8 px a character).
    let longest = seen
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0);
    let (pw, ph) = (380u32, 280u32);
    let legend_w = (40 + 8 * longest as u32).max(250);
    let size = (pw * cols as u32 + legend_w, ph * rows as u32 + 40);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 20))?;
        let (grid, legend) = root.split_horizontally(pw * cols as u32);
        let areas = grid.split_evenly((rows, cols));
        for (area, p) in areas.iter().zip(panels) {
            panel(r, area, p, y)?;
        }
        for (i, (name, c)) in seen.iter().enumerate() {
            let y0 = 30 + 22 * i as i32;
            legend.draw(&Rectangle::new([(8, y0), (24, y0 + 14)], c.filled()))?;
            legend.draw(&Text::new(
                name.to_string(),
                (30, y0 + 1),
                ("sans-serif", 14),
            ))?;
        }
        root.present()?;
    }
    Ok(Some(svg))
}

fn panel(
    r: &ResultFile,
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    p: &Panel,
    y: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let (x0, x1) = (p.xs[0], p.xs[p.xs.len() - 1]);
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(&p.label, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(x0..x1, 0.0..1.0)?;
    let span = x1 - x0;
    chart
        .configure_mesh()
        .x_desc(&r.x.label)
        .y_desc(y)
        .x_labels(5)
        .y_labels(5)
        .x_label_formatter(&|v| tick(*v, span))
        .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 13))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()?;
    let mut below = vec![0.0; p.xs.len()];
    for l in &p.layers {
        let above: Vec<f64> = below.iter().zip(&l.shares).map(|(b, s)| b + s).collect();
        let mut poly: Vec<(f64, f64)> = p.xs.iter().copied().zip(above.iter().copied()).collect();
        poly.extend(p.xs.iter().copied().zip(below.iter().copied()).rev());
        chart.draw_series(std::iter::once(Polygon::new(poly, l.colour.filled())))?;
        below = above;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capture bench's result: `n` series, the first ours (a named drop
    /// point), the rest peers (what they did not write, unnamed).
    fn capture_result(n: usize) -> ResultFile {
        let series: Vec<Value> = (0..n)
            .map(|i| {
                let drops = if i == 0 {
                    serde_json::json!({"nic_rx_ring": 300.0})
                } else {
                    serde_json::json!({"not_written": 300.0})
                };
                let pts: Vec<Value> = [1000.0, 2000.0]
                    .iter()
                    .map(|x| {
                        serde_json::json!({"offered_pps": x, "delivered_pps": 700.0,
                            "arrived": 1000.0, "written": 700.0, "drops": drops})
                    })
                    .collect();
                serde_json::json!({"label": format!("s{i}"), "config": {}, "points": pts})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "schema": crate::result::SCHEMA, "id": "real-x", "title": "t", "source": "lab",
            "profile": "p", "seed": 0,
            "x": {"metric": "offered_pps", "label": "Offered"},
            "y": {"metric": "delivered_pps", "label": "Written"},
            "series": series, "reference": [], "checks": []
        }))
        .unwrap()
    }

    /// A monitor's frames written count as delivered, and a peer's losses
    /// with no drop point of ours show as such, not as nothing.
    #[test]
    fn written_frames_and_unnamed_losses_are_drawn() {
        let panels = drop_panels(&capture_result(2));
        let layer = |p: &Panel, name: &str| {
            p.layers
                .iter()
                .find(|l| l.name.starts_with(name))
                .map(|l| l.shares.clone())
        };
        assert_eq!(layer(&panels[0], "delivered"), Some(vec![0.7, 0.7]));
        assert_eq!(layer(&panels[0], "nic_rx_ring"), Some(vec![0.3, 0.3]));
        assert_eq!(layer(&panels[1], "delivered"), Some(vec![0.7, 0.7]));
        assert_eq!(
            layer(&panels[1], "not_written (counted by the bench)"),
            Some(vec![0.3, 0.3])
        );
    }

    /// Past eight series the legend goes beside the plot, wider, every
    /// label in it; a long title is cut to fit.
    #[test]
    fn many_series_get_their_legend_beside_the_plot() {
        let few = crate::report::plot::plot(&capture_result(3)).unwrap();
        let many = crate::report::plot::plot(&capture_result(12)).unwrap();
        assert!(few.starts_with("<svg width=\"900\""), "{}", &few[..60]);
        assert!(many.starts_with("<svg width=\"1200\""), "{}", &many[..60]);
        assert!((0..12).all(|i| many.contains(&format!(">\ns{i}\n<"))));
    }
}
