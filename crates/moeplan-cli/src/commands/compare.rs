//! `moeplan compare`: every registered planner on one trace and cluster,
//! each at the planner options given (else its defaults), judged under one
//! dispatch rule.

use moeplan::Topology;
use moeplan::Workload;
use moeplan::judge::Rule;
use moeplan::planners::{Settings, registry};

use super::{plan_with, with_pricing};
use crate::args::CompareArgs;
use crate::error::CliError;
use crate::io::{emit, load, noted, spinner};
use crate::judge::{Cost, judge_prepared, judge_quietly};
use crate::judged::Judged;
use crate::report;
use moeplan::formats::dataset::{self, Dataset};

pub fn run(args: CompareArgs) -> Result<(), CliError> {
    // Per-rank files and token folders keep their sources, for the
    // planners that read them (GRACE's affinities come from token routes)
    // and for the rule judging the plans.
    let Dataset { trace, sources } = load(&args.trace)?;
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let cost = Cost::choose(args.judge.model.as_deref(), &trace)?.priced(&args.judge.cost)?;
    // CRAFT planning for time (--objective time) prices on --hardware.
    let settings = with_pricing(&args.planner.settings, cost.pricing.as_ref())?;
    let rule = args.judge.dispatch;
    let split = noted(|n| dataset::split(trace, &sources, args.holdout, topology, Some(rule), n))?;
    drop(sources);
    let dataset::Split {
        planning,
        held_out,
        scope,
    } = split;
    let planning = std::sync::Arc::new(planning);
    let judge = cost.judge(held_out.map_or_else(|| planning.clone(), std::sync::Arc::new));
    let (work, scope) = (judge.workload(), &scope);
    let layers = work.trace().num_layers();
    let bar = spinner("planning and replaying");
    let rows = rows(&planning, &judge, topology, &settings, rule, &cost);
    // The same groups EPLB plans with (the core's one BASE).
    let groups = moeplan::planners::groups(&settings, planning.trace())?;
    let base = judge.base_prediction(
        planning.trace(),
        topology,
        groups,
        rule,
        cost.pricing.as_ref(),
    );
    bar.finish_and_clear();
    // BASE needs experts a multiple of the GPUs; without it, no speedups.
    let mut base_note = None;
    let base = base.unwrap_or_else(|e| {
        base_note = Some(format!(
            "no speedup column: BASE is not possible here ({e})"
        ));
        None
    });
    let mut rows = rows;
    for r in &mut rows {
        if let Ok(j) = &mut r.judged {
            j.speedup_over(base.as_ref());
        }
    }
    // With a hardware named, the plans rank by predicted throughput.
    if cost.pricing.is_some() {
        rows.sort_by(|a, b| {
            let tput = |r: &Row| {
                r.judged
                    .as_ref()
                    .ok()
                    .and_then(|j| j.predicted.as_ref())
                    .map_or(f64::NEG_INFINITY, |p| p.tokens_per_s)
            };
            tput(b).total_cmp(&tput(a))
        });
    }
    // Every planner's notes (GRACE on counts only: load-only grouping), in
    // row order, once each.
    let notes: Vec<String> = rows
        .iter()
        .flat_map(|r| r.notes.clone())
        .chain(base_note)
        .collect();
    if args.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| match &r.judged {
                Ok(j) => {
                    serde_json::json!({"name": r.name, "report": j.json(), "notes": r.notes})
                }
                Err(e) => {
                    serde_json::json!({"name": r.name, "error": e.to_string(), "notes": r.notes})
                }
            })
            .collect();
        crate::io::emit_json(serde_json::json!({
            "scope": scope,
            "topology": topology,
            "dispatch": rule.name(),
            "sources": work.sources(),
            "cost": cost.json(),
            "plans": v,
            "notes": notes,
        }));
    } else {
        let mut notes = notes;
        let judged: Vec<(String, Result<Judged, moeplan::Error>)> = rows
            .into_iter()
            .map(|r| match &r.judged {
                // The table's columns are the base's; what the schedule
                // adds is said under it.
                Ok(j) => match &j.schedule {
                    Some(s) => {
                        let name = format!("{} (per batch)", r.name);
                        notes.push(schedule_note(&name, j, s, layers));
                        (name, r.judged)
                    }
                    None => (r.name, r.judged),
                },
                Err(_) => (r.name, r.judged),
            })
            .collect();
        emit(&report::compare(
            &judged,
            &notes,
            topology,
            scope,
            rule.name(),
            work.sources(),
            &cost,
        ));
    }
    Ok(())
}

/// What a per-batch plan's row means: its rule, and what it copies.
fn schedule_note(name: &str, j: &Judged, s: &moeplan::judge::Schedule, layers: usize) -> String {
    let batches = s.copies_per_batch.len().max(1) as f64;
    let copies = s.copies_per_batch.iter().sum::<usize>() as f64 / batches;
    format!(
        "{name}: {}, whatever --dispatch says; replicas are its static base's, plus up to {} copies per GPU in every layer ({} buffer slots per GPU, counted in its fullest GPU +): {:.1} copies per layer per batch on average, {:.2} GB of expert weights copied per batch",
        s.about,
        s.extra_slots_per_gpu,
        s.resident_slots_per_gpu,
        copies / layers.max(1) as f64,
        copies * j.expert_bytes as f64 / 1e9
    )
}

/// One registered planner's row: its plan's name, the plan judged, and
/// what the planner noted while planning.
struct Row {
    name: String,
    judged: Result<Judged, moeplan::Error>,
    notes: Vec<String>,
}

/// One row per registered planner: planned on `planning`, judged by `work`.
fn rows(
    planning: &Workload,
    work: &moeplan::judge::Judge,
    topology: Topology,
    settings: &Settings,
    rule: Rule,
    cost: &Cost,
) -> Vec<Row> {
    registry()
        .iter()
        .map(|planner| {
            let made = plan_with(*planner, planning, topology, settings);
            // A per-batch planner (Libra) is judged by its schedule on the
            // judged batches, under its own rule (it is online: it re-plans
            // on whatever it serves); static plans under `rule`.
            let judged = made.planned.and_then(|p| match &made.ready {
                Some(ready) => judge_prepared(work, ready.as_ref(), &p.plan, rule, cost),
                None => judge_quietly(work, &p.plan, rule, cost),
            });
            Row {
                name: made.name,
                judged,
                notes: made.notes,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use moeplan::data::model;
    use moeplan::synth::generator::{GenConfig, generate};

    use crate::args::{Cli, Command};

    /// `compare` where the GPU count does not divide the experts: OLMoE's 64
    /// experts on 1 × 6 GPUs and Qwen1.5-MoE's 60 on 8. EPLB gets the
    /// registry's default (one slot per GPU more than the experts need), so
    /// it plans; only BASE, which cannot fill the GPUs evenly, is refused.
    #[test]
    fn compare_plans_eplb_when_gpus_do_not_divide_the_experts() {
        for (preset, gpus, k) in [("olmoe", 6, 8), ("qwen1.5-moe-a2.7b", 8, 12)] {
            let t = generate(&GenConfig::new(model::preset(preset).unwrap(), 4)).unwrap();
            let topology = Topology::new(1, gpus).unwrap();
            let cost = Cost::choose(None, &t).unwrap();
            let work = Workload::new(t);
            let judge = cost.judge(work.clone());
            let rows = rows(&work, &judge, topology, &Settings::new(), Rule::Even, &cost);
            let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
            assert_eq!(names[..3], ["contiguous", "base", &format!("eplb (+{k})")]);
            assert!(names[3].starts_with("craft (R = "), "{names:?}");
            for row in &rows {
                let (name, r) = (&row.name, &row.judged);
                match (name.as_str(), r) {
                    ("base", Err(e)) => {
                        assert!(e.to_string().contains("multiple of the GPU count"))
                    }
                    (_, Ok(j)) => assert!(j.report.balancedness > 0.0),
                    (_, Err(e)) => panic!("{preset} on {gpus}: {name}: {e}"),
                }
            }
            let eplb = rows[2].judged.as_ref().unwrap();
            assert_eq!(eplb.report.replicas, k * work.trace().num_layers());
        }
    }

    /// The CLI's planner flags are the registry's options, and an absent
    /// flag leaves the registry's default (the JavaScript API's too).
    #[test]
    fn planner_flags_fill_the_registry_settings() {
        let parse = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
            Command::Compare(c) => c.planner.settings,
            _ => unreachable!(),
        };
        assert!(parse(&["moeplan", "compare"]).is_empty());
        let s = parse(&[
            "moeplan",
            "compare",
            "--redundant-experts",
            "16",
            "--replicas-per-gpu",
            "auto",
            "--groups",
            "8",
            "--objective",
            "paper",
            "--no-refine",
        ]);
        let mut want = Settings::new();
        for (name, v) in [
            ("redundant_experts", "16"),
            ("replicas_per_gpu", "auto"),
            ("groups", "8"),
            ("objective", "paper"),
            ("refine", "false"),
        ] {
            want.set_str(name, v).unwrap();
        }
        assert_eq!(s, want);
        assert!(Cli::try_parse_from(["moeplan", "compare", "--objective", "median"]).is_err());
        assert!(Cli::try_parse_from(["moeplan", "sweep", "--replicas-per-gpu", "4"]).is_err());
    }
}
