//! The figures beside the controls: the summary table, the notes and the
//! scope line. Each row and cell reads its own plan's memo, so a budget
//! change rewrites CRAFT's row and leaves BASE's and EPLB's alone. (The
//! charts are in [`crate::charts`].)

use leptos::prelude::*;

use crate::board::Board;
use crate::charts;
use crate::settings::Settings;

/// BASE, EPLB and CRAFT side by side.
#[component]
pub fn Summary(board: Board, settings: RwSignal<Settings>) -> impl IntoView {
    let names = Memo::new(move |_| {
        board
            .frame
            .with(|f| f.as_ref().map(|f| f.plans.clone()).unwrap_or_default())
    });
    let expert_bytes = Memo::new(move |_| settings.with(Settings::expert_bytes));
    view! {
        <table class="summary" id="summary">
            <thead><tr><th>"plan"</th><th>"balancedness"</th><th>"imbalance"</th><th>"replicas"</th><th>"replica memory / GPU"</th><th>"bound"</th></tr></thead>
            <tbody>
                {move || names.get().into_iter().map(|name| row(board, name, expert_bytes)).collect_view()}
            </tbody>
        </table>
    }
}

fn row(board: Board, name: String, expert_bytes: Memo<u64>) -> impl IntoView {
    let plan = board.plan(&name);
    let fmt = move |f: fn(&crate::protocol::Figures) -> f64| {
        move || {
            plan.with(|p| {
                p.as_ref()
                    .map(|p| format!("{:.4}", f(p)))
                    .unwrap_or_default()
            })
        }
    };
    let title = {
        let name = name.clone();
        move || match name.as_str() {
            "craft" => format!("CRAFT R = {}", board.replicas_per_gpu.get()),
            "eplb" => "EPLB (1 per GPU per layer)".to_string(),
            _ => "BASE (no replicas)".to_string(),
        }
    };
    let replicas = move || {
        plan.with(|p| {
            p.as_ref()
                .map(|p| p.replicas.to_string())
                .unwrap_or_default()
        })
    };
    let gib = move || {
        let slots = plan.with(|p| p.as_ref().map_or(0, |p| p.replica_slots_per_gpu));
        format!(
            "{:.2}",
            slots as f64 * expert_bytes.get() as f64 / (1u64 << 30) as f64
        )
    };
    view! {
        <tr id=format!("row-{name}")>
            <td><span class="swatch" style=format!("background:{}", charts::colour(&name))></span>{title}</td>
            <td class="num" id=format!("bal-{name}")>{fmt(|p| p.balancedness)}</td>
            <td class="num">{fmt(|p| p.imbalance_ratio)}</td>
            <td class="num" id=format!("replicas-{name}")>{replicas}</td>
            <td class="num">{gib}" GiB"</td>
            <td class="num">{fmt(|p| p.bound)}</td>
        </tr>
    }
}

/// Why a planner is missing, and what the figures cover.
#[component]
pub fn Scope(board: Board) -> impl IntoView {
    move || {
        board.frame.with(|f| {
            f.as_ref().map(|f| {
                view! {
                    {f.notes.iter().map(|n| view! { <p class="note">{n.clone()}</p> }).collect_view()}
                    <p class="scope">{format!("{} · in-sample over {} batch(es) · automatic R = {}", f.topology, f.batches, f.auto_replicas_per_gpu)}</p>
                }
            })
        })
    }
}
