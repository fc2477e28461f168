//! `moeplan plan`: compute a plan and write it in the format an engine
//! loads; with `--dispatch`, also say how it balances under that rule.

use moeplan::formats::plan_json::{self, PlanMeta};
use moeplan::formats::{self, sglang};
use moeplan::sim::{Rule, Workload};
use moeplan::{LoadTrace, Plan, Topology, model};

use super::{place_in_model, plan_with};
use crate::args::{PlanArgs, PlanFormat};
use crate::error::CliError;
use crate::io::{Loaded, Split, load, spinner, split, write_file};
use crate::judge::{Cost, judge_quietly};

pub fn run(args: PlanArgs) -> Result<(), CliError> {
    // Sources kept: a planner may read them (GRACE's affinities come from
    // token routes), and `--dispatch` replays them.
    let Loaded { trace, sources } = load(&args.trace)?;
    let trace = place_in_model(trace, args.model.as_deref(), args.model_layers)?;
    if args.format == PlanFormat::Sglang && trace.known_model_layers().is_none() {
        // Refused before planning: the file needs it, and planning can take a while.
        return Err(unknown_model_layers(&trace).into());
    }
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let cost = match args.dispatch {
        Some(_) => Some(Cost::choose(args.model.as_deref(), &trace)?),
        None => None,
    };
    // What the file and the messages need from the whole trace, before it
    // moves into the workload planned on (no copy of the counts).
    let model_layers = trace.known_model_layers();
    let model_name = args
        .model
        .clone()
        .or_else(|| trace.model().map(str::to_string));
    let total_batches = trace.num_batches();
    let rule = args.dispatch.map(|d| d.rule());
    let Split {
        planning, held_out, ..
    } = split(trace, &sources, args.holdout, topology, rule)?;
    drop(sources);
    let planned_on = planning.trace();
    let planner = args.algo.planner()?;
    let bar = spinner("planning");
    let (_, planned, notes) = plan_with(planner, &planning, topology, &args.planner.settings);
    bar.finish_and_clear();
    for note in &notes {
        eprintln!("note: {note}");
    }
    let plan = planned?.plan;
    let needs_uniform = matches!(
        args.format,
        PlanFormat::Sglang | PlanFormat::Vllm | PlanFormat::VllmAscend
    );
    let plan = if needs_uniform && plan.uniform_slots_per_gpu().is_none() {
        if !args.pad {
            return Err(moeplan::Error::Export {
                format: "sglang/vllm/vllm-ascend",
                message: format!(
                    "this {} plan has different slot counts per GPU or layer, which the format cannot express; add --pad to write the closest plan that fits",
                    plan.algorithm()
                ),
            }
            .into());
        }
        let padded = plan.padded_to_uniform(planned_on.summed().view())?;
        eprintln!(
            "padded to {} slots per GPU in every layer: {} more replicas",
            padded.uniform_slots_per_gpu().unwrap_or(0),
            padded.summary().replicas - plan.summary().replicas
        );
        padded
    } else {
        plan
    };
    let plan = if args.format == PlanFormat::VllmAscend {
        without_same_gpu_copies(plan, &planning, rule, cost.as_ref())?
    } else {
        plan
    };
    let text = match args.format {
        PlanFormat::Moeplan => plan_json::write(
            &plan,
            &PlanMeta {
                // Only a known count: an assumed one would let a later
                // export trust layer ids that may be MoE positions.
                model_layers,
                model: model_name,
                holdout: args.holdout,
            },
        ),
        PlanFormat::Sglang => sglang::write_init_expert_location(&plan, model_layers)?,
        PlanFormat::Vllm => formats::vllm::write_physical_to_logical(&plan)?,
        PlanFormat::VllmAscend => formats::vllm::write_ascend_expert_map(&plan)?,
        PlanFormat::Csv => formats::csv::write_plan_csv(&plan),
    };
    write_file(&args.out, &text)?;
    let s = plan.summary();
    eprintln!(
        "wrote {}: {} plan for {topology}, {} layers, {} replicas, {}..{} slots per GPU{}",
        args.out.display(),
        plan.algorithm(),
        plan.layers().len(),
        s.replicas,
        s.slots_per_gpu_min,
        s.slots_per_gpu_max,
        held_out
            .as_ref()
            .map(|_| format!(
                ", planned on {} of {total_batches} batches",
                planned_on.num_batches(),
            ))
            .unwrap_or_default()
    );
    if let (Some(rule), Some(cost)) = (rule, &cost) {
        let mut parts = vec![("planned", &planning)];
        if let Some(ev) = &held_out {
            parts.push(("held-out", ev));
        }
        for (name, work) in parts {
            let on = work.trace();
            let j = judge_quietly(work, &plan, rule, cost)?;
            eprintln!(
                "under {} dispatch ({}), on the {} {} batch(es): balancedness {:.4}, imbalance {:.4}, local {:.1}%, cross-node {:.1}% ({:.3} GB at {})",
                j.sim.rule,
                j.sim.sources,
                on.num_batches(),
                name,
                j.report.balancedness,
                j.report.imbalance_ratio,
                j.local_pct(),
                j.cross_node_pct(),
                j.cross_node_gb(),
                cost.describe()
            );
        }
    }
    Ok(())
}

/// Why `--format sglang` needs the model, and how to name it (the preset of
/// the trace's shape when there is one).
fn unknown_model_layers(trace: &LoadTrace) -> moeplan::Error {
    let (l, e) = (trace.num_layers(), trace.num_experts());
    let (name, total) = model::PRESETS
        .iter()
        .find(|p| p.experts == e && p.moe_layers() == l)
        .map_or(("deepseek-v3", 61), |p| (p.name, p.total_layers));
    moeplan::Error::Export {
        format: "SGLang --init-expert-location",
        message: format!(
            "the model's layer count is unknown: the trace holds only its {l} MoE layers, \
             and SGLang indexes rows by model layer (a short file loads silently and serves every \
             layer another layer's experts); name the model with --model {name}, or \
             --model-layers {total} when the trace's layer ids are the model's"
        ),
    }
}

/// vllm-ascend gives each expert one slot per device: second copies on one
/// GPU are swapped away (slot and copy counts kept), and the balance change
/// is reported (under `--dispatch` when given, else the even split).
fn without_same_gpu_copies(
    plan: Plan,
    work: &Workload,
    rule: Option<Rule>,
    cost: Option<&Cost>,
) -> Result<Plan, CliError> {
    let n = plan.summary().same_gpu_duplicates;
    if n == 0 {
        return Ok(plan);
    }
    let planned_on = work.trace();
    let fixed = plan.without_same_gpu_duplicates(planned_on.summed().view())?;
    let (before, after, under) = match (rule, cost) {
        (Some(rule), Some(cost)) => (
            judge_quietly(work, &plan, rule, cost)?.report.balancedness,
            judge_quietly(work, &fixed, rule, cost)?.report.balancedness,
            format!(" under {rule} dispatch"),
        ),
        _ => (
            moeplan::evaluate(planned_on, &plan)?.balancedness,
            moeplan::evaluate(planned_on, &fixed)?.balancedness,
            String::new(),
        ),
    };
    eprintln!(
        "vllm-ascend holds one copy of an expert per device: moved {n} second copies to other devices (balancedness on the planned batches{under} {before:.4} → {after:.4})"
    );
    Ok(fixed)
}
