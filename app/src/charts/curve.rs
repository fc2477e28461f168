//! CRAFT's balancedness against replicas per GPU (log scale), the chosen R
//! marked, EPLB's point (every other replicating plan's) and the bound for reference — the CRAFT paper's
//! Figure 5. Everything but the marker changes with the frame only.

use leptos::prelude::*;

use super::{H, Hover, PAD_L, PAD_R, W, colour, label, nearest, num1, points, x_of, y_axis, y_of};
use crate::board::Board;
use moeplan::planners::CurvePoint;
use moeplan_view::page::Figures;

/// The chart.
#[component]
pub fn CurveChart(board: Board) -> impl IntoView {
    let refs = board.references();
    let focus = board.focus();
    // From the first plan's balancedness (BASE) or the curve's start, to 1.
    let lo = Memo::new(move |_| {
        let first = board
            .plans
            .with(|ps| ps.first().map_or(0.0, |p| p.balancedness));
        let start = board.frame.with(|f| {
            f.as_ref()
                .and_then(|f| f.curve.first())
                .map_or(1.0, |p| p.predicted_balancedness)
        });
        (first.min(start).min(1.0) * 10.0).floor() / 10.0
    });
    let line = Memo::new(move |_| {
        let lo = lo.get();
        board.frame.with(|f| {
            let pts = f.as_ref().map_or(&[][..], |f| &f.curve[..]);
            let n = pts.len() as f64;
            pts.iter()
                .enumerate()
                .map(|(i, p)| (x_of(i as f64, n), y_of(p.predicted_balancedness, lo, 1.0)))
                .collect::<Vec<_>>()
        })
    });
    let chosen = Memo::new(move |_| {
        let r = board.replicas_per_gpu.get();
        let i = board.frame.with(|f| {
            f.as_ref()
                .and_then(|f| f.curve.iter().position(|p| p.replicas_per_gpu == r))
        })?;
        line.with(|l| l.get(i).copied())
    });
    // The marker: one attribute moves it; another shows or hides it, set
    // only when R moves on or off the curve's points.
    let marker = Memo::new(move |_| {
        chosen
            .get()
            .map(|(x, y)| format!("translate({} {})", num1(x), num1(y)))
            .unwrap_or_default()
    });
    let on_curve = Memo::new(move |_| chosen.with(Option::is_some));
    let hover = Hover::new();
    let readout = hover.readout("point at the curve for its figures", move |x, _| {
        board.frame.with(|f| {
            let pts = &f.as_ref()?.curve;
            let p = pts.get(nearest(x, pts.len())?)?;
            Some(format!(
                "R = {}: {} replicas, balancedness {:.4}, bound {:.4}",
                p.replicas_per_gpu, p.replicas, p.predicted_balancedness, p.bound
            ))
        })
    });
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label=move || format!("{} balancedness against replicas per GPU", label(&focus.get()))
            on:mousemove=move |ev| hover.track(&ev) on:mouseleave=move |_| hover.leave()>
            {move || {
                let lo = lo.get();
                let (refs, focus) = (refs.get(), focus.get());
                line.with(|line| board.frame.with(|f| f.as_ref().map(|f| fixed(&f.curve, line, lo, &focus, &refs))))
            }}
            <circle class="chosen" r="7" transform=move || marker.get() visibility=move || if on_curve.get() { "visible" } else { "hidden" }/>
            <text x=format!("{}", W / 2.0) y=format!("{}", H - 1.0) class="axis" text-anchor="middle">{move || refs.with(|r| {
                let squares: Vec<&str> = r.iter().map(|p| label(&p.name)).collect();
                let squares = if squares.is_empty() { String::new() } else { format!(" · square: {}", squares.join(", ")) };
                format!("replicas per GPU (R, log scale) · dashed: bound{squares}")
            })}</text>
        </svg>
        {readout}
    }
}

/// What a budget change does not move: axis, bound, curve, the other
/// replicating plans' points (EPLB's).
fn fixed(
    pts: &[CurvePoint],
    line: &[(f64, f64)],
    lo: f64,
    focus: &str,
    refs: &[Figures],
) -> impl IntoView + use<> {
    let focus_colour = colour(focus);
    let n = pts.len() as f64;
    let bound = points(
        pts.iter()
            .enumerate()
            .map(|(i, p)| (x_of(i as f64, n), y_of(p.bound, lo, 1.0))),
    );
    let squares = refs
        .iter()
        .map(|p| {
            // A plan's R = its replica slots per GPU, on the same log axis.
            let r = p.replica_slots_per_gpu.max(1) as f64;
            let first = pts
                .first()
                .map_or(1.0, |p| p.replicas_per_gpu.max(1) as f64);
            let last = pts.last().map_or(1.0, |p| p.replicas_per_gpu.max(1) as f64);
            let t = if last > first {
                (r.log2() - first.log2()) / (last.log2() - first.log2())
            } else {
                0.5
            };
            let (x, y) = (
                PAD_L + (W - PAD_L - PAD_R) * t.clamp(0.0, 1.0),
                y_of(p.balancedness, lo, 1.0),
            );
            view! {
                <rect x=num1(x - 4.0) y=num1(y - 4.0) width="8" height="8" fill=colour(&p.name)>
                    <title>{format!("{}: {r:.0} replica slots per GPU", label(&p.name))}</title>
                </rect>
            }
        })
        .collect_view();
    let dots = pts
        .iter()
        .zip(line)
        .map(|(p, &(x, y))| {
            view! {
                <circle cx=num1(x) cy=num1(y) r="3" fill=focus_colour>
                    <title>{format!("R = {}: {} replicas, balancedness {:.4}, bound {:.4}", p.replicas_per_gpu, p.replicas, p.predicted_balancedness, p.bound)}</title>
                </circle>
                <text x=num1(x) y=format!("{}", H - 20.0) class="tick" text-anchor="middle">{p.replicas_per_gpu.to_string()}</text>
            }
        })
        .collect_view();
    view! {
        <g>
            {y_axis(lo, 1.0, 4)}
            <polyline points=bound class="bound"/>
            <polyline points=points(line.iter().copied()) fill="none" stroke=focus_colour stroke-width="2"/>
            {dots}
            {squares}
        </g>
    }
}
