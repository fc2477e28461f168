//! CRAFT's replicas in each layer as bars (one path), EPLB's uniform count
//! as a line.

use leptos::prelude::*;

use super::{
    H, Hover, PAD_B, PAD_L, PAD_R, W, colour, column, frame_layer_ticks, num1, push_rect, y_axis,
    y_of,
};
use crate::board::Board;

/// The chart.
#[component]
pub fn ReplicasChart(board: Board) -> impl IntoView {
    let craft = board.plan("craft");
    let eplb = board.plan("eplb");
    let max = Memo::new(move |_| {
        let top = |p: &Option<crate::protocol::Figures>| {
            p.as_ref()
                .and_then(|p| p.replicas_per_layer.iter().copied().max())
                .unwrap_or(0)
        };
        craft.with(top).max(eplb.with(top)).max(1) as f64
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
    let eplb_line = Memo::new(move |_| {
        let max = max.get();
        eplb.with(|p| {
            p.as_ref()
                .and_then(|p| p.replicas_per_layer.first())
                .map(|&r| (num1(y_of(r as f64, 0.0, max)), r))
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
        let e = eplb
            .with(|p| {
                p.as_ref()
                    .and_then(|p| p.replicas_per_layer.get(i).copied())
            })
            .map(|e| format!(" · EPLB {e}"))
            .unwrap_or_default();
        Some(format!("layer {}: CRAFT {c} replicas{e}", ids.get(i)?))
    });
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label="replicas per layer"
            on:mousemove=move |ev| hover.track(&ev) on:mouseleave=move |_| hover.leave()>
            {move || y_axis(0.0, max.get(), 4)}
            <path d=move || bars.get() fill=colour("craft")><title>"CRAFT"</title></path>
            {move || eplb_line.get().map(|(y, r)| view! {
                <line x1=format!("{PAD_L}") x2=format!("{}", W - PAD_R) y1=y.clone() y2=y stroke=colour("eplb") stroke-width="2"><title>{format!("EPLB: {r} per layer")}</title></line>
            })}
            {frame_layer_ticks(board)}
        </svg>
        {readout}
    }
}
