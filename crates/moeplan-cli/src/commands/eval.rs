//! `moeplan eval`: replay a trace against any plan file moeplan writes
//! (detected by content) under a dispatch rule.

use moeplan::data::{Scope, fingerprint};
use moeplan::formats::PlanFormat;
use moeplan::formats::PlanMeta;
use moeplan::formats::{PlanContext, detect_plan, read_any_plan};
use moeplan::planners::{self, Settings};
use moeplan::{LoadTrace, Plan};

use super::place_in_model;
use crate::args::EvalArgs;
use crate::error::CliError;
use crate::io::{budget, emit, load, noted, progress_bar, read_limited, spin, spinner};
use crate::judge::{Cost, judge, judge_prepared};
use crate::report;
use moeplan::formats::dataset::{self, Dataset};

pub fn run(args: EvalArgs) -> Result<(), CliError> {
    // Per-rank files and token folders keep their sources: SGLang's static
    // rule routes whole ranks, local-first serves a rank's tokens at home,
    // so where tokens come from changes the balance and traffic they get.
    let Dataset { trace, sources } = load(&args.trace)?;
    let max_mib = args.trace.source.max_trace_mib;
    let bytes = read_limited(&args.plan, max_mib)?;
    let in_plan = CliError::in_file(&args.plan);
    let format = detect_plan(&bytes).map_err(&in_plan)?;
    // SGLang's rows are model layers: a trace of MoE rows only is placed in
    // its model first (by --model, or the preset the trace names).
    let trace = if args.judge.model.is_some() || format == PlanFormat::Sglang {
        place_in_model(trace, args.judge.model.as_deref(), None)?
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
            format.describe(),
            file.plan.topology().num_gpus()
        );
    }
    let (plan, meta) = (file.plan, file.meta);
    let trace = placed_like(trace, &plan, &meta)?;
    let cost = Cost::choose(args.judge.model.as_deref(), &trace)?.priced(&args.judge.cost)?;
    // Where the figures come from is decided here, from what the plan
    // records: its own trace (in-sample or held-out batches), another
    // trace, or unknown (older plan JSON, engines' files). The plan's
    // held-out fraction applies to its own trace only.
    let judged_fp = fingerprint(&trace);
    let provenance = plan.provenance();
    let own = provenance.is_none_or(|p| p.traces.iter().any(|t| t.fingerprint == judged_fp));
    let holdout = if args.in_sample {
        None
    } else {
        args.holdout.or(meta.holdout.filter(|_| own))
    };
    let all = trace.num_batches();
    let (evaluated, batches) = match holdout {
        Some(h) => {
            let split = trace.holdout_split(h)?;
            let cut = split.plan.num_batches();
            (split.eval, cut..all)
        }
        None => (trace, 0..all),
    };
    let scope = match provenance {
        Some(p) => p.scope(&judged_fp, batches.clone()),
        None => Scope::Unknown {
            batches: batches.clone(),
            holdout: holdout.is_some() && args.holdout.is_none(),
        },
    };
    let rule = args.judge.dispatch;
    // A plan made by a per-batch planner (Libra) is its static base: the
    // planner is online, so it is re-planned on the evaluated batches (its
    // options from the flags) and replayed through its schedule.
    let per_batch = planners::find(plan.algorithm())
        .ok()
        .filter(|p| p.per_batch() && format == PlanFormat::Moeplan);
    let work = noted(|n| dataset::workload(evaluated, &sources, batches, plan.topology(), n))?;
    let judge_of = cost.judge(work);
    let work = judge_of.workload();
    let judged = match per_batch {
        Some(planner) => {
            let settings = remade_with(planner, &meta, &args.planner.settings, &args.plan)?;
            let bar = spinner("re-planning per batch");
            let ready = planners::prepare(planner, work, plan.topology(), &settings)?;
            let judged = judge_prepared(&judge_of, ready.as_ref(), &plan, rule, &cost);
            bar.finish_and_clear();
            for note in ready.notes() {
                eprintln!("note: {note}");
            }
            if let Ok(j) = &judged {
                eprintln!(
                    "{}: a {} plan holds only the base an engine loads; replayed per batch on the evaluated batches under {} (--dispatch does not apply)",
                    args.plan.display(),
                    planner.display(),
                    j.replay.rule
                );
            }
            judged
        }
        None => {
            let bar = progress_bar(work.trace().num_layers(), "replaying");
            let judged = judge(&judge_of, &plan, rule, &cost, |done, total| {
                bar.set_position(done as u64);
                if done == total {
                    // the evaluator is done; the simulator runs next
                    spin(&bar, rule.name());
                }
            });
            bar.finish_and_clear();
            judged
        }
    };
    let mut judged = judged.map_err(&in_plan)?;
    // BASE (the core's one definition, planned on the judged batches at
    // the model's expert groups, or --groups: a plan file records none)
    // needs experts a multiple of the GPUs; without it, no speedup.
    let groups = moeplan::planners::groups(&args.planner.settings, work.trace())?;
    let base = judge_of
        .base_prediction(
            work.trace(),
            plan.topology(),
            groups,
            rule,
            cost.pricing.as_ref(),
        )
        .unwrap_or_else(|e| {
            eprintln!("note: no speedup: BASE is not possible here ({e})");
            None
        });
    judged.speedup_over(base.as_ref());
    // eval reports one plan, so it can afford the packing-aware bound that
    // compare, sweep and the page leave out (a schedule's bound counts its
    // copies per batch instead)
    if judged.report.bound_counts == moeplan::BoundCounts::ReplicasPerLayer {
        judged
            .report
            .add_packing_bound(work.trace(), &plan)
            .map_err(&in_plan)?;
    }
    let mut algorithm = plan.algorithm().to_string();
    if format != PlanFormat::Moeplan {
        algorithm = format!("{algorithm} ({})", format.describe());
    }
    if args.json {
        let mut v = judged.json();
        v["scope"] = scope.to_string().into();
        v["scope_kind"] = scope.kind().into();
        v["topology"] = serde_json::to_value(plan.topology()).unwrap_or_default();
        v["cost"] = cost.json();
        v["plan_format"] = format.describe().into();
        crate::io::emit_json(v);
    } else {
        emit(&report::eval(
            &judged,
            &algorithm,
            &plan,
            &scope.to_string(),
            &cost,
        ));
    }
    Ok(())
}

/// The options a plan is re-made with: those its file records (every
/// option of the planner as it ran), each flag given to `eval` overriding
/// one — and saying so; an older file that records none is re-made with
/// the flags and the defaults, and that is said too.
fn remade_with(
    planner: &dyn planners::Planner,
    meta: &PlanMeta,
    flags: &Settings,
    file: &std::path::Path,
) -> Result<Settings, CliError> {
    let spec = planner.spec();
    let Some(recorded) = &meta.options else {
        eprintln!(
            "note: {} records no planner options (written before they were kept): {} is re-planned with the flags given and its defaults",
            file.display(),
            spec.display
        );
        return Ok(flags.clone());
    };
    let mut settings = recorded.clone();
    for o in spec.options {
        let Some(given) = flags.get(o.name) else {
            continue;
        };
        let was = recorded.value(o);
        if given != was {
            let flag = crate::args::flag_for(o.name);
            match o.kind {
                planners::OptionKind::Flag => {
                    eprintln!(
                        "note: --{flag} overrides the plan file's {} = {was}",
                        o.name
                    )
                }
                _ => eprintln!("note: --{flag} {given} overrides the plan file's {was}"),
            }
        }
        settings.set(o.name, given.clone())?;
    }
    Ok(settings)
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
