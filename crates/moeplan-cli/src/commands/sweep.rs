//! `moeplan sweep`: BASE, CRAFT at each R and EPLB at each k, side by side
//! (the CRAFT paper's Figure 5 / 9 as a table), judged under one dispatch
//! rule.

use moeplan::Topology;
use moeplan::judge::Rule;
use moeplan::planners::CraftOptions;
use moeplan::studies::sweep_by;

use super::{split_for, with_pricing};
use crate::args::SweepArgs;
use crate::error::CliError;
use crate::io::{emit, load, noted, spinner};
use crate::judge::{Cost, judge_quietly};
use crate::report;
use moeplan::formats::dataset::{self, Dataset};

pub fn run(args: SweepArgs) -> Result<(), CliError> {
    // The sweep's planners read counts only; the rule judging their plans
    // replays the sources the input records.
    let Dataset { trace, sources } = load(&args.trace)?;
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let (planned_on, evaluated, scope) = split_for(&trace, args.holdout)?;
    let rule = args.judge.dispatch;
    let cost = Cost::choose(args.judge.model.as_deref(), &trace)?.priced(&args.judge.cost)?;
    let preset = cost.choice.preset;
    let all = trace.num_batches();
    drop(trace);
    let judged = all - evaluated.num_batches()..all;
    let work = noted(|n| {
        dataset::workload_on_cluster(evaluated, &sources, judged, topology, Some(rule), n)
    })?;
    drop(sources);
    let judge = cost.judge(work);
    let work = judge.workload();
    // CRAFT planning for time (--objective time) prices on --hardware.
    let settings = &with_pricing(&args.planner.settings, cost.pricing.as_ref())?;
    let groups = moeplan::planners::groups(settings, &planned_on)?;
    let options = CraftOptions::from_settings(settings)?;
    let bar = spinner("sweeping budgets");
    let mut predicted = Vec::new();
    let result = if rule == Rule::Even && cost.pricing.is_none() {
        moeplan::studies::sweep(&planned_on, work.trace(), topology, groups, &options)
    } else {
        sweep_by(&planned_on, topology, groups, &options, |plan| {
            let j = judge_quietly(&judge, plan, rule, &cost)?;
            predicted.push(j.predicted);
            Ok(j.report)
        })
    };
    bar.finish_and_clear();
    let result = result?;
    // The first row is BASE: every priced row's speedup is over it.
    if let Some(base) = predicted.first().cloned().flatten() {
        for p in predicted.iter_mut().flatten() {
            p.compare_with(&base);
        }
    }
    if args.json {
        let mut v = serde_json::to_value(&result).unwrap_or_default();
        if let Some(rows) = v["rows"].as_array_mut() {
            for (row, p) in rows.iter_mut().zip(&predicted) {
                if let Some(p) = p {
                    row["predicted"] = serde_json::to_value(p).unwrap_or_default();
                }
            }
        }
        v["scope"] = scope.into();
        v["expert_bytes"] = preset.expert_bytes().into();
        v["dispatch"] = rule.name().into();
        v["sources"] = work.sources().into();
        crate::io::emit_json(v);
    } else {
        let mut text = report::sweep(
            &result,
            topology,
            &scope,
            preset,
            cost.choice.from,
            rule.name(),
            work.sources(),
        );
        if predicted.iter().any(Option::is_some) {
            text.push_str(&report::sweep_predicted(&result, &predicted));
        }
        emit(&text);
    }
    Ok(())
}

/// `moeplan::studies::sweep` with every plan judged under `rule` (the
/// simulator's balance; bound and memory as the sweep's). The same plans in
/// the same order: a unit test holds it to the core's sweep under `even`.
#[cfg(test)]
fn sweep_under(
    plan_on: &moeplan::LoadTrace,
    work: &moeplan::judge::Judge,
    topology: Topology,
    groups: usize,
    options: &CraftOptions,
    rule: Rule,
    cost: &Cost,
) -> Result<moeplan::studies::Sweep, moeplan::Error> {
    sweep_by(plan_on, topology, groups, options, |plan| {
        Ok(judge_quietly(work, plan, rule, cost)?.report)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use moeplan::data::model;
    use moeplan::synth::generator::{GenConfig, generate};

    /// The CLI's sweep under a rule makes the core's plans in the core's
    /// order: under `even` its rows are the core's to the bit.
    #[test]
    fn sweep_under_even_is_the_core_sweep() {
        let t = generate(&GenConfig::new(model::preset("olmoe").unwrap(), 4)).unwrap();
        let topology = Topology::new(2, 4).unwrap();
        let options = CraftOptions::default();
        let cost = Cost::choose(None, &t).unwrap();
        let core = moeplan::studies::sweep(&t, &t, topology, 1, &options).unwrap();
        let work = cost.judge(moeplan::Workload::new(t.clone()));
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
