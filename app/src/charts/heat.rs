//! CRAFT's GPU × layer load, relative to each layer's mean: cells grouped
//! into colour buckets, each bucket one SVG path (runs of equal cells along
//! a GPU's row are one rectangle). The paths are always there, one per
//! bucket: an answer only sets the `d` of the buckets that changed.

use leptos::prelude::*;

use super::{H, Hover, PAD_B, PAD_L, PAD_R, PAD_T, W, column, frame_layer_ticks, push_uint};
use crate::board::Board;
use moeplan_view::page::Heat;

/// Colour buckets each side of the mean.
const HEAT_STEPS: i32 = 10;

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

/// Bucket of a relative load: −10 (≤ 60 % of the mean) … 0 … +10 (≥ 140 %).
fn heat_bucket(x: f64) -> i32 {
    (((x - 1.0) / 0.4).clamp(-1.0, 1.0) * HEAT_STEPS as f64).round() as i32
}

fn bucket_colour(b: i32) -> String {
    heat_colour(1.0 + 0.4 * b as f64 / HEAT_STEPS as f64)
}

/// One path per bucket (`−HEAT_STEPS..=HEAT_STEPS`), empty where no cell
/// falls in it, in cell units (x: layer, y: GPU; the chart scales them), so
/// every coordinate is a small whole number.
fn bucket_paths(h: &Heat) -> Vec<String> {
    let mut paths = vec![String::new(); (2 * HEAT_STEPS + 1) as usize];
    for g in 0..h.gpus {
        let mut l = 0;
        while l < h.layers {
            let b = heat_bucket(h.get(l, g).unwrap_or(1.0));
            let start = l;
            while l < h.layers && heat_bucket(h.get(l, g).unwrap_or(1.0)) == b {
                l += 1;
            }
            let d = &mut paths[(b + HEAT_STEPS) as usize];
            d.push('M');
            push_uint(d, start as u64);
            d.push(' ');
            push_uint(d, g as u64);
            d.push('h');
            push_uint(d, (l - start) as u64);
            d.push_str("v1h-");
            push_uint(d, (l - start) as u64);
            d.push('z');
        }
    }
    paths
}

/// The chart.
#[component]
pub fn HeatMap(board: Board) -> impl IntoView {
    let paths = Memo::new(move |_| board.heat.with(bucket_paths));
    let gpus = Memo::new(move |_| board.heat.with(|h| h.gpus));
    // Cell units to the plot's pixels.
    let cells = Memo::new(move |_| {
        let (layers, gpus) = board.heat.with(|h| (h.layers.max(1), h.gpus.max(1)));
        format!(
            "translate({PAD_L} {PAD_T}) scale({} {})",
            (W - PAD_L - PAD_R) / layers as f64,
            (H - PAD_T - PAD_B) / gpus as f64
        )
    });
    let hover = Hover::new();
    let readout = hover.readout("point at a cell for its load", move |x, y| {
        let ids = board
            .frame
            .with(|f| f.as_ref().map(|f| f.layer_ids.clone()))?;
        board.heat.with(|h| {
            let l = column(x, h.layers)?;
            let t = (y - PAD_T) / (H - PAD_T - PAD_B);
            if !(0.0..1.0).contains(&t) {
                return None;
            }
            let g = ((t * h.gpus as f64) as usize).min(h.gpus.checked_sub(1)?);
            Some(format!(
                "layer {}, GPU {g}: {:.2} × the layer's mean load",
                ids.get(l)?,
                h.get(l, g)?
            ))
        })
    });
    let buckets = (-HEAT_STEPS..=HEAT_STEPS)
        .map(|b| {
            let d = Memo::new(move |_| paths.with(|p| p[(b + HEAT_STEPS) as usize].clone()));
            view! { <path d=move || d.get() fill=bucket_colour(b)/> }
        })
        .collect_view();
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart heat" role="img" aria-label="GPU by layer load"
            on:mousemove=move |ev| hover.track(&ev) on:mouseleave=move |_| hover.leave()>
            // Crisp edges: no hairline seams between neighbouring cells.
            <g transform=move || cells.get() shape-rendering="crispEdges">{buckets}</g>
            <text x=format!("{}", PAD_L - 4.0) y=format!("{}", PAD_T + 8.0) class="tick" text-anchor="end">"GPU 0"</text>
            <text x=format!("{}", PAD_L - 4.0) y=format!("{}", H - PAD_B) class="tick" text-anchor="end">{move || gpus.get().saturating_sub(1).to_string()}</text>
            {frame_layer_ticks(board)}
        </svg>
        {readout}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_a_bucket_are_one_rectangle() {
        let h = Heat::from_rows(&[vec![1.0, 2.0], vec![1.0, 0.5], vec![1.01, 2.0]]).unwrap();
        let p = bucket_paths(&h);
        // GPU 0: three layers at the mean, one run.
        assert_eq!(p[HEAT_STEPS as usize].matches('M').count(), 1);
        // GPU 1: above, below, above: three cells.
        assert_eq!(p[(2 * HEAT_STEPS) as usize].matches('M').count(), 2);
        assert_eq!(p[0].matches('M').count(), 1);
        assert_eq!(p.iter().map(|d| d.matches('M').count()).sum::<usize>(), 4);
    }
}
