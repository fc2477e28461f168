//! Every plan's imbalance ratio batch by batch (one polyline per plan), and
//! below it the expert bytes each per-batch plan (Libra) copies in each
//! batch as bars (one path per such plan). Static plans copy nothing while
//! serving, so they have no bars.

use leptos::prelude::*;

use super::{
    H, Hover, PAD_B, PAD_L, PAD_R, W, colour, label, nearest, points, push_rect, x_of, y_axis, y_of,
};
use crate::board::Board;

/// Height of the bytes strip under the ratios.
const STRIP: f64 = 90.0;

/// The chart.
#[component]
pub fn TimelineChart(board: Board) -> impl IntoView {
    // The scale: 1 to the highest batch of any plan.
    let hi = Memo::new(move |_| {
        let hi = board.plans.with(|ps| {
            ps.iter()
                .flat_map(|p| p.per_batch_imbalance.iter().copied())
                .fold(1.0f64, f64::max)
        });
        ((hi * 10.0).ceil() / 10.0).max(1.1)
    });
    let names = Memo::new(move |_| {
        board
            .frame
            .with(|f| f.as_ref().map(|f| f.plans.clone()).unwrap_or_default())
    });
    let batches = Memo::new(move |_| board.frame.with(|f| f.as_ref().map_or(0, |f| f.batches)));
    let top_bytes = Memo::new(move |_| {
        board.plans.with(|ps| {
            ps.iter()
                .flat_map(|p| p.per_batch_bytes.iter().copied())
                .fold(0.0f64, f64::max)
        })
    });
    let hover = Hover::new();
    let readout = hover.readout("point at a batch for its figures", move |x, _| {
        let i = nearest(x, batches.get_untracked())?;
        let figures = board.plans.with(|ps| {
            ps.iter()
                .filter_map(|p| {
                    let ir = p.per_batch_imbalance.get(i)?;
                    Some(match p.per_batch_bytes.get(i) {
                        Some(b) => format!("{} {ir:.3} ({:.2} GB copied)", label(&p.name), b / 1e9),
                        None => format!("{} {ir:.3}", label(&p.name)),
                    })
                })
                .collect::<Vec<_>>()
                .join(" · ")
        });
        Some(format!("batch {i}: imbalance {figures}"))
    });
    let strip_top = H - PAD_B + 24.0;
    view! {
        <svg viewBox=format!("0 0 {W} {}", H + STRIP) class="chart" role="img" aria-label="imbalance ratio per batch" id="timeline"
            data-batches=move || batches.get().to_string()
            on:mousemove=move |ev| hover.track(&ev) on:mouseleave=move |_| hover.leave()>
            {move || y_axis_ratio(hi.get())}
            {move || names.get().into_iter().map(|name| {
                let plan = board.plan(&name);
                let series = move || plan.with(|p| p.as_ref().map(|p| p.per_batch_imbalance.clone()).unwrap_or_default());
                let pts = move || {
                    let hi = hi.get();
                    let s = series();
                    let n = s.len() as f64;
                    points(s.iter().enumerate().map(|(i, &r)| (x_of(i as f64, n), y_of(r, 1.0, hi))))
                };
                let count = move || series().len().to_string();
                view! {
                    <polyline class="timeline-series" data-plan=name.clone() data-points=count
                        points=pts fill="none" stroke=colour(&name) stroke-width="1.6">
                        <title>{label(&name)}</title>
                    </polyline>
                }
            }).collect_view()}
            <text x=format!("{PAD_L}") y=format!("{}", strip_top - 4.0) class="tick">
                {move || format!("expert bytes copied per batch (max {:.2} GB)", top_bytes.get() / 1e9)}
            </text>
            {move || names.get().into_iter().map(|name| {
                let plan = board.plan(&name);
                let d = move || {
                    let top = top_bytes.get();
                    plan.with(|p| {
                        let mut d = String::new();
                        let Some(p) = p else { return d };
                        let n = p.per_batch_bytes.len();
                        if n == 0 || top <= 0.0 {
                            return d;
                        }
                        let w = (W - PAD_L - PAD_R) / n as f64;
                        for (i, &b) in p.per_batch_bytes.iter().enumerate() {
                            let h = (STRIP - 30.0) * b / top;
                            push_rect(&mut d, PAD_L + i as f64 * w + 0.5, strip_top + (STRIP - 30.0) - h, (w - 1.0).max(0.5), h);
                        }
                        d
                    })
                };
                let bars = move || plan.with(|p| p.as_ref().map_or(0, |p| p.per_batch_bytes.len())).to_string();
                view! { <path class="timeline-bytes" data-plan=name.clone() data-bars=bars d=d fill=colour(&name) opacity="0.7"/> }
            }).collect_view()}
        </svg>
        {readout}
    }
}

/// Grid lines and labels from 1 to `hi`.
fn y_axis_ratio(hi: f64) -> impl IntoView + use<> {
    y_axis(1.0, hi, 4)
}
