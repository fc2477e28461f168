//! Serving with re-planning (`moeplan replay` in the page): the served
//! batches' balancedness with EPLB re-planned every K batches beside the
//! first plan kept, each re-plan marked with the bytes it moved; and the
//! sweep's curve over K at the window asked for (balancedness, or with a
//! hardware the time with pauses against never re-planning).

use leptos::prelude::*;
use moeplan_view::{ServingView, SweepPoint};

use super::{H, Hover, PAD_L, PAD_T, W, colour, nearest, num1, points, x_of, y_axis, y_of};
use crate::board::Board;

/// The figure: a summary line, the timeline and the sweep.
#[component]
pub fn ServingPanel(board: Board) -> impl IntoView {
    view! {
        <Show when=move || board.serving.with(Option::is_some)>
            <div id="serving-views">
                <p id="serving-summary" class="hint">{move || board.serving.with(|v| v.as_ref().map(summary))}</p>
                <p id="serving-engine" class="hint">{move || board.serving.with(|v| v.as_ref().and_then(|v| v.engine.as_ref().map(|e| format!(
                    "{} knobs: K = {} and W = {} forward passes of {} tokens, {} and {} trace batches; its flags: ",
                    e.engine, v.every, v.window, e.tokens_per_pass, e.every_batches, e.window_batches))))}
                    <code id="serving-flags">{move || board.serving.with(|v| v.as_ref().and_then(|v| v.engine.as_ref()).map(|e| e.flags.clone()))}</code>
                </p>
                <div class="grid">
                    <figure><figcaption id="serving-caption">{move || board.serving.with(|v| v.as_ref().map(|v| format!(
                        "Balancedness per served batch (rule: {}): EPLB re-planned every {} on the last {} (orange) against the first plan kept (grey); a mark per re-plan with the GB it moved",
                        board.rule.get(), v.every, v.window)))}</figcaption>
                        <Timeline board/></figure>
                    <figure><figcaption id="serving-sweep-caption">{move || sweep_caption(board)}</figcaption>
                        <Sweep board/></figure>
                </div>
            </div>
        </Show>
    }
}

/// One line of what the replay found.
fn summary(v: &ServingView) -> String {
    let replans = v.replans.len();
    let mut s = format!(
        "Batches {}..{} served: balancedness {:.4} re-planning every {} on the last {}, {:.4} keeping the first plan; {replans} re-plan(s) moved {} expert copies ({:.1} GB)",
        v.first_served,
        v.first_served + v.per_batch.len(),
        v.balancedness,
        v.every,
        v.window,
        v.static_balancedness,
        v.copies_moved,
        v.gb_moved
    );
    if let Some((t, never)) = v.total_ms {
        let pauses: f64 = v.replans.iter().filter_map(|m| m.pause_ms).sum();
        s += &format!(
            "; predicted MoE time with {pauses:.1} ms of pauses {t:.1} ms against {never:.1} ms never re-planning ({:.3}×)",
            if never > 0.0 { t / never } else { 0.0 }
        );
    }
    s
}

fn sweep_caption(board: Board) -> String {
    let priced = board.serving_sweep.with(|s| {
        s.as_ref()
            .is_some_and(|s| s.iter().any(|p| p.total_ms.is_some()))
    });
    let window = board.serving.with(|v| v.as_ref().map_or(0, |v| v.window));
    if priced {
        format!(
            "Re-plan interval K (window {window}): MoE time with pauses against never re-planning (1 = never re-planning, lower is faster); the ring: K shown"
        )
    } else {
        format!(
            "Re-plan interval K (window {window}): mean balancedness of the served batches (dashed: the first plan kept); the ring: K shown"
        )
    }
}

/// The served batches' balancedness, both series, and the re-plan marks.
#[component]
fn Timeline(board: Board) -> impl IntoView {
    let lo = Memo::new(move |_| {
        board.serving.with(|v| {
            let lo = v.as_ref().map_or(0.0, |v| {
                v.per_batch
                    .iter()
                    .chain(&v.static_per_batch)
                    .copied()
                    .fold(1.0f64, f64::min)
            });
            (lo * 10.0).floor() / 10.0
        })
    });
    let hover = Hover::new();
    let readout = hover.readout("point at a batch for its figures", move |x, _| {
        board.serving.with(|v| {
            let v = v.as_ref()?;
            let i = nearest(x, v.per_batch.len())?;
            let b = v.first_served + i;
            let mark = v
                .replans
                .iter()
                .find(|m| m.at_batch == b)
                .map(|m| {
                    format!(
                        " · re-planned here: {} copies ({} across nodes), {:.2} GB{}",
                        m.copies,
                        m.copies_inter_node,
                        m.gb,
                        m.pause_ms
                            .map(|p| format!(", {p:.1} ms pause"))
                            .unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            Some(format!(
                "batch {b}: re-planning {:.4}, first plan kept {:.4}{mark}",
                v.per_batch.get(i)?,
                v.static_per_batch.get(i)?
            ))
        })
    });
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label="balancedness per served batch with re-planning" id="serving-timeline"
            data-replans=move || board.serving.with(|v| v.as_ref().map_or(0, |v| v.replans.len())).to_string()
            data-points=move || board.serving.with(|v| v.as_ref().map_or(0, |v| v.per_batch.len())).to_string()
            data-every=move || board.serving.with(|v| v.as_ref().map_or(0, |v| v.every)).to_string()
            on:mousemove=move |ev| hover.track(&ev) on:mouseleave=move |_| hover.leave()>
            {move || y_axis(lo.get(), 1.0, 4)}
            {move || board.serving.with(|v| v.as_ref().map(|v| timeline(v, lo.get())))}
        </svg>
        {readout}
    }
}

fn timeline(v: &ServingView, lo: f64) -> impl IntoView + use<> {
    let n = v.per_batch.len() as f64;
    let line = |s: &[f64]| {
        points(
            s.iter()
                .enumerate()
                .map(|(i, &b)| (x_of(i as f64, n), y_of(b, lo, 1.0))),
        )
    };
    // One path for every mark; a label on at most about 12 of them.
    let step = v.replans.len().div_ceil(12).max(1);
    let mut d = String::new();
    let mut labels = Vec::new();
    for (j, m) in v.replans.iter().enumerate() {
        let x = x_of((m.at_batch - v.first_served) as f64, n);
        d.push('M');
        super::push_num(&mut d, x, 1);
        d.push(' ');
        super::push_num(&mut d, PAD_T + 12.0, 1);
        d.push('V');
        super::push_num(&mut d, H - 34.0, 1);
        if j % step == 0 {
            labels.push(view! {
                <text x=num1(x) y=num1(PAD_T + 8.0) class="tick serving-gb" text-anchor="middle">{format!("{:.0} GB", m.gb)}</text>
            });
        }
    }
    view! {
        <path class="serving-marks" d=d stroke="#999" stroke-dasharray="2 3" fill="none"/>
        {labels}
        <polyline class="serving-static" points=line(&v.static_per_batch) fill="none" stroke=colour("base") stroke-width="1.6"/>
        <polyline class="serving-replanned" points=line(&v.per_batch) fill="none" stroke=colour("eplb") stroke-width="1.8"/>
        <text x=format!("{}", W / 2.0) y=format!("{}", H - 1.0) class="axis" text-anchor="middle">
            {format!("served batch ({}..{})", v.first_served, v.first_served + v.per_batch.len())}
        </text>
    }
}

/// A sweep point's value: time against never re-planning when priced,
/// else balancedness.
fn value(p: &SweepPoint, never_ms: Option<f64>) -> f64 {
    match (p.total_ms, never_ms) {
        (Some(t), Some(n)) if n > 0.0 => t / n,
        _ => p.balancedness,
    }
}

/// The curve over K.
#[component]
fn Sweep(board: Board) -> impl IntoView {
    // never re-planning's time and balancedness, from the replay shown
    let never = Memo::new(move |_| {
        board.serving.with(|v| {
            v.as_ref()
                .map(|v| (v.total_ms.map(|t| t.1), v.static_balancedness))
        })
    });
    let hover = Hover::new();
    let readout = hover.readout("point at an interval for its figures", move |x, _| {
        board.serving_sweep.with(|s| {
            let s = s.as_ref()?;
            let p = s.get(nearest(x, s.len())?)?;
            Some(format!(
                "K = {}: balancedness {:.4}, {} copies moved{}",
                p.every,
                p.balancedness,
                p.copies,
                p.total_ms
                    .map(|t| format!(", {t:.1} ms with pauses"))
                    .unwrap_or_default()
            ))
        })
    });
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label="the re-plan interval swept" id="serving-sweep"
            data-points=move || board.serving_sweep.with(|s| s.as_ref().map_or(0, Vec::len)).to_string()
            on:mousemove=move |ev| hover.track(&ev) on:mouseleave=move |_| hover.leave()>
            {move || {
                let every = board.serving.with(|v| v.as_ref().map_or(0, |v| v.every));
                let never = never.get();
                board.serving_sweep.with(|s| s.as_ref().map(|s| sweep(s, every, never)))
            }}
        </svg>
        {readout}
    }
}

fn sweep(
    s: &[SweepPoint],
    every: usize,
    never: Option<(Option<f64>, f64)>,
) -> impl IntoView + use<> {
    let never_ms = never.and_then(|n| n.0);
    let priced = never_ms.is_some() && s.iter().all(|p| p.total_ms.is_some());
    let vals: Vec<f64> = s
        .iter()
        .map(|p| value(p, never_ms.filter(|_| priced)))
        .collect();
    // the reference: 1 (never re-planning's time) or its balancedness
    let reference = if priced {
        1.0
    } else {
        never.map_or(0.0, |n| n.1)
    };
    let (mut lo, mut hi) = vals
        .iter()
        .chain(std::iter::once(&reference))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.1).max(0.01);
    let (lo, hi) = (lo - pad, hi + pad);
    let n = s.len() as f64;
    let pts: Vec<(f64, f64)> = vals
        .iter()
        .enumerate()
        .map(|(i, &v)| (x_of(i as f64, n), y_of(v, lo, hi)))
        .collect();
    let ry = num1(y_of(reference, lo, hi));
    let dots = s
        .iter()
        .zip(&pts)
        .map(|(p, &(x, y))| {
            let ring = p.every == every;
            view! {
                <circle cx=num1(x) cy=num1(y) r=if ring { "7" } else { "3" } class=if ring { "chosen" } else { "" } fill=if ring { "none" } else { colour("eplb") } stroke=colour("eplb")/>
                <text x=num1(x) y=format!("{}", H - 20.0) class="tick" text-anchor="middle">{p.every.to_string()}</text>
            }
        })
        .collect_view();
    view! {
        {y_axis(lo, hi, 4)}
        <line x1=format!("{PAD_L}") x2=format!("{}", W - super::PAD_R) y1=ry.clone() y2=ry class="bound"/>
        <polyline class="serving-curve" points=points(pts.iter().copied()) fill="none" stroke=colour("eplb") stroke-width="2"/>
        {dots}
        <text x=format!("{}", W / 2.0) y=format!("{}", H - 1.0) class="axis" text-anchor="middle">
            {if priced { "re-plan every K batches · dashed: never re-planning (time 1)" } else { "re-plan every K batches · dashed: the first plan kept" }}
        </text>
    }
}
