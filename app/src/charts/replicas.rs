//! The focus plan's (CRAFT's) replicas in each layer as bars (one path),
//! every other replicating plan's (EPLB's uniform count) as a line.

use leptos::prelude::*;

use super::{
    H, Hover, PAD_B, PAD_L, PAD_R, W, colour, column, frame_layer_ticks, label, num1, push_rect,
    y_axis, y_of,
};
use crate::board::Board;

/// The chart.
#[component]
pub fn ReplicasChart(board: Board) -> impl IntoView {
    let craft = board.focus_plan();
    let refs = board.references();
    let focus = board.focus();
    let max = Memo::new(move |_| {
        let top = |p: &Option<moeplan_view::page::Figures>| {
            p.as_ref()
                .and_then(|p| p.replicas_per_layer.iter().copied().max())
                .unwrap_or(0)
        };
        let refs_top = refs.with(|r| r.iter().map(|p| top(&Some(p.clone()))).max().unwrap_or(0));
        craft.with(top).max(refs_top).max(1) as f64
    });
    let bars = Memo::new(move |_| {
        let max = max.get();
        craft.with(|p| {
            let mut d = String::new();
            let Some(p) = p else {
                return d;
            };
            let bar_w = (W - PAD_L - PAD_R) / p.replicas_per_layer.len().max(1) as f64;
            for (i, &r) in p.replicas_per_layer.iter().enumerate() {
                if r > 0 {
                    let y = y_of(r as f64, 0.0, max);
                    push_rect(
                        &mut d,
                        PAD_L + i as f64 * bar_w + 0.5,
                        y,
                        (bar_w - 1.0).max(0.5),
                        H - PAD_B - y,
                    );
                }
            }
            d
        })
    });
    // One step line per reference plan: flat for EPLB's uniform count.
    let ref_lines = Memo::new(move |_| {
        let max = max.get();
        refs.with(|r| {
            r.iter()
                .map(|p| {
                    let n = p.replicas_per_layer.len().max(1) as f64;
                    let w = (W - PAD_L - PAD_R) / n;
                    let mut d = String::new();
                    for (i, &c) in p.replicas_per_layer.iter().enumerate() {
                        let y = num1(y_of(c as f64, 0.0, max));
                        let x0 = num1(PAD_L + i as f64 * w);
                        let x1 = num1(PAD_L + (i + 1) as f64 * w);
                        let op = if i == 0 { 'M' } else { 'L' };
                        d.push_str(&format!("{op}{x0} {y}L{x1} {y}"));
                    }
                    let uniform = p.replicas_per_layer.windows(2).all(|w| w[0] == w[1]);
                    let r = p.replicas_per_layer.first().copied().unwrap_or(0);
                    let what = if uniform {
                        format!("{}: {r} per layer", label(&p.name))
                    } else {
                        format!("{}: replicas per layer", label(&p.name))
                    };
                    (d, colour(&p.name), what)
                })
                .collect::<Vec<_>>()
        })
    });
    let hover = Hover::new();
    let readout = hover.readout("point at a layer for its replicas", move |x, _| {
        let ids = board
            .frame
            .with(|f| f.as_ref().map(|f| f.layer_ids.clone()))?;
        let i = column(x, ids.len())?;
        let c = craft.with(|p| {
            p.as_ref()
                .and_then(|p| p.replicas_per_layer.get(i).copied())
        })?;
        let others: String = refs.with(|r| {
            r.iter()
                .filter_map(|p| {
                    let e = p.replicas_per_layer.get(i)?;
                    Some(format!(" · {} {e}", label(&p.name)))
                })
                .collect()
        });
        Some(format!(
            "layer {}: {} {c} replicas{others}",
            ids.get(i)?,
            focus.with(|f| label(f))
        ))
    });
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label="replicas per layer"
            on:mousemove=move |ev| hover.track(&ev) on:mouseleave=move |_| hover.leave()>
            {move || y_axis(0.0, max.get(), 4)}
            <path d=move || bars.get() fill=move || focus.with(|f| colour(f))><title>{move || focus.with(|f| label(f))}</title></path>
            {move || ref_lines.get().into_iter().map(|(d, stroke, what)| view! {
                <path d=d fill="none" stroke=stroke stroke-width="2"><title>{what}</title></path>
            }).collect_view()}
            {frame_layer_ticks(board)}
        </svg>
        {readout}
    }
}
