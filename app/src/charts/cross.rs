//! Plans across workloads (`moeplan cross` in the page): every plan made on
//! each loaded trace, and on all of them at once, judged on every trace. A
//! table rather than a chart: a reader compares numbers along a column
//! (which plan serves this trace best) and along a row (how a plan holds up
//! away from its own data), so each cell shows its balancedness, shaded from
//! the column's worst (white) to its best (green), in-sample cells marked.
//! Under the table, how much of each planner's in-sample gain over BASE
//! survives on the other traces ([`kept_gain`]) — the figure
//! docs/results-eplb-craft.md reports for the real DeepSeek-V3 dumps
//! ("Plans across workloads").

use leptos::prelude::*;

use crate::board::Board;
use moeplan_view::page::{CrossLine, CrossTable};

/// Background of a cell: its balancedness placed between the column's
/// lowest and highest.
fn shade(x: f64, lo: f64, hi: f64) -> String {
    let t = if hi - lo > 1e-12 {
        ((x - lo) / (hi - lo)).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let g = |full: f64| (255.0 - t * (255.0 - full)).round() as u8;
    format!("background: rgb({},{},{})", g(150.0), g(215.0), g(160.0))
}

/// The column's range, over every plan.
fn column_range(rows: &[CrossLine], j: usize) -> (f64, f64) {
    rows.iter()
        .filter_map(|r| r.balancedness.get(j).copied())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        })
}

/// For `planner`'s plans made on one trace: the mean share of their
/// in-sample gain over BASE that survives on the other traces — `(plan −
/// BASE) / (plan on its own trace − BASE on it)`, BASE made on the same
/// trace as the plan and judged where it is ("gain kept" in
/// docs/results-eplb-craft.md). `None` when the table has no such pair or
/// the own gain is nil.
///
/// ```
/// use moeplan_app::charts::cross::kept_gain;
/// use moeplan_view::page::{CrossLine, CrossTable};
/// let line = |planner: &str, on: usize, b: [f64; 2]| CrossLine {
///     name: planner.into(), planner: planner.into(), made_on: Some(on), replicas: 0,
///     balancedness: b.to_vec(), in_sample: vec![on == 0, on == 1],
/// };
/// let t = CrossTable {
///     traces: vec!["a".into(), "b".into()], batches: vec![1, 1], cluster: "1 × 8".into(),
///     rows: vec![
///         line("base", 0, [0.5, 0.5]), line("base", 1, [0.4, 0.5]),
///         line("eplb", 0, [0.9, 0.6]), line("eplb", 1, [0.7, 0.9]),
///     ],
/// };
/// // a's plan keeps (0.6 − 0.5) / (0.9 − 0.5) on b, b's (0.7 − 0.4) / (0.9 − 0.5) on a
/// assert!((kept_gain(&t, "eplb").unwrap() - 0.5).abs() < 1e-12);
/// ```
pub fn kept_gain(t: &CrossTable, planner: &str) -> Option<f64> {
    let base = |i: usize| {
        t.rows
            .iter()
            .find(|r| r.planner == "base" && r.made_on == Some(i))
    };
    let mut shares = Vec::new();
    for r in t.rows.iter().filter(|r| r.planner == planner) {
        let Some(i) = r.made_on else { continue };
        let Some(b) = base(i) else { continue };
        let (Some(own), Some(own_base)) = (r.balancedness.get(i), b.balancedness.get(i)) else {
            continue;
        };
        let gain = own - own_base;
        if gain <= 1e-9 {
            continue;
        }
        for (j, (x, y)) in r.balancedness.iter().zip(&b.balancedness).enumerate() {
            if j != i {
                shares.push((x - y) / gain);
            }
        }
    }
    (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64)
}

/// The matrix, shown once two or more traces are loaded for it.
#[component]
pub fn CrossMatrix(board: Board) -> impl IntoView {
    move || {
        board.cross.with(|t| {
            t.as_ref().map(|t| {
                let columns: Vec<(f64, f64)> =
                    (0..t.traces.len()).map(|j| column_range(&t.rows, j)).collect();
                let head = t
                    .traces
                    .iter()
                    .enumerate()
                    .map(|(j, n)| {
                        view! { <th title=n.clone()>{format!("T{}", j + 1)}</th> }
                    })
                    .collect_view();
                let legend = t
                    .traces
                    .iter()
                    .zip(&t.batches)
                    .enumerate()
                    .map(|(j, (n, b))| view! { <li>{format!("T{}: {n} ({b} batches)", j + 1)}</li> })
                    .collect_view();
                let body = t
                    .rows
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let on = r.made_on.map_or("all".to_string(), |k| format!("T{}", k + 1));
                        let made_on_attr = on.clone();
                        let worst = r.balancedness.iter().copied().fold(f64::INFINITY, f64::min);
                        let cells = r
                            .balancedness
                            .iter()
                            .zip(&r.in_sample)
                            .zip(&columns)
                            .map(|((&b, &own), &(lo, hi))| {
                                view! {
                                    <td class="num" style=shade(b, lo, hi)
                                        title=if own { "in-sample: judged on data it was made on" } else { "judged on a trace it was not made on" }>
                                        {format!("{b:.4}{}", if own { "*" } else { "" })}
                                    </td>
                                }
                            })
                            .collect_view();
                        view! {
                            <tr id=format!("cross-row-{i}") data-planner=r.planner.clone() data-made-on=made_on_attr>
                                <td>{r.name.clone()}</td>
                                <td>{on}</td>
                                <td class="num">{r.replicas}</td>
                                {cells}
                                <td class="num worst">{format!("{worst:.4}")}</td>
                            </tr>
                        }
                    })
                    .collect_view();
                let kept = ["eplb", "craft"]
                    .iter()
                    .filter_map(|p| {
                        kept_gain(t, p).map(|k| {
                            format!(
                                "{} keeps {:.0} % of its gain over BASE on the traces it was not made on",
                                crate::charts::label(p),
                                100.0 * k
                            )
                        })
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                view! {
                    <figure class="wide" id="cross-figure">
                        <figcaption id="cross-caption">{format!(
                            "Plans across workloads on {}: balancedness (even split), rows made on, columns judged on; * in-sample; shade: the column's worst (white) to best (green); CRAFT at the budget when the files were loaded or the cluster last changed",
                            t.cluster)}</figcaption>
                        <table id="cross-matrix" class="cross">
                            <thead><tr><th>"plan"</th><th>"made on"</th><th>"replicas"</th>{head}<th>"worst"</th></tr></thead>
                            <tbody>{body}</tbody>
                        </table>
                        <ul class="cross-traces">{legend}</ul>
                        <p class="hint" id="cross-kept">{kept}</p>
                    </figure>
                }
            })
        })
    }
}
