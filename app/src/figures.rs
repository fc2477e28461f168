//! The figures beside the controls: the summary table, the notes and the
//! scope line. Each row and cell reads its own plan's memo, so a budget
//! change rewrites CRAFT's row and leaves BASE's and EPLB's alone. (The
//! charts are in [`crate::charts`].)

use leptos::prelude::*;

use crate::board::Board;
use crate::charts;

/// Every plan the workspace shows (BASE, EPLB, CRAFT, …) side by side.
#[component]
pub fn Summary(board: Board) -> impl IntoView {
    let names = Memo::new(move |_| {
        board
            .frame
            .with(|f| f.as_ref().map(|f| f.plans.clone()).unwrap_or_default())
    });
    // Replica memory in the judged model's experts (the frame says which).
    let expert_bytes = Memo::new(move |_| {
        board.frame.with(|f| {
            f.as_ref()
                .and_then(|f| moeplan::data::model::preset(&f.model).ok())
                .map_or(0, |p| p.expert_bytes())
        })
    });
    view! {
        <table class="summary" id="summary">
            <caption id="summary-caption">{move || format!("measured under dispatch rule: {}", board.rule.get())}</caption>
            <thead><tr><th>"plan"</th><th>"balancedness"</th><th>"imbalance"</th><th>"replicas"</th><th>"replica memory / GPU"</th><th>"bound"</th>
                <th class="priced">"step"</th><th class="priced">"tokens/s"</th><th class="priced">"× BASE"</th></tr></thead>
            <tbody>
                {move || names.get().into_iter().map(|name| row(board, name, expert_bytes)).collect_view()}
            </tbody>
        </table>
    }
}

fn row(board: Board, name: String, expert_bytes: Memo<u64>) -> impl IntoView {
    let plan = board.plan(&name);
    let fmt = move |f: fn(&moeplan_view::page::Figures) -> f64| {
        move || {
            plan.with(|p| {
                p.as_ref()
                    .map(|p| format!("{:.4}", f(p)))
                    .unwrap_or_default()
            })
        }
    };
    // The registry's title with the budget used (`CRAFT R = 8`, `EPLB +64`).
    let title = {
        let name = name.clone();
        move || {
            plan.with(|p| p.as_ref().map(|p| p.label.clone()))
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| charts::label(&name).to_string())
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
    // A per-batch plan (Libra) says how it serves; its copies change every
    // batch, so no bound is given for one replica count.
    let schedule = move || plan.with(|p| p.as_ref().and_then(|p| p.schedule.clone()));
    // The headline on a hardware: step time, throughput and speedup.
    let priced = move |f: fn(&moeplan_view::page::Predicted) -> String| {
        plan.with(|p| {
            p.as_ref()
                .and_then(|p| p.predicted.as_ref())
                .map_or("—".to_string(), f)
        })
    };
    // The rule this row is judged under, said on every row: its system's
    // own (GRACE's routing, Libra's rebalancer) or the one chosen.
    let rule = move || {
        let own = plan.with(|p| p.as_ref().map(|p| p.rule.clone()).unwrap_or_default());
        let chosen = board.rule.get();
        if own.is_empty() {
            String::new()
        } else if own == chosen {
            format!("under {own}")
        } else {
            format!("under {own}, its system's own")
        }
    };
    // Where its time goes against BASE (priced views only; BASE's own
    // would only say it is even with itself).
    let is_base = name == "base";
    let reason_id = format!("reason-{name}");
    let reason = move || {
        plan.with(|p| {
            p.as_ref()
                .and_then(|p| p.predicted.as_ref())
                .and_then(|p| p.reason.clone())
        })
    };
    let bound = move || {
        plan.with(|p| match p {
            Some(p) if p.schedule.is_some() => "—".to_string(),
            Some(p) => format!("{:.4}", p.bound),
            None => String::new(),
        })
    };
    view! {
        <tr id=format!("row-{name}") title=move || schedule().unwrap_or_default()>
            <td><span class="swatch" style=format!("background:{}", charts::colour(&name))></span>{title}
                {move || schedule().map(|s| view! { <br/><small class="schedule">{s}</small> })}
                <small class="row-rule" id=format!("rule-{name}")>{rule}</small>
                <small class="reason" id=reason_id>{move || reason().filter(|_| !is_base).unwrap_or_default()}</small></td>
            <td class="num" id=format!("bal-{name}")>{fmt(|p| p.balancedness)}</td>
            <td class="num" id=format!("ir-{name}")>{fmt(|p| p.imbalance_ratio)}</td>
            <td class="num" id=format!("replicas-{name}")>{replicas}</td>
            <td class="num">{gib}" GiB"</td>
            <td class="num">{bound}</td>
            <td class="num priced" id=format!("step-{name}")>{move || priced(|p| format!("{:.2} ms", p.step_ms))}</td>
            <td class="num priced" id=format!("tput-{name}")>{move || priced(|p| format!("{:.0}", p.tokens_per_s))}</td>
            <td class="num priced" id=format!("speedup-{name}")>{move || priced(|p| p.speedup.map_or("—".into(), |x| format!("{x:.3}×")))}</td>
        </tr>
    }
}

/// What the planners say beside their plans (GRACE grouping by load when
/// the trace has no token routes), why a planner is missing, and what the
/// figures cover.
#[component]
pub fn Scope(board: Board) -> impl IntoView {
    move || {
        board.frame.with(|f| {
            f.as_ref().map(|f| {
                view! {
                    {f.planner_notes.iter().map(|n| view! {
                        <p class="note planner-note" data-planner=n.name.clone()>
                            <span class="swatch" style=format!("background:{}", charts::colour(&n.name))></span>{n.text.clone()}
                        </p>
                    }).collect_view()}
                    {f.notes.iter().map(|n| view! { <p class="note">{n.clone()}</p> }).collect_view()}
                    <p class="scope">{format!("{} · in-sample over {} batch(es) · automatic R = {}", f.topology, f.batches, f.auto_replicas_per_gpu)}</p>
                }
            })
        })
    }
}

/// Where each plan's (token, expert) pairs are served under the rule:
/// on their source GPU, on another GPU of its node, on another node — one
/// stacked bar per plan, with the cross-node bytes.
#[component]
pub fn TrafficPanel(board: Board) -> impl IntoView {
    let names = Memo::new(move |_| {
        board
            .frame
            .with(|f| f.as_ref().map(|f| f.plans.clone()).unwrap_or_default())
    });
    view! {
        <figure class="traffic" id="traffic">
            <figcaption id="traffic-caption">{move || format!("Dispatch traffic (rule: {}): pairs served locally · within the node · across nodes", board.rule.get())}</figcaption>
            {move || names.get().into_iter().map(|name| traffic_row(board, name)).collect_view()}
        </figure>
    }
}

fn traffic_row(board: Board, name: String) -> impl IntoView {
    let plan = board.plan(&name);
    let share = move |i: usize| move || plan.with(|p| p.as_ref().map_or(0.0, |p| p.traffic[i]));
    let width = move |i: usize| move || format!("width:{:.2}%", share(i)() * 100.0);
    let label = charts::label(&name);
    view! {
        <div class="traffic-row" id=format!("traffic-{name}")
            data-rule=move || plan.with(|p| p.as_ref().map(|p| p.rule.clone()).unwrap_or_default())
            data-local=move || format!("{:.6}", share(0)())
            data-intra=move || format!("{:.6}", share(1)())
            data-cross=move || format!("{:.6}", share(2)())>
            <span class="traffic-name">{label}</span>
            <span class="traffic-bar">
                <span class="local" style=width(0)></span>
                <span class="intra" style=width(1)></span>
                <span class="cross" style=width(2)></span>
            </span>
            <span class="num">{move || plan.with(|p| p.as_ref().map(|p| format!(
                "{:.1} % · {:.1} % · {:.1} % · {:.2} GB cross-node",
                p.traffic[0] * 100.0, p.traffic[1] * 100.0, p.traffic[2] * 100.0, p.cross_node_gb)).unwrap_or_default())}</span>
        </div>
    }
}

/// On a hardware, each plan's step split into what it is spent on:
/// expert compute, dispatch and combine over the model's MoE layers, the
/// dense part and copies not hidden — one stacked bar per plan, scaled to
/// the slowest step, with its KV cache.
#[component]
pub fn CostPanel(board: Board) -> impl IntoView {
    let names = Memo::new(move |_| {
        board
            .frame
            .with(|f| f.as_ref().map(|f| f.plans.clone()).unwrap_or_default())
    });
    let priced = Memo::new(move |_| {
        board.plans.with(|ps| {
            ps.iter()
                .filter_map(|p| p.predicted.as_ref())
                .map(|p| (p.hardware.clone(), p.step_ms, p.error_band.clone()))
                .fold(None, |acc: Option<(String, f64, String)>, (h, ms, band)| {
                    Some((h, acc.map_or(ms, |(_, m, _)| m.max(ms)), band))
                })
        })
    });
    move || {
        priced.get().map(|(hardware, slowest, band)| {
            view! {
                <figure class="cost" id="cost" data-hardware=hardware.clone()>
                    <figcaption id="cost-caption">{format!(
                        "Predicted step on {hardware}: expert compute · dispatch · combine (all MoE layers) · dense part · copies not hidden")}</figcaption>
                    <p class="cost-band" id="cost-band">{band}</p>
                    {names.get().into_iter().map(|name| cost_row(board, name, slowest)).collect_view()}
                </figure>
            }
        })
    }
}

fn cost_row(board: Board, name: String, slowest: f64) -> impl IntoView {
    let plan = board.plan(&name);
    let p = move || plan.with(|p| p.as_ref().and_then(|p| p.predicted.clone()));
    // Per-step microseconds of each part.
    let parts = move || {
        p().map(|p| {
            let l = p.moe_layers as f64;
            [
                p.compute_us * l,
                p.dispatch_us * l,
                p.combine_us * l,
                p.dense_us,
                p.copy_exposed_us,
            ]
        })
        .unwrap_or_default()
    };
    let width = move |i: usize| {
        move || {
            let total = slowest * 1e3;
            let x = parts()[i];
            format!(
                "width:{:.2}%",
                if total > 0.0 { 100.0 * x / total } else { 0.0 }
            )
        }
    };
    let label = charts::label(&name);
    view! {
        <div class="cost-row" id=format!("cost-{name}")
            data-step-ms=move || p().map(|p| format!("{:.6}", p.step_ms)).unwrap_or_default()
            data-compute-us=move || format!("{:.6}", parts()[0])
            data-dispatch-us=move || format!("{:.6}", parts()[1])
            data-combine-us=move || format!("{:.6}", parts()[2])
            data-dense-us=move || format!("{:.6}", parts()[3])
            data-copies-us=move || format!("{:.6}", parts()[4])
            data-tokens-per-s=move || p().map(|p| format!("{:.3}", p.tokens_per_s)).unwrap_or_default()>
            <span class="cost-name">{label}</span>
            <span class="cost-bar">
                <span class="compute" style=width(0)></span>
                <span class="dispatch" style=width(1)></span>
                <span class="combine" style=width(2)></span>
                <span class="dense" style=width(3)></span>
                <span class="copies" style=width(4)></span>
            </span>
            <span class="num">{move || p().map(|p| format!(
                "{:.2} ms · {:.0} tokens/s{} · MoE layer {:.0} µs = {:.0} + {:.0} + {:.0} · KV {:.1} GiB/GPU",
                p.step_ms, p.tokens_per_s,
                p.speedup.map(|s| format!(" · {s:.3}× BASE")).unwrap_or_default(),
                p.moe_layer_us, p.compute_us, p.dispatch_us, p.combine_us, p.kv_cache_gib_per_gpu)).unwrap_or_default()}</span>
        </div>
    }
}
