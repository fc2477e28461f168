//! `moeplan cross`: plans across workloads. BASE, EPLB and CRAFT made on
//! each of several traces, and EPLB, CRAFT (mean) and CRAFT (robust) made
//! on all of them at once (`moeplan::studies::across`), each judged on every
//! trace (even split): a matrix, rows made on, columns judged on. Every
//! cell's scope comes from the plan's provenance, as `eval` decides it.

use moeplan::studies::{self, CrossRow};
use moeplan::{LoadTrace, Topology};
use serde_json::json;

use super::{place_in_model, with_pricing};
use crate::args::{CrossArgs, TraceArgs};
use crate::error::CliError;
use crate::io::{emit, load_trace, spinner};

pub fn run(args: CrossArgs) -> Result<(), CliError> {
    if args.traces.len() < 2 {
        return Err(moeplan::Error::Argument(
            "cross needs at least two --trace files to judge plans across".into(),
        )
        .into());
    }
    let mut traces = Vec::with_capacity(args.traces.len());
    for path in &args.traces {
        let t = load_trace(&TraceArgs {
            trace: Some(path.clone()),
            source: args.source.clone(),
        })?;
        traces.push(place_in_model(t, args.model.as_deref(), None)?);
    }
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let bar = spinner("planning on every trace and judging on every trace");
    // cross has no --hardware: --objective time is refused here
    let settings = with_pricing(&args.planner.settings, None)?;
    let rows = studies::cross_table(&traces, topology, &settings)?;
    bar.finish_and_clear();
    let names: Vec<String> = args
        .traces
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    if args.json {
        crate::io::emit_json(to_json(&rows, &names, &traces, topology));
    } else {
        emit(&table(&rows, &names, topology));
    }
    Ok(())
}

fn table(rows: &[CrossRow], names: &[String], topology: Topology) -> String {
    let mut out = format!(
        "Plans across workloads on {topology}: balancedness (even split), rows made on, columns judged on; * = in-sample\n"
    );
    for (j, n) in names.iter().enumerate() {
        out += &format!("  T{}: {n}\n", j + 1);
    }
    out += &format!("{:<26} {:>8} {:>9}", "plan", "made on", "replicas");
    for j in 0..names.len() {
        out += &format!(" {:>8}", format!("T{}", j + 1));
    }
    out += &format!(" {:>8}\n", "worst");
    for r in rows {
        let on = r.made_on.map_or("all".into(), |i| format!("T{}", i + 1));
        out += &format!("{:<26} {:>8} {:>9}", r.name, on, r.plan.summary().replicas);
        for c in &r.cells {
            let mark = if c.scope.kind() == "in-sample" {
                "*"
            } else {
                " "
            };
            out += &format!(" {:>7.4}{mark}", c.balancedness);
        }
        out += &format!(" {:>8.4}\n", r.worst());
    }
    out
}

fn to_json(
    rows: &[CrossRow],
    names: &[String],
    traces: &[LoadTrace],
    topology: Topology,
) -> serde_json::Value {
    // The fingerprints the plans recorded (a plan made on one trace holds
    // that trace's), not hashed again.
    let print = |j: usize| {
        rows.iter()
            .find(|r| r.made_on == Some(j))
            .and_then(|r| r.plan.provenance())
            .and_then(|p| p.traces.first())
            .map(|t| t.fingerprint.clone())
            .unwrap_or_default()
    };
    let traces: Vec<serde_json::Value> = names
        .iter()
        .zip(traces)
        .enumerate()
        .map(|(j, (n, t))| json!({"path": n, "fingerprint": print(j), "batches": t.num_batches()}))
        .collect();
    let plans: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let s = r.plan.summary();
            json!({
                "name": r.name,
                "planner": r.planner,
                "made_on": r.made_on.map_or(json!("all"), |i| json!(i)),
                "replicas": s.replicas,
                "slots_per_gpu_max": s.slots_per_gpu_max,
                "worst": r.worst(),
                "judged": r.cells.iter().map(|c| json!({
                    "balancedness": c.balancedness,
                    "imbalance_ratio": c.imbalance_ratio,
                    "scope": c.scope.to_string(),
                    "scope_kind": c.scope.kind(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({"topology": topology, "traces": traces, "plans": plans})
}
