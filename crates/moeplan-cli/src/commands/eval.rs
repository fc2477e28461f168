//! `moeplan eval`: replay a trace against any plan file moeplan writes
//! (detected by content) under a dispatch rule.

use moeplan::formats::plan_any::{PlanContext, PlanFileFormat, detect_plan, read_any_plan};
use moeplan::formats::plan_json::PlanMeta;
use moeplan::{LoadTrace, Plan};

use super::place_in_model;
use crate::args::EvalArgs;
use crate::error::CliError;
use crate::io::{Loaded, budget, emit, load, progress_bar, read_limited, spin, workload};
use crate::judge::{Cost, judge};
use crate::report;

pub fn run(args: EvalArgs) -> Result<(), CliError> {
    // Per-rank files and token folders keep their sources: SGLang's static
    // rule routes whole ranks, local-first serves a rank's tokens at home,
    // so where tokens come from changes the balance and traffic they get.
    let Loaded { trace, sources } = load(&args.trace)?;
    let max_mib = args.trace.source.max_trace_mib;
    let bytes = read_limited(&args.plan, max_mib)?;
    let in_plan = CliError::in_file(&args.plan);
    let format = detect_plan(&bytes).map_err(&in_plan)?;
    // SGLang's rows are model layers: a trace of MoE rows only is placed in
    // its model first (by --model, or the preset the trace names).
    let trace = if args.model.is_some() || format == PlanFileFormat::SglangInitExpertLocation {
        place_in_model(trace, args.model.as_deref(), None)?
    } else {
        trace
    };
    let ctx = PlanContext {
        budget: budget(max_mib),
        ..PlanContext::for_trace(&trace, args.cluster.topology()?)
    };
    let file = read_any_plan(&bytes, &ctx).map_err(&in_plan)?;
    drop(bytes);
    if file.topology_assumed {
        eprintln!(
            "{}: the {} does not say how its {} GPUs form nodes: taken as one node (give --nodes and --gpus-per-node)",
            args.plan.display(),
            format.name(),
            file.plan.topology().num_gpus()
        );
    }
    let (plan, meta) = (file.plan, file.meta);
    let trace = placed_like(trace, &plan, &meta)?;
    let cost = Cost::choose(args.model.as_deref(), &trace)?;
    let holdout = if args.in_sample {
        None
    } else {
        args.holdout.or(meta.holdout)
    };
    let all = trace.num_batches();
    let (evaluated, batches, scope) = match holdout {
        Some(h) => {
            let split = trace.holdout_split(h)?;
            let cut = split.plan.num_batches();
            (
                split.eval,
                cut..all,
                format!(
                    "held-out: batches {cut}..{} (planned on 0..{cut})",
                    trace.num_batches()
                ),
            )
        }
        None => {
            let scope = format!("in-sample: all {all} batch(es)");
            (trace, 0..all, scope)
        }
    };
    let rule = args.dispatch.rule();
    let bar = progress_bar(evaluated.num_layers(), "replaying");
    let work = workload(evaluated, &sources, batches, plan.topology())?;
    let judged = judge(&work, &plan, rule, &cost, |done, total| {
        bar.set_position(done as u64);
        if done == total {
            // the evaluator is done; the simulator runs next
            spin(&bar, rule.name());
        }
    });
    bar.finish_and_clear();
    let judged = judged.map_err(&in_plan)?;
    let mut algorithm = plan.algorithm().to_string();
    if format != PlanFileFormat::Moeplan {
        algorithm = format!("{algorithm} ({})", format.name());
    }
    if args.json {
        let mut v = judged.json();
        v["scope"] = scope.into();
        v["topology"] = serde_json::to_value(plan.topology()).unwrap_or_default();
        v["cost"] = cost.json();
        v["plan_format"] = format.name().into();
        emit(&v.to_string());
    } else {
        emit(&report::eval(&judged, &algorithm, &plan, &scope, &cost));
    }
    Ok(())
}

/// A plan made with `--model` from a trace without dense-layer information
/// names model layers (DeepSeek-V3's 3..60) where the trace names MoE
/// positions (0..57): the plan's recorded model places the trace the same
/// way, so the same file judges the plan it produced.
fn placed_like(trace: LoadTrace, plan: &Plan, meta: &PlanMeta) -> Result<LoadTrace, CliError> {
    let first = plan.layers().first().map(|l| l.layer);
    match (meta.model_layers, first) {
        (Some(total), Some(first))
            if trace.known_model_layers().is_none()
                && trace.layer_ids().first() != Some(&first) =>
        {
            Ok(trace.in_model(total, Some(first as usize))?)
        }
        _ => Ok(trace),
    }
}
