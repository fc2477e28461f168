//! Per-layer balancedness of every plan: one polyline per plan, each
//! redrawn only when its plan's figures change.

use leptos::prelude::*;

use super::{H, Hover, W, colour, frame_layer_ticks, label, nearest, points, x_of, y_axis, y_of};
use crate::board::Board;

/// The chart.
#[component]
pub fn LayersChart(board: Board) -> impl IntoView {
    // The scale: the lowest layer of any plan, to 1.
    let lo = Memo::new(move |_| {
        let lo = board.plans.with(|ps| {
            ps.iter()
                .flat_map(|p| p.per_layer.iter().copied())
                .fold(1.0f64, f64::min)
        });
        (lo * 10.0).floor() / 10.0
    });
    let names = Memo::new(move |_| {
        board
            .frame
            .with(|f| f.as_ref().map(|f| f.plans.clone()).unwrap_or_default())
    });
    let hover = Hover::new();
    let readout = hover.readout("point at a layer for its figures", move |x, _| {
        let ids = board
            .frame
            .with(|f| f.as_ref().map(|f| f.layer_ids.clone()))?;
        let i = nearest(x, ids.len())?;
        let figures = board.plans.with(|ps| {
            ps.iter()
                .filter_map(|p| Some(format!("{} {:.4}", label(&p.name), p.per_layer.get(i)?)))
                .collect::<Vec<_>>()
                .join(" · ")
        });
        Some(format!("layer {}: {figures}", ids.get(i)?))
    });
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label="balancedness per layer"
            on:mousemove=move |ev| hover.track(&ev) on:mouseleave=move |_| hover.leave()>
            {move || y_axis(lo.get(), 1.0, 4)}
            {move || names.get().into_iter().map(|name| {
                let plan = board.plan(&name);
                let pts = move || {
                    let lo = lo.get();
                    plan.with(|p| p.as_ref().map(|p| {
                        let n = p.per_layer.len() as f64;
                        points(p.per_layer.iter().enumerate().map(|(i, &b)| (x_of(i as f64, n), y_of(b, lo, 1.0))))
                    }).unwrap_or_default())
                };
                view! { <polyline points=pts fill="none" stroke=colour(&name) stroke-width="1.6"><title>{label(&name)}</title></polyline> }
            }).collect_view()}
            {frame_layer_ticks(board)}
        </svg>
        {readout}
    }
}
