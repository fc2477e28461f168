//! GRACE's views of the chosen layer, drawn when the trace has token
//! routes (counts carry no affinity): its `(S(r), U(r))` curve (Eq. 1) with
//! the chosen `r` marked, and its affinity matrix with the experts in group
//! order — each GPU's group a block on the diagonal, the boundaries drawn.
//! The matrix is one SVG path per shade (runs of equal cells along a row
//! are one rectangle), as the load map is; both change with the layer, the
//! trace and the cluster only, never with the budget.

use leptos::prelude::*;

use super::{H, Hover, PAD_B, PAD_L, PAD_R, W, colour, num1, points, push_uint};
use crate::board::Board;
use moeplan_view::page::Grouping;

/// Shades of affinity, white (none) excluded.
const SHADES: usize = 8;

/// The affinity map's square, centred in the charts' `W` × `H` box.
const PLOT: f64 = H - 16.0;
const M_L: f64 = (W - PLOT) / 2.0;
const M_T: f64 = 8.0;

/// The shade of an affinity relative to the layer's largest: 0 (none) …
/// [`SHADES`]. The square root spreads the many small affinities, which a
/// linear scale would leave all but white.
fn shade(x: f64) -> usize {
    if x <= 0.0 || !x.is_finite() {
        return 0;
    }
    ((x.min(1.0).sqrt() * SHADES as f64).ceil() as usize).clamp(1, SHADES)
}

fn shade_colour(s: usize) -> String {
    // From a pale to GRACE's full colour (#009e73).
    let t = s as f64 / SHADES as f64;
    let mix = |full: f64| (255.0 - (255.0 - full) * t).round() as u8;
    format!("rgb({},{},{})", mix(0.0), mix(158.0), mix(115.0))
}

/// One path per shade `1..=SHADES` (index `s − 1`), in cell units.
fn shade_paths(g: &Grouping) -> Vec<String> {
    let n = g.order.len();
    let mut paths = vec![String::new(); SHADES];
    for i in 0..n {
        let row = g.affinity.get(i * n..(i + 1) * n).unwrap_or(&[]);
        let mut j = 0;
        while j < row.len() {
            let s = shade(row[j]);
            let start = j;
            while j < row.len() && shade(row[j]) == s {
                j += 1;
            }
            if let Some(d) = s.checked_sub(1).and_then(|k| paths.get_mut(k)) {
                d.push('M');
                push_uint(d, start as u64);
                d.push(' ');
                push_uint(d, i as u64);
                d.push('h');
                push_uint(d, (j - start) as u64);
                d.push_str("v1h-");
                push_uint(d, (j - start) as u64);
                d.push('z');
            }
        }
    }
    paths
}

/// The group boundaries, in cell units: a line across and down at each.
fn boundaries(g: &Grouping) -> String {
    let n = g.order.len() as u64;
    let mut d = String::new();
    let mut at = 0u64;
    for &size in g.sizes.iter().take(g.sizes.len().saturating_sub(1)) {
        at += size as u64;
        d.push('M');
        push_uint(&mut d, at);
        d.push_str(" 0V");
        push_uint(&mut d, n);
        d.push_str("M0 ");
        push_uint(&mut d, at);
        d.push('H');
        push_uint(&mut d, n);
    }
    d
}

/// The GPU whose group holds position `i` of the order.
fn group_of(sizes: &[usize], i: usize) -> Option<usize> {
    let mut end = 0;
    sizes.iter().position(|&s| {
        end += s;
        i < end
    })
}

/// GRACE's `(S, U)` curve of the chosen layer: size deviation across,
/// affinity utilisation up, the chosen `r` marked.
#[component]
pub fn GraceCurve(board: Board) -> impl IntoView {
    let g = board.grouping;
    // Both axes from 0 to the curve's largest value (S) or 1 (U).
    let s_max = Memo::new(move |_| {
        g.with(|g| {
            g.as_ref()
                .map_or(1.0, |g| g.curve.iter().map(|p| p.1).fold(0.0, f64::max))
                .max(1e-9)
        })
    });
    // U up to the next tenth above the curve's largest: the curve is
    // rarely near 1, and a full scale would flatten it.
    let u_max = Memo::new(move |_| {
        g.with(|g| {
            let top = g
                .as_ref()
                .map_or(1.0, |g| g.curve.iter().map(|p| p.2).fold(0.0, f64::max));
            ((top * 10.0).ceil() / 10.0).clamp(0.1, 1.0)
        })
    });
    let to_xy = move |s: f64, u: f64, s_max: f64| {
        (
            PAD_L + (W - PAD_L - PAD_R) * (s / s_max),
            super::y_of(u, 0.0, u_max.get_untracked()),
        )
    };
    let line = Memo::new(move |_| {
        let m = s_max.get();
        u_max.track();
        g.with(|g| {
            points(
                g.as_ref()
                    .map_or(&[][..], |g| &g.curve[..])
                    .iter()
                    .map(|p| to_xy(p.1, p.2, m)),
            )
        })
    });
    let marker = Memo::new(move |_| {
        let m = s_max.get();
        u_max.track();
        g.with(|g| {
            let g = g.as_ref()?;
            let r = g.ratio?;
            let p = g.curve.iter().find(|p| p.0 == r)?;
            let (x, y) = to_xy(p.1, p.2, m);
            Some(format!("translate({} {})", num1(x), num1(y)))
        })
        .unwrap_or_default()
    });
    let hover = Hover::new();
    let readout = hover.readout("point at the curve for each r", move |x, _| {
        let m = s_max.get_untracked();
        g.with(|g| {
            let g = g.as_ref()?;
            // The point nearest the pointer across (S grows with r).
            let p = g.curve.iter().min_by(|a, b| {
                let (ax, _) = to_xy(a.1, a.2, m);
                let (bx, _) = to_xy(b.1, b.2, m);
                (ax - x).abs().total_cmp(&(bx - x).abs())
            })?;
            let chosen = if g.ratio == Some(p.0) {
                " (chosen)"
            } else {
                ""
            };
            Some(format!("r = {}: S {:.2}, U {:.3}{chosen}", p.0, p.1, p.2))
        })
    });
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart" role="img" aria-label="GRACE size deviation against affinity utilisation"
            on:mousemove=move |ev| hover.track(&ev) on:mouseleave=move |_| hover.leave()>
            {move || super::y_axis(0.0, u_max.get(), 4)}
            <text x=format!("{}", W - PAD_R) y=format!("{}", H - PAD_B + 16.0) class="tick" text-anchor="end">
                {move || format!("S (group size deviation) → {:.2}", s_max.get())}</text>
            <text x=format!("{PAD_L}") y=format!("{}", H - PAD_B + 16.0) class="tick">"0"</text>
            <polyline points=move || line.get() fill="none" stroke=colour("grace") stroke-width="2"/>
            <g id="grace-chosen" transform=move || marker.get()
                visibility=move || if marker.with(String::is_empty) { "hidden" } else { "visible" }>
                <circle r="5" fill="none" stroke="#000" stroke-width="2"/>
            </g>
        </svg>
        {readout}
    }
}

/// The chosen layer's affinity matrix, experts in group order.
#[component]
pub fn AffinityMap(board: Board) -> impl IntoView {
    let g = board.grouping;
    let paths = Memo::new(move |_| g.with(|g| g.as_ref().map(shade_paths).unwrap_or_default()));
    let lines = Memo::new(move |_| g.with(|g| g.as_ref().map(boundaries).unwrap_or_default()));
    let cells = Memo::new(move |_| {
        let n = g.with(|g| g.as_ref().map_or(1, |g| g.order.len().max(1)));
        format!("translate({M_L} {M_T}) scale({})", PLOT / n as f64)
    });
    let hover = Hover::new();
    let readout = hover.readout("point at a cell for its affinity", move |x, y| {
        g.with(|g| {
            let g = g.as_ref()?;
            let n = g.order.len();
            let (tx, ty) = ((x - M_L) / PLOT, (y - M_T) / PLOT);
            if !(0.0..1.0).contains(&tx) || !(0.0..1.0).contains(&ty) || n == 0 {
                return None;
            }
            let (i, j) = ((ty * n as f64) as usize, (tx * n as f64) as usize);
            Some(format!(
                "expert {} (GPU {}) with expert {} (GPU {}): {:.3} of the layer's largest affinity",
                g.order.get(i)?,
                group_of(&g.sizes, i)?,
                g.order.get(j)?,
                group_of(&g.sizes, j)?,
                g.affinity.get(i * n + j)?
            ))
        })
    });
    let shades = (1..=SHADES)
        .map(|s| {
            let d = Memo::new(move |_| paths.with(|p| p.get(s - 1).cloned().unwrap_or_default()));
            view! { <path d=move || d.get() fill=shade_colour(s)/> }
        })
        .collect_view();
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="chart affinity" role="img" aria-label="GRACE affinity matrix"
            on:mousemove=move |ev| hover.track(&ev) on:mouseleave=move |_| hover.leave()>
            <g transform=move || cells.get() shape-rendering="crispEdges">
                {shades}
                // Half a pixel of the chart's box, whatever the expert count.
                <path class="group-bounds" d=move || lines.get() fill="none" stroke="#333" stroke-opacity="0.7" stroke-width=move || {
                    let n = g.with(|g| g.as_ref().map_or(1, |g| g.order.len().max(1)));
                    format!("{:.3}", 0.5 * n as f64 / PLOT)
                }/>
            </g>
        </svg>
        {readout}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_groups() -> Grouping {
        Grouping {
            layer: 1,
            ratio: Some(0.2),
            curve: vec![(0.0, 0.0, 0.5), (0.2, 1.0, 0.8)],
            order: vec![2, 0, 1],
            sizes: vec![2, 1],
            affinity: vec![0.0, 1.0, 0.0, 1.0, 0.0, 0.25, 0.0, 0.25, 0.0],
        }
    }

    #[test]
    fn shades_are_runs_and_boundaries_fall_between_groups() {
        let g = two_groups();
        let p = shade_paths(&g);
        // 1.0 twice (full), 0.25 twice (half on the square-root scale).
        assert_eq!(p[SHADES - 1].matches('M').count(), 2);
        assert_eq!(p[SHADES / 2 - 1].matches('M').count(), 2);
        assert_eq!(p.iter().map(|d| d.matches('M').count()).sum::<usize>(), 4);
        assert_eq!(boundaries(&g), "M2 0V3M0 2H3");
        assert_eq!(
            (
                group_of(&g.sizes, 1),
                group_of(&g.sizes, 2),
                group_of(&g.sizes, 3)
            ),
            (Some(0), Some(1), None)
        );
    }

    #[test]
    fn no_affinity_is_white() {
        assert_eq!(
            (shade(0.0), shade(f64::NAN), shade(1e-9), shade(2.0)),
            (0, 0, 1, SHADES)
        );
    }
}
