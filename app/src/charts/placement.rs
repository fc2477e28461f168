//! One layer under CRAFT: a column per GPU, a box per hosted expert sized by
//! the share of the layer's tokens it receives; replicated experts in the
//! CRAFT colour. Two paths (replicated boxes, the others), whatever the
//! number of experts.

use leptos::prelude::*;

use super::{H, Hover, PAD_B, PAD_L, PAD_R, PAD_T, W, colour, column, num1, push_rect};
use crate::board::Board;
use moeplan_view::page::PlacedLayer;

/// Each GPU's load (the shares it receives) and the largest.
fn loads(p: &PlacedLayer) -> (Vec<f64>, f64) {
    let loads: Vec<f64> = p
        .gpus
        .iter()
        .map(|g| g.iter().map(|s| s.share).sum())
        .collect();
    let max = loads.iter().copied().fold(0.0, f64::max).max(1e-12);
    (loads, max)
}

/// The boxes' paths: (replicated experts, the others).
fn boxes(p: &PlacedLayer) -> (String, String) {
    let (_, max) = loads(p);
    let cw = (W - PAD_L - PAD_R) / p.gpus.len().max(1) as f64;
    let (mut replicated, mut single) = (String::new(), String::new());
    for (g, slots) in p.gpus.iter().enumerate() {
        let mut y = H - PAD_B;
        for s in slots {
            let h = ((H - PAD_T - PAD_B) * s.share / max).max(0.0);
            y -= h;
            let d = if s.copies > 1 {
                &mut replicated
            } else {
                &mut single
            };
            push_rect(d, PAD_L + g as f64 * cw + 0.5, y, (cw - 1.0).max(0.5), h);
        }
    }
    (replicated, single)
}

/// The box under the pointer: its GPU, expert, copies and share.
fn under(p: &PlacedLayer, x: f64, y: f64) -> Option<String> {
    let g = column(x, p.gpus.len())?;
    let (_, max) = loads(p);
    let mut top = H - PAD_B;
    for s in &p.gpus[g] {
        let h = (H - PAD_T - PAD_B) * s.share / max;
        if y >= top - h && y <= top {
            let copies = if s.copies > 1 {
                format!(" (1 of {} copies)", s.copies)
            } else {
                String::new()
            };
            return Some(format!(
                "GPU {g}: expert {}{copies} — {:.2} % of the layer's tokens",
                s.expert,
                s.share * 100.0
            ));
        }
        top -= h;
    }
    Some(format!("GPU {g}"))
}

/// The chart.
#[component]
pub fn PlacementChart(board: Board) -> impl IntoView {
    let paths = Memo::new(move |_| board.placement.with(boxes));
    let replicated = Memo::new(move |_| paths.with(|p| p.0.clone()));
    let single = Memo::new(move |_| paths.with(|p| p.1.clone()));
    let focus = board.focus();
    let mean_y = Memo::new(move |_| {
        board.placement.with(|p| {
            let (_, max) = loads(p);
            let mean = 1.0 / p.gpus.len().max(1) as f64;
            num1(H - PAD_B - (H - PAD_T - PAD_B) * mean / max)
        })
    });
    let gpus = Memo::new(move |_| board.placement.with(|p| p.gpus.len()));
    let hover = Hover::new();
    let readout = hover.readout("point at a box for its expert", move |x, y| {
        board.placement.with(|p| under(p, x, y))
    });
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label="experts on each GPU"
            on:mousemove=move |ev| hover.track(&ev) on:mouseleave=move |_| hover.leave()>
            <path d=move || single.get() fill="#c9d6e3" class="slot"/>
            <path d=move || replicated.get() fill=move || focus.with(|f| colour(f)) class="slot"/>
            <line x1=format!("{PAD_L}") x2=format!("{}", W - PAD_R) y1=move || mean_y.get() y2=move || mean_y.get() class="mean"/>
            <text x=format!("{}", W / 2.0) y=format!("{}", H - 8.0) class="axis" text-anchor="middle">
                {move || format!("GPUs 0–{} · line: mean GPU load · dark boxes: replicated experts", gpus.get().saturating_sub(1))}
            </text>
        </svg>
        {readout}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moeplan_view::page::Slot;

    fn slot(expert: u32, copies: u32, share: f64) -> Slot {
        Slot {
            expert,
            copies,
            share,
        }
    }

    #[test]
    fn boxes_and_what_is_under_the_pointer() {
        let p = PlacedLayer {
            layer: 3,
            gpus: vec![
                vec![slot(0, 2, 0.25), slot(1, 1, 0.25)],
                vec![slot(0, 2, 0.25), slot(2, 1, 0.25)],
            ],
        };
        let (replicated, single) = boxes(&p);
        assert_eq!(
            (replicated.matches('M').count(), single.matches('M').count()),
            (2, 2)
        );
        // GPU 1's bottom box is expert 0's second copy.
        let x = PAD_L + 0.75 * (W - PAD_L - PAD_R);
        let said = under(&p, x, H - PAD_B - 1.0).unwrap();
        assert!(
            said.starts_with("GPU 1: expert 0 (1 of 2 copies)"),
            "{said}"
        );
        let said = under(&p, x, PAD_T + 1.0).unwrap();
        assert!(said.starts_with("GPU 1: expert 2 —"), "{said}");
        assert_eq!(under(&p, 0.0, 0.0), None);
    }
}
