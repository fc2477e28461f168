//! The page's charts, as plain SVG built from a [`View`]. One tidy module
//! rather than a chart crate: the charts are simple, and no maintained chart
//! crate for Leptos 0.8 stays this small in wasm.

use leptos::prelude::*;
use moeplan::workspace::View;

const W: f64 = 640.0;
const H: f64 = 220.0;
const PAD_L: f64 = 44.0;
const PAD_R: f64 = 12.0;
const PAD_T: f64 = 12.0;
const PAD_B: f64 = 34.0;

/// Series colours: BASE, EPLB, CRAFT (colour-blind safe).
pub fn colour(name: &str) -> &'static str {
    match name {
        "base" => "#8c8c8c",
        "eplb" => "#e69f00",
        "craft" => "#0072b2",
        _ => "#009e73",
    }
}

/// Display name of a plan.
pub fn label(name: &str) -> &'static str {
    match name {
        "base" => "BASE",
        "eplb" => "EPLB",
        "craft" => "CRAFT",
        _ => "plan",
    }
}

fn x_of(i: f64, n: f64) -> f64 {
    PAD_L + (W - PAD_L - PAD_R) * if n > 1.0 { i / (n - 1.0) } else { 0.5 }
}

fn y_of(v: f64, lo: f64, hi: f64) -> f64 {
    let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
    H - PAD_B - (H - PAD_T - PAD_B) * t.clamp(0.0, 1.0)
}

fn polyline(points: &[(f64, f64)]) -> String {
    points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn y_axis(lo: f64, hi: f64, ticks: usize) -> impl IntoView + use<> {
    (0..=ticks)
        .map(|i| {
            let v = lo + (hi - lo) * i as f64 / ticks as f64;
            let y = y_of(v, lo, hi);
            view! {
                <line x1=format!("{PAD_L}") x2=format!("{}", W - PAD_R) y1=format!("{y:.1}") y2=format!("{y:.1}") class="grid"/>
                <text x=format!("{}", PAD_L - 4.0) y=format!("{:.1}", y + 4.0) class="tick" text-anchor="end">{format!("{v:.2}")}</text>
            }
        })
        .collect_view()
}

/// CRAFT's balancedness against replicas per GPU (log scale), the chosen R
/// marked, EPLB's point and the bound for reference — the CRAFT paper's
/// Figure 5.
pub fn curve_chart(v: &View) -> impl IntoView + use<> {
    let pts = &v.curve;
    let n = pts.len() as f64;
    let lo = v
        .plans
        .first()
        .map(|p| p.balancedness)
        .unwrap_or(0.0)
        .min(pts.first().map_or(1.0, |p| p.predicted_balancedness))
        .min(1.0);
    let lo = (lo * 10.0).floor() / 10.0;
    let hi = 1.0;
    let line: Vec<(f64, f64)> = pts
        .iter()
        .enumerate()
        .map(|(i, p)| (x_of(i as f64, n), y_of(p.predicted_balancedness, lo, hi)))
        .collect();
    let bound: Vec<(f64, f64)> = pts
        .iter()
        .enumerate()
        .map(|(i, p)| (x_of(i as f64, n), y_of(p.bound, lo, hi)))
        .collect();
    let chosen = pts
        .iter()
        .position(|p| p.replicas_per_gpu == v.replicas_per_gpu);
    let eplb = v.plans.iter().find(|p| p.name == "eplb").map(|p| {
        // EPLB's R = replica slots per GPU, placed on the same log axis
        let r = p.replica_slots_per_gpu.max(1) as f64;
        let first = pts.first().map_or(1.0, |p| p.replicas_per_gpu as f64);
        let last = pts.last().map_or(1.0, |p| p.replicas_per_gpu as f64);
        let t = if last > first {
            (r.log2() - first.log2()) / (last.log2() - first.log2())
        } else {
            0.5
        };
        (
            PAD_L + (W - PAD_L - PAD_R) * t.clamp(0.0, 1.0),
            y_of(p.balancedness, lo, hi),
            r,
        )
    });
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label="CRAFT balancedness against replicas per GPU">
            {y_axis(lo, hi, 4)}
            <polyline points=polyline(&bound) class="bound"/>
            <polyline points=polyline(&line) fill="none" stroke=colour("craft") stroke-width="2"/>
            {pts.iter().enumerate().map(|(i, p)| {
                let (x, y) = line[i];
                view! {
                    <circle cx=format!("{x:.1}") cy=format!("{y:.1}") r="3" fill=colour("craft")>
                        <title>{format!("R = {}: {} replicas, balancedness {:.4}, bound {:.4}", p.replicas_per_gpu, p.replicas, p.predicted_balancedness, p.bound)}</title>
                    </circle>
                    <text x=format!("{x:.1}") y=format!("{}", H - 20.0) class="tick" text-anchor="middle">{p.replicas_per_gpu.to_string()}</text>
                }
            }).collect_view()}
            {chosen.map(|i| {
                let (x, y) = line[i];
                view! { <circle cx=format!("{x:.1}") cy=format!("{y:.1}") r="7" class="chosen"/> }
            })}
            {eplb.map(|(x, y, r)| view! {
                <rect x=format!("{:.1}", x - 4.0) y=format!("{:.1}", y - 4.0) width="8" height="8" fill=colour("eplb")>
                    <title>{format!("EPLB: {r:.0} replica slots per GPU")}</title>
                </rect>
            })}
            <text x=format!("{}", W / 2.0) y=format!("{}", H - 1.0) class="axis" text-anchor="middle">"replicas per GPU (R, log scale) · dashed: bound · square: EPLB"</text>
        </svg>
    }
}

/// Per-layer balancedness of every plan.
pub fn layers_chart(v: &View) -> impl IntoView + use<> {
    let n = v.layer_ids.len() as f64;
    let lo = v
        .plans
        .iter()
        .flat_map(|p| p.per_layer.iter().copied())
        .fold(1.0f64, f64::min);
    let lo = (lo * 10.0).floor() / 10.0;
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label="balancedness per layer">
            {y_axis(lo, 1.0, 4)}
            {v.plans.iter().map(|p| {
                let pts: Vec<(f64, f64)> = p.per_layer.iter().enumerate()
                    .map(|(i, &b)| (x_of(i as f64, n), y_of(b, lo, 1.0))).collect();
                view! { <polyline points=polyline(&pts) fill="none" stroke=colour(&p.name) stroke-width="1.6"><title>{label(&p.name)}</title></polyline> }
            }).collect_view()}
            {layer_ticks(&v.layer_ids)}
        </svg>
    }
}

fn layer_ticks(ids: &[u32]) -> impl IntoView + use<> {
    let n = ids.len();
    let step = n.div_ceil(12).max(1);
    ids.iter()
        .enumerate()
        .filter(|(i, _)| i % step == 0)
        .map(|(i, id)| {
            let x = x_of(i as f64, n as f64);
            view! { <text x=format!("{x:.1}") y=format!("{}", H - 20.0) class="tick" text-anchor="middle">{id.to_string()}</text> }
        })
        .collect_view()
}

/// CRAFT's replicas in each layer, EPLB's uniform count as a line.
pub fn replicas_chart(v: &View) -> impl IntoView + use<> {
    let craft = v.plans.iter().find(|p| p.name == "craft");
    let eplb = v.plans.iter().find(|p| p.name == "eplb");
    let max = craft
        .iter()
        .chain(eplb.iter())
        .flat_map(|p| p.replicas_per_layer.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let n = v.layer_ids.len().max(1) as f64;
    let bar_w = (W - PAD_L - PAD_R) / n;
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label="replicas per layer">
            {y_axis(0.0, max, 4)}
            {craft.map(|p| p.replicas_per_layer.iter().enumerate().map(|(i, &r)| {
                let y = y_of(r as f64, 0.0, max);
                view! {
                    <rect x=format!("{:.1}", PAD_L + i as f64 * bar_w + 0.5) y=format!("{y:.1}")
                        width=format!("{:.1}", (bar_w - 1.0).max(0.5)) height=format!("{:.1}", H - PAD_B - y) fill=colour("craft")>
                        <title>{format!("layer {}: {r} replicas", v.layer_ids[i])}</title>
                    </rect>
                }
            }).collect_view())}
            {eplb.and_then(|p| p.replicas_per_layer.first()).map(|&r| {
                let y = y_of(r as f64, 0.0, max);
                view! { <line x1=format!("{PAD_L}") x2=format!("{}", W - PAD_R) y1=format!("{y:.1}") y2=format!("{y:.1}") stroke=colour("eplb") stroke-width="2"><title>{format!("EPLB: {r} per layer")}</title></line> }
            })}
            {layer_ticks(&v.layer_ids)}
        </svg>
    }
}

/// Colour of a load relative to the layer's mean GPU load: white at the
/// mean, blue below, red above, full colour at ±40 %.
fn heat_colour(x: f64) -> String {
    let t = (((x - 1.0) / 0.4).clamp(-1.0, 1.0) * 255.0) as i32;
    if t >= 0 {
        format!("rgb(255,{},{})", 255 - t, 255 - t)
    } else {
        format!("rgb({},{},255)", 255 + t, 255 + t)
    }
}

/// Colour buckets of the heat map, each side of the mean.
const HEAT_STEPS: i32 = 10;

/// CRAFT's GPU × layer load, relative to each layer's mean. Cells are
/// grouped into a few colour buckets and each bucket is drawn as one SVG path
/// of rectangles: a 64-GPU × 58-layer map is about 20 elements, not 3,700, so
/// a budget change repaints it within a frame.
pub fn heat_map(v: &View) -> impl IntoView + use<> {
    let layers = v.heat.len().max(1);
    let gpus = v.heat.first().map_or(1, Vec::len).max(1);
    let cw = (W - PAD_L - PAD_R) / layers as f64;
    let ch = (H - PAD_T - PAD_B) / gpus as f64;
    let mut paths: Vec<String> = vec![String::new(); (2 * HEAT_STEPS + 1) as usize];
    for (l, row) in v.heat.iter().enumerate() {
        for (g, &x) in row.iter().enumerate() {
            let bucket = heat_bucket(x);
            let d = &mut paths[(bucket + HEAT_STEPS) as usize];
            let _ = std::fmt::Write::write_fmt(
                d,
                format_args!(
                    "M{:.1} {:.1}h{:.2}v{:.2}h-{:.2}z",
                    PAD_L + l as f64 * cw,
                    PAD_T + g as f64 * ch,
                    cw + 0.05,
                    ch + 0.05,
                    cw + 0.05
                ),
            );
        }
    }
    let ids = v.layer_ids.clone();
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart heat" role="img" aria-label="GPU by layer load">
            {paths.into_iter().enumerate().filter(|(_, d)| !d.is_empty()).map(|(i, d)| {
                let fill = bucket_colour(i as i32 - HEAT_STEPS);
                view! { <path d=d fill=fill/> }
            }).collect_view()}
            <text x=format!("{}", PAD_L - 4.0) y=format!("{}", PAD_T + 8.0) class="tick" text-anchor="end">"GPU 0"</text>
            <text x=format!("{}", PAD_L - 4.0) y=format!("{}", H - PAD_B) class="tick" text-anchor="end">{format!("{}", gpus - 1)}</text>
            {layer_ticks(&ids)}
        </svg>
    }
}

/// Bucket of a relative load: −10 (≤ 60 % of the mean) … 0 … +10 (≥ 140 %).
fn heat_bucket(x: f64) -> i32 {
    (((x - 1.0) / 0.4).clamp(-1.0, 1.0) * HEAT_STEPS as f64).round() as i32
}

fn bucket_colour(b: i32) -> String {
    heat_colour(1.0 + 0.4 * b as f64 / HEAT_STEPS as f64)
}

/// One layer under CRAFT: a column per GPU, a box per hosted expert sized by
/// the share of the layer's tokens it receives; replicated experts drawn in
/// the CRAFT colour with their copy count.
pub fn layer_placement(v: &View) -> impl IntoView + use<> {
    let gpus = &v.layer.gpus;
    let d = gpus.len().max(1) as f64;
    let loads: Vec<f64> = gpus.iter().map(|g| g.iter().map(|s| s.2).sum()).collect();
    let max = loads.iter().copied().fold(0.0, f64::max).max(1e-12);
    let cw = (W - PAD_L - PAD_R) / d;
    let mean = 1.0 / d;
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label="experts on each GPU">
            {gpus.iter().enumerate().map(|(g, slots)| {
                let mut y = H - PAD_B;
                slots.iter().map(|&(e, copies, share)| {
                    let h = (H - PAD_T - PAD_B) * share / max;
                    y -= h;
                    let fill = if copies > 1 { colour("craft") } else { "#c9d6e3" };
                    view! {
                        <rect x=format!("{:.2}", PAD_L + g as f64 * cw + 0.5) y=format!("{y:.2}")
                            width=format!("{:.2}", (cw - 1.0).max(0.5)) height=format!("{:.2}", h.max(0.0)) fill=fill class="slot">
                            <title>{format!("GPU {g}: expert {e}{} — {:.2} % of the layer's tokens", if copies > 1 { format!(" (1 of {copies} copies)") } else { String::new() }, share * 100.0)}</title>
                        </rect>
                    }
                }).collect_view()
            }).collect_view()}
            <line x1=format!("{PAD_L}") x2=format!("{}", W - PAD_R)
                y1=format!("{:.1}", H - PAD_B - (H - PAD_T - PAD_B) * mean / max)
                y2=format!("{:.1}", H - PAD_B - (H - PAD_T - PAD_B) * mean / max) class="mean"/>
            <text x=format!("{}", W / 2.0) y=format!("{}", H - 8.0) class="axis" text-anchor="middle">
                {format!("GPUs 0–{} · line: mean GPU load · dark boxes: replicated experts", gpus.len().saturating_sub(1))}
            </text>
        </svg>
    }
}
