//! `moeplan cross`: plans across workloads. BASE, EPLB and CRAFT made on
//! each of several traces, and EPLB, CRAFT (mean) and CRAFT (robust) made
//! on all of them at once ([`moeplan::across`]), each judged on every
//! trace (even split): a matrix, rows made on, columns judged on. Every
//! cell's scope comes from the plan's provenance, as `eval` decides it.

use moeplan::across::{self, Mix};
use moeplan::plan::Provenance;
use moeplan::planners::{self, Budget, CraftOptions, Planner};
use moeplan::sim::Workload;
use moeplan::{LoadTrace, Plan, Topology, evaluate};
use serde_json::json;

use super::{place_in_model, plan_with};
use crate::args::{CrossArgs, TraceArgs};
use crate::error::CliError;
use crate::io::{emit, load_trace, spinner};

/// One plan and its figures on every trace.
struct Row {
    /// The plan's name in reports (`eplb (+64)`, `craft (R = 8)`).
    name: String,
    planner: &'static str,
    /// Index of the trace it was made on; `None`: made on all of them.
    made_on: Option<usize>,
    plan: Plan,
    /// Per judged trace: balancedness, imbalance ratio, scope.
    cells: Vec<(f64, f64, moeplan::plan::Scope)>,
}

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
    // Same layers × experts, or a typed error naming the two shapes.
    let mix = Mix::new(traces.clone(), None)?;
    let settings = &args.planner.settings;
    // Fingerprinting hashes every count: once per trace, not per cell.
    let own = traces
        .iter()
        .map(|t| Provenance::of(t, 0..t.num_batches()))
        .collect::<Result<Vec<_>, _>>()?;
    let prints: Vec<String> = own
        .iter()
        .map(|p| p.traces[0].fingerprint.clone())
        .collect();
    let of_mix = mix.provenance()?;
    let bar = spinner("planning on every trace and judging on every trace");
    let mut rows = Vec::new();
    for id in ["base", "eplb", "craft"] {
        let planner = planners::find(id)?;
        for (i, t) in traces.iter().enumerate() {
            let made = plan_with(planner, &Workload::new(t.clone()), topology, settings);
            let plan = made.planned?.plan;
            let plan = plan.with_provenance(Some(own[i].clone()));
            rows.push(judged(made.name, id, Some(i), plan, &traces, &prints)?);
        }
    }
    // Made on all: EPLB on the weighted sum (what an engine accumulates),
    // CRAFT on the traces' batches (the mean), CRAFT robust (the worst case).
    let eplb = planners::find("eplb")?;
    let made = plan_with(
        eplb,
        &Workload::new(mix.weighted_sum()?),
        topology,
        settings,
    );
    let plan = made.planned?.plan.with_provenance(Some(of_mix.clone()));
    rows.push(judged(made.name, "eplb", None, plan, &traces, &prints)?);
    let craft: &dyn Planner = planners::find("craft")?;
    let made = plan_with(craft, &Workload::new(mix.combined()?), topology, settings);
    let mean_budget = made.planned.as_ref().ok().and_then(|p| p.budget);
    let plan = made.planned?.plan.with_provenance(Some(of_mix.clone()));
    rows.push(judged(
        format!("{} mean", made.name),
        "craft",
        None,
        plan,
        &traces,
        &prints,
    )?);
    let options = CraftOptions::from_settings(settings)?;
    // The robust plan at the mean plan's R: the same memory.
    let budget = mean_budget.map_or(Budget::Auto, Budget::ReplicasPerGpu);
    let robust = across::craft_robust(&mix, topology, &options, budget, across::ROBUST_ROUNDS)?;
    let name = format!("{} robust", craft.label(Some(robust.replicas_per_gpu)));
    let plan = robust.plan.with_provenance(Some(of_mix));
    rows.push(judged(name, "craft-robust", None, plan, &traces, &prints)?);
    bar.finish_and_clear();
    let names: Vec<String> = args
        .traces
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    if args.json {
        emit(&to_json(&rows, &names, &traces, &prints, topology).to_string());
    } else {
        emit(&table(&rows, &names, topology));
    }
    Ok(())
}

fn judged(
    name: String,
    planner: &'static str,
    made_on: Option<usize>,
    plan: Plan,
    traces: &[LoadTrace],
    prints: &[String],
) -> Result<Row, CliError> {
    let provenance = plan.provenance().cloned();
    let cells = traces
        .iter()
        .zip(prints)
        .map(|(t, print)| {
            let r = evaluate(t, &plan)?;
            let batches = 0..t.num_batches();
            let scope = match &provenance {
                Some(p) => p.scope(print, batches),
                None => moeplan::plan::Scope::Unknown {
                    batches,
                    holdout: false,
                },
            };
            Ok((r.balancedness, r.imbalance_ratio, scope))
        })
        .collect::<Result<Vec<_>, moeplan::Error>>()?;
    Ok(Row {
        name,
        planner,
        made_on,
        plan,
        cells,
    })
}

fn worst(row: &Row) -> f64 {
    row.cells.iter().map(|c| c.0).fold(f64::INFINITY, f64::min)
}

fn table(rows: &[Row], names: &[String], topology: Topology) -> String {
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
        for (b, _, scope) in &r.cells {
            let mark = if scope.kind() == "in-sample" {
                "*"
            } else {
                " "
            };
            out += &format!(" {:>7.4}{mark}", b);
        }
        out += &format!(" {:>8.4}\n", worst(r));
    }
    out
}

fn to_json(
    rows: &[Row],
    names: &[String],
    traces: &[LoadTrace],
    prints: &[String],
    topology: Topology,
) -> serde_json::Value {
    let traces: Vec<serde_json::Value> = names
        .iter()
        .zip(traces.iter().zip(prints))
        .map(|(n, (t, print))| json!({"path": n, "fingerprint": print, "batches": t.num_batches()}))
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
                "worst": worst(r),
                "judged": r.cells.iter().map(|(b, i, scope)| json!({
                    "balancedness": b,
                    "imbalance_ratio": i,
                    "scope": scope.to_string(),
                    "scope_kind": scope.kind(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({"topology": topology, "traces": traces, "plans": plans})
}
