//! `moeplan compare`: every planner on one trace and cluster, judged under
//! one dispatch rule.

use moeplan::Topology;
use moeplan::planners::Budget;
use moeplan::planners::craft::CraftOptions;
use moeplan::sim::Workload;

use super::{algo_name, make_plan, split_for};
use crate::args::{Algo, CompareArgs};
use crate::error::CliError;
use crate::io::{emit, load_trace, spinner};
use crate::judge::{Cost, judge_quietly};
use crate::report;

pub fn run(args: CompareArgs) -> Result<(), CliError> {
    let trace = load_trace(&args.trace)?;
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let redundant = args.redundant_experts.unwrap_or(topology.num_gpus());
    let cost = Cost::choose(args.model.as_deref(), &trace)?;
    let (planned_on, evaluated, scope) = split_for(&trace, args.holdout)?;
    let work = Workload::new(evaluated);
    let rule = args.dispatch.rule();
    let mut rows = Vec::new();
    let craft_budget = Budget::ReplicasPerGpu(8);
    let bar = spinner("planning and replaying");
    for (algo, k) in [
        (Algo::Contiguous, 0),
        (Algo::Base, 0),
        (Algo::Eplb, redundant),
        (Algo::Craft, 0),
    ] {
        let result = make_plan(
            algo,
            &planned_on,
            topology,
            &args.cluster,
            k,
            craft_budget,
            &CraftOptions::default(),
        )
        .and_then(|plan| judge_quietly(&work, &plan, rule, &cost));
        rows.push((algo_name(algo, k), result));
    }
    bar.finish_and_clear();
    if args.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|(name, r)| match r {
                Ok(r) => serde_json::json!({"name": name, "report": r.json()}),
                Err(e) => serde_json::json!({"name": name, "error": e.to_string()}),
            })
            .collect();
        emit(
            &serde_json::json!({
                "scope": scope,
                "topology": topology,
                "dispatch": rule.name(),
                "sources": work.sources(),
                "cost": cost.json(),
                "plans": v,
            })
            .to_string(),
        );
    } else {
        emit(&report::compare(
            &rows,
            topology,
            &scope,
            rule.name(),
            work.sources(),
            &cost,
        ));
    }
    Ok(())
}
