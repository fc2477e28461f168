//! `moeplan sweep`: BASE, CRAFT at each R and EPLB at each k, side by side
//! (the CRAFT paper's Figure 5 / 9 as a table), judged under one dispatch
//! rule.

use moeplan::planners::craft::{Budget, Craft, CraftOptions};
use moeplan::planners::{EplbConfig, eplb};
use moeplan::sim::{Rule, Workload};
use moeplan::sweep::{Sweep, SweepRow};
use moeplan::{LoadTrace, Plan, Topology, model};

use super::split_for;
use crate::args::SweepArgs;
use crate::error::CliError;
use crate::io::{emit, load_trace, spinner};
use crate::judge::{Cost, judge_quietly};
use crate::report;

pub fn run(args: SweepArgs) -> Result<(), CliError> {
    let trace = load_trace(&args.trace)?;
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let (planned_on, evaluated, scope) = split_for(&trace, args.holdout)?;
    let preset = match args.model.as_deref().or(trace.model()) {
        Some(name) => Some(model::preset(name)?),
        None => None,
    };
    let rule = args.dispatch.rule();
    let cost = Cost::choose(args.model.as_deref(), &trace)?;
    let work = Workload::new(evaluated);
    let bar = spinner("sweeping budgets");
    let result = if rule == Rule::Even {
        moeplan::sweep::sweep(
            &planned_on,
            work.trace(),
            topology,
            args.cluster.groups,
            &args.craft.options(),
        )
    } else {
        sweep_under(
            &planned_on,
            &work,
            topology,
            args.cluster.groups,
            &args.craft.options(),
            rule,
            &cost,
        )
    };
    bar.finish_and_clear();
    let result = result?;
    if args.json {
        let mut v = serde_json::to_value(&result).unwrap_or_default();
        v["scope"] = scope.into();
        v["expert_bytes"] = preset.map(|p| p.expert_bytes()).into();
        v["dispatch"] = rule.name().into();
        v["sources"] = work.sources().into();
        emit(&v.to_string());
    } else {
        emit(&report::sweep(
            &result,
            topology,
            &scope,
            preset,
            rule.name(),
            work.sources(),
        ));
    }
    Ok(())
}

/// `moeplan::sweep::sweep` with every plan judged under `rule` (the
/// simulator's balance; bound and memory as the sweep's). The same plans in
/// the same order: a unit test holds it to the core's sweep under `even`.
fn sweep_under(
    plan_on: &LoadTrace,
    work: &Workload,
    topology: Topology,
    groups: usize,
    options: &CraftOptions,
    rule: Rule,
    cost: &Cost,
) -> Result<Sweep, moeplan::Error> {
    let d = topology.num_gpus();
    let l = plan_on.num_layers();
    let craft = Craft::prepare(plan_on, topology, options)?;
    let own_slots = (plan_on.num_experts() * l).div_ceil(d);
    let mut rows = Vec::new();
    let mut push = |method, r: f64, plan: &Plan, predicted| -> Result<(), moeplan::Error> {
        let rep = judge_quietly(work, plan, rule, cost)?.report;
        rows.push(SweepRow {
            method,
            replicas_per_gpu: r,
            replicas: rep.replicas,
            slots_per_gpu_max: rep.slots_per_gpu_max,
            replica_slots_per_gpu: rep.slots_per_gpu_max.saturating_sub(own_slots),
            balancedness: rep.balancedness,
            imbalance_ratio: rep.imbalance_ratio,
            bound: rep.bound,
            predicted_balancedness: predicted,
        });
        Ok(())
    };
    let eplb_with = |k| {
        eplb(
            plan_on,
            topology,
            EplbConfig {
                redundant_experts: k,
                groups,
            },
        )
    };
    if let Ok(p) = &eplb_with(0) {
        push("base", 0.0, p, None)?;
    }
    let factors = craft.curve_factors();
    for &r in &factors {
        let p = craft.plan(Budget::ReplicasPerGpu(r))?;
        push(
            "craft",
            r as f64,
            &p.plan,
            Some(p.allocation.predicted_balancedness),
        )?;
    }
    let max_r = factors.last().copied().unwrap_or(1) as f64;
    let e = plan_on.num_experts();
    for j in 1.. {
        // one more slot per GPU per layer each step; the first step also
        // rounds the slot count up to a multiple of the GPU count
        let k = j * d - e % d;
        let r = (k * l) as f64 / d as f64;
        if j > 1 && r > max_r {
            break;
        }
        match eplb_with(k) {
            Ok(p) => push("eplb", r, &p, None)?,
            Err(_) => break,
        }
    }
    Ok(Sweep {
        rows,
        auto_replicas_per_gpu: craft.auto_replicas_per_gpu(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use moeplan::generator::{GenConfig, generate};

    /// The CLI's sweep under a rule makes the core's plans in the core's
    /// order: under `even` its rows are the core's to the bit.
    #[test]
    fn sweep_under_even_is_the_core_sweep() {
        let t = generate(&GenConfig::new(model::preset("olmoe").unwrap(), 4)).unwrap();
        let topology = Topology::new(2, 4).unwrap();
        let options = CraftOptions::default();
        let cost = Cost::choose(None, &t).unwrap();
        let core = moeplan::sweep::sweep(&t, &t, topology, 1, &options).unwrap();
        let work = Workload::new(t.clone());
        let ours = sweep_under(&t, &work, topology, 1, &options, Rule::Even, &cost).unwrap();
        assert_eq!(
            serde_json::to_string(&core).unwrap(),
            serde_json::to_string(&ours).unwrap()
        );
        let optimal = sweep_under(&t, &work, topology, 1, &options, Rule::Optimal, &cost).unwrap();
        for (a, b) in core.rows.iter().zip(&optimal.rows) {
            assert!(b.balancedness >= a.balancedness - 1e-12);
        }
    }
}
