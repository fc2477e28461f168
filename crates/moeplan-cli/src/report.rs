//! Human-readable tables for the terminal, built as strings so the caller
//! decides how to write them (a closed pipe is not an error worth a panic).

use std::fmt::Write;

macro_rules! wl {
    ($o:expr) => {{ let _ = writeln!($o); }};
    ($o:expr, $($t:tt)*) => {{ let _ = writeln!($o, $($t)*); }};
}

use moeplan::data::model::ModelPreset;
use moeplan::planners::{PlannerInfo, Value};
use moeplan::studies::Sweep;
use moeplan::{Plan, Topology, TraceStats, data::model};

use crate::judge::Cost;
use crate::judged::Judged;

pub fn stats(s: &TraceStats) -> String {
    let mut o = String::new();
    wl!(
        o,
        "model {} · {} batch(es) · {} MoE layers of {} · {} experts · top-k {}",
        s.model.as_deref().unwrap_or("unknown"),
        s.batches,
        s.layers.len(),
        s.layers_total,
        s.experts,
        s.top_k.map_or("unknown".into(), |k| k.to_string()),
    );
    wl!(o, "total assignments {:.0}", s.total_tokens);
    let mm: Vec<f64> = s.layers.iter().map(|l| l.max_over_mean).collect();
    let mut sorted = mm.clone();
    sorted.sort_by(f64::total_cmp);
    if let (Some(lo), Some(hi)) = (sorted.first(), sorted.last()) {
        wl!(
            o,
            "hottest expert / mean, summed over batches: min {lo:.2} · median {:.2} · max {hi:.2}",
            sorted[sorted.len() / 2]
        );
    }
    wl!(o);
    wl!(
        o,
        "{:>6} {:>14} {:>9} {:>11} {:>9}  hottest experts (share)",
        "layer",
        "assignments",
        "max/mean",
        "batch m/m",
        "top-2"
    );
    for l in &s.layers {
        let hot: Vec<String> = l
            .hottest
            .iter()
            .map(|(e, share)| format!("{e} ({:.1}%)", share * 100.0))
            .collect();
        wl!(
            o,
            "{:>6} {:>14.0} {:>9.2} {:>11.2} {:>8.1}%  {}",
            l.layer,
            l.total,
            l.max_over_mean,
            l.batch_max_over_mean,
            l.top2_share * 100.0,
            hot.join(", ")
        );
    }
    o
}

pub fn eval(j: &Judged, algorithm: &str, plan: &Plan, scope: &str, cost: &Cost) -> String {
    let r = &j.report;
    let t = &j.replay.traffic;
    let mut o = String::new();
    wl!(o, "plan: {} on {} · {}", algorithm, plan.topology(), scope);
    wl!(
        o,
        "dispatch         {}   how a (token, expert) pair picks a copy; sources: {}",
        j.replay.rule,
        j.replay.sources
    );
    if let Some(p) = &j.replay.predictions {
        wl!(o, "predictions      from {p}");
    }
    wl!(
        o,
        "balancedness     {:.4}   mean GPU load / max, mean over batches then layers (1.0 is perfect)",
        r.balancedness
    );
    wl!(
        o,
        "imbalance ratio  {:.4}   max GPU load / mean",
        r.imbalance_ratio
    );
    wl!(
        o,
        "replicas         {}   over {} layers; on the fullest GPU {} (of its {} slots; per GPU {}..{})",
        r.replicas,
        r.layer_ids.len(),
        r.replica_slots_fullest_gpu,
        r.slots_per_gpu_max,
        r.slots_per_gpu_min,
        r.slots_per_gpu_max
    );
    match r.bound_counts {
        moeplan::BoundCounts::ReplicasPerLayer => wl!(
            o,
            "bound            {:.4}   no plan with these replica counts per layer does better{}",
            r.bound,
            r.packing_bound
                .map(|p| format!("; {p:.4} counting that slots are discrete"))
                .unwrap_or_default()
        ),
        moeplan::BoundCounts::CopiesPerBatch => wl!(
            o,
            "bound            {:.4}   no plan with the schedule's copies in each batch and layer does better (copies counted per batch)",
            r.bound
        ),
    }
    if r.same_gpu_duplicates > 0 {
        wl!(
            o,
            "same-GPU copies  {}   slots holding a second copy of an expert already on that GPU (memory spent, no balance gained)",
            r.same_gpu_duplicates
        );
    }
    wl!(
        o,
        "traffic          local {:.1}% · intra-node {:.1}% · cross-node {:.1}% of {:.0} (token, expert) pairs over all batches",
        j.local_pct(),
        pct(t.intra_node, t.pairs),
        j.cross_node_pct(),
        t.pairs
    );
    wl!(
        o,
        "cross-node bytes {:.3} GB over all batches at {}; busiest GPU receives {:.0} pairs per batch (summed over layers)",
        j.cross_node_gb(),
        cost.describe(),
        t.max_ingress
    );
    if let Some(m) = j.messages() {
        wl!(
            o,
            "messages/token   cross-node {:.3} · cross-GPU {:.3} per (token, layer), a token sent once per destination node / GPU; {:.3} GB cross-node",
            m.per_token_cross_node,
            m.per_token_cross_gpu,
            m.cross_node_bytes / 1e9
        );
    }
    if let Some(p) = &j.predicted {
        predicted(&mut o, p);
    }
    wl!(o);
    wl!(
        o,
        "{:>6} {:>13} {:>10} {:>9}",
        "layer",
        "balancedness",
        "imbalance",
        "replicas"
    );
    for i in 0..r.layer_ids.len() {
        wl!(
            o,
            "{:>6} {:>13.4} {:>10.4} {:>9}",
            r.layer_ids[i],
            r.per_layer[i],
            r.per_layer_imbalance_ratio[i],
            r.replicas_per_layer[i]
        );
    }
    o
}

/// The cost model's lines of `eval`.
fn predicted(o: &mut String, p: &moeplan::judge::cost::Prediction) {
    wl!(
        o,
        "predicted        {} · {}: step {:.3} ms, {:.0} tokens/s{}",
        p.hardware,
        p.model,
        p.step_ms,
        p.tokens_per_s,
        p.speedup
            .map(|s| format!(", {s:.3}× BASE"))
            .unwrap_or_default()
    );
    if let Some(reason) = &p.reason {
        wl!(o, "  against BASE   {reason}");
    }
    wl!(
        o,
        "  MoE layer      {:.1} µs = compute {:.1} + dispatch {:.1} + combine {:.1} (mean per layer and batch{}); dense part {:.1} µs per step; attention's KV reads {:.1} µs per step; copies not hidden {:.1} µs per step",
        p.moe_layer_us,
        p.compute_us,
        p.dispatch_us,
        p.combine_us,
        if p.assumptions.overlap == moeplan::judge::cost::Overlap::Tbo {
            ", two-batch overlap: less than their sum"
        } else {
            ""
        },
        p.dense_us,
        p.attention_us,
        p.copy_exposed_us
    );
    wl!(
        o,
        "  memory         weights {:.1} GiB on the fullest GPU, KV cache {:.1} GiB per GPU = {:.0} tokens in the cluster ({:.0} requests of {}); a step serves {:.0} of {:.0} tokens",
        p.weights_gib_per_gpu,
        p.kv_cache_gib_per_gpu,
        p.max_concurrent_tokens,
        p.max_concurrent_requests,
        p.assumptions.context_tokens,
        p.served_tokens_per_step,
        p.tokens_per_step
    );
    for n in &p.notes {
        wl!(o, "  assumed        {n}");
    }
    wl!(o, "  trust          {}", p.error_band.about);
}

pub fn compare(
    rows: &[(String, Result<Judged, moeplan::Error>)],
    notes: &[String],
    topology: Topology,
    scope: &str,
    rule: &str,
    sources: &str,
    cost: &Cost,
) -> String {
    let mut o = String::new();
    wl!(o, "{topology} · {scope}");
    wl!(o, "dispatch: {rule} · sources: {sources}");
    wl!(o, "cross-node GB: over all batches, at {}", cost.describe());
    wl!(
        o,
        "fullest GPU +: replica slots on the fullest GPU, all layers, beyond an even share without replicas (what limits its KV cache)"
    );
    // Token routes say which pairs share a token: then one more column,
    // the messages a dispatch sending each token once per node moves.
    let messages = rows
        .iter()
        .any(|(_, r)| r.as_ref().is_ok_and(|j| j.messages().is_some()));
    if messages {
        wl!(
            o,
            "msgs/token x-node: per (token, layer), a token sent once per destination node"
        );
    }
    let mut head = format!(
        "{:<16} {:>13} {:>10} {:>9} {:>14} {:>8} {:>12} {:>14}",
        "plan",
        "balancedness",
        "imbalance",
        "replicas",
        "fullest GPU +",
        "local %",
        "cross-node %",
        "cross-node GB"
    );
    if messages {
        let _ = write!(head, " {:>18}", "msgs/token x-node");
    }
    let priced = rows
        .iter()
        .find_map(|(_, r)| r.as_ref().ok().and_then(|j| j.predicted.as_ref()));
    if let Some(p) = priced {
        let _ = write!(
            head,
            " {:>10} {:>12} {:>9} {:>11} {:>10} {:>10}",
            "step ms", "tokens/s", "× BASE", "compute µs", "a2a µs", "KV GiB"
        );
        wl!(
            o,
            "predicted on {} ({}), ranked by tokens/s; per MoE layer: compute, dispatch + combine (a2a); KV GiB per GPU; × BASE over {}",
            p.hardware,
            p.model,
            moeplan::judge::cost::BASE_ABOUT
        );
    }
    wl!(o, "{head}");
    for (name, r) in rows {
        match r {
            Ok(j) => {
                let mut line = format!(
                    "{:<16} {:>13.4} {:>10.4} {:>9} {:>14} {:>8.1} {:>12.1} {:>14.3}",
                    name,
                    j.report.balancedness,
                    j.report.imbalance_ratio,
                    j.report.replicas,
                    j.report.replica_slots_fullest_gpu,
                    j.local_pct(),
                    j.cross_node_pct(),
                    j.cross_node_gb()
                );
                if messages {
                    let cell = j.messages().map_or("—".to_string(), |m| {
                        format!("{:.3}", m.per_token_cross_node)
                    });
                    let _ = write!(line, " {cell:>18}");
                }
                if let Some(p) = &j.predicted {
                    let _ = write!(
                        line,
                        " {:>10.3} {:>12.0} {:>9} {:>11.1} {:>10.1} {:>10.1}",
                        p.step_ms,
                        p.tokens_per_s,
                        p.speedup.map_or("—".to_string(), |s| format!("{s:.3}")),
                        p.compute_us,
                        p.dispatch_us + p.combine_us,
                        p.kv_cache_gib_per_gpu
                    );
                }
                wl!(o, "{line}");
            }
            Err(e) => wl!(o, "{name:<16} not possible: {e}"),
        }
    }
    let band = rows
        .iter()
        .find_map(|(_, r)| r.as_ref().ok().and_then(|j| j.predicted.as_ref()));
    if let Some(p) = band {
        wl!(o, "predicted times: {}", p.error_band.about);
    }
    // Why each row wins or loses against BASE: its largest term.
    for (name, row) in rows {
        if let Some(reason) = row
            .as_ref()
            .ok()
            .and_then(|j| j.predicted.as_ref())
            .and_then(|p| p.reason.as_ref())
            .filter(|_| !name.starts_with("BASE"))
        {
            wl!(o, "against BASE, {}: {reason}", name.trim());
        }
    }
    for note in notes {
        wl!(o, "note: {note}");
    }
    o
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

pub fn presets() -> String {
    let mut o = String::new();
    wl!(
        o,
        "{:<20} {:>7} {:>8} {:>6} {:>7} {:>13}  model",
        "preset",
        "layers",
        "experts",
        "top-k",
        "groups",
        "MiB / expert"
    );
    for p in model::PRESETS {
        wl!(
            o,
            "{:<20} {:>7} {:>8} {:>6} {:>7} {:>13.1}  {}",
            p.name,
            p.moe_layers(),
            p.experts,
            p.top_k,
            p.groups,
            p.expert_bytes() as f64 / (1 << 20) as f64,
            p.display
        );
    }
    o
}

/// The hardware presets: GPU peaks, links, sustained fractions.
pub fn hardware() -> String {
    let mut o = String::new();
    wl!(
        o,
        "{:<18} {:>9} {:>8} {:>9} {:>7} {:>11} {:>11}  {:<19}  about",
        "hardware",
        "BF16 TF",
        "FP8 TF",
        "HBM GB/s",
        "GiB",
        "node GB/s",
        "x-node GB/s",
        "figures"
    );
    for h in moeplan::data::hardware::PRESETS {
        let fp8 = if h.gpu.fp8_tflops > 0.0 {
            format!("{:.0}", h.gpu.fp8_tflops)
        } else {
            "—".into()
        };
        let shared = if h.inter_node.shared_by_node {
            "/node"
        } else {
            ""
        };
        wl!(
            o,
            "{:<18} {:>9.0} {:>8} {:>9.0} {:>7.0} {:>11.1} {:>11}  {:<19}  {}",
            h.name,
            h.gpu.bf16_tflops,
            fp8,
            h.gpu.hbm_gb_per_s,
            h.gpu.memory_gib,
            h.intra_node.gb_per_s,
            format!("{:.3}{shared}", h.inter_node.gb_per_s),
            h.provenance(),
            h.about
        );
    }
    wl!(
        o,
        "bandwidth per GPU and direction (x-node: /node = one NIC the node's GPUs share); figures: calibrated on its GPU's measured kernel times, its datasheet with the H100's fitted kernel times, or its datasheet alone (each prediction's error band says how far each held, docs/cost.md); sustained fractions and sources: moeplan hardware --json"
    );
    o
}

/// The registry: each planner, what it reads, and its options as flags with
/// their defaults.
pub fn planners(list: &[PlannerInfo]) -> String {
    let mut o = String::new();
    for p in list {
        wl!(o, "{:<12} {} — reads {}", p.id, p.about, p.needs.describe());
        for opt in &p.options {
            let choices = opt
                .choices
                .map(|c| format!(" ({})", c.join(" | ")))
                .unwrap_or_default();
            wl!(
                o,
                "{:<12}   --{}{choices}  default {}: {}",
                "",
                crate::args::flag_for(opt.name),
                match opt.default {
                    Value::Flag(true) => "on".to_string(),
                    Value::Flag(false) => "off".to_string(),
                    ref v => v.to_string(),
                },
                opt.about
            );
        }
    }
    o
}

/// `sweep --hardware`: each row's predicted step, throughput and KV cache.
pub fn sweep_predicted(
    s: &Sweep,
    predicted: &[Option<moeplan::judge::cost::Prediction>],
) -> String {
    let mut o = String::new();
    let Some(first) = predicted.iter().flatten().next() else {
        return o;
    };
    wl!(o);
    wl!(
        o,
        "predicted on {} ({}); × BASE: over the first row",
        first.hardware,
        first.model
    );
    wl!(
        o,
        "{:<8} {:>8} {:>10} {:>12} {:>9} {:>9}",
        "method",
        "R",
        "step ms",
        "tokens/s",
        "× BASE",
        "KV GiB"
    );
    for (row, p) in s.rows.iter().zip(predicted) {
        if let Some(p) = p {
            wl!(
                o,
                "{:<8} {:>8.2} {:>10.3} {:>12.0} {:>9} {:>9.1}",
                row.method,
                row.replicas_per_gpu,
                p.step_ms,
                p.tokens_per_s,
                p.speedup.map_or("—".into(), |x| format!("{x:.3}")),
                p.kv_cache_gib_per_gpu
            );
        }
    }
    wl!(o, "predicted times: {}", first.error_band.about);
    o
}

pub fn sweep(
    s: &Sweep,
    topology: Topology,
    scope: &str,
    preset: &ModelPreset,
    from: &str,
    rule: &str,
    sources: &str,
) -> String {
    let mut o = String::new();
    wl!(o, "{topology} · {scope}");
    wl!(o, "dispatch: {rule} · sources: {sources}");
    wl!(
        o,
        "CRAFT's automatic choice (Step 2): R = {}",
        s.auto_replicas_per_gpu
    );
    let mem_head = "GiB/GPU";
    let whose = match from {
        "asked" => String::new(),
        "the trace" => ", the trace's model".into(),
        _ => ", the default: name the model with --model".into(),
    };
    wl!(
        o,
        "R: replicas per GPU over all layers; GiB/GPU: replica memory on the fullest GPU ({}'s experts{whose})",
        preset.name
    );
    wl!(
        o,
        "{:<6} {:>8} {:>9} {:>13} {:>10} {:>8} {:>10} {:>8}",
        "plan",
        "R",
        "replicas",
        "balancedness",
        "predicted",
        "bound",
        "imbalance",
        mem_head
    );
    for r in &s.rows {
        let mem = format!(
            "{:.2}",
            r.replica_slots_per_gpu as f64 * preset.expert_bytes() as f64 / (1u64 << 30) as f64
        );
        wl!(
            o,
            "{:<6} {:>8} {:>9} {:>13.4} {:>10} {:>8.4} {:>10.4} {:>8}",
            r.method,
            format!("{:.1}", r.replicas_per_gpu),
            r.replicas,
            r.balancedness,
            r.predicted_balancedness
                .map(|p| format!("{p:.4}"))
                .unwrap_or_else(|| "—".into()),
            r.bound,
            r.imbalance_ratio,
            mem
        );
    }
    o
}
