//! `moeplan plan`: compute a plan and write it in the format an engine
//! loads; with `--dispatch`, also say how it balances under that rule.

use std::sync::Arc;

use moeplan::Workload;
use moeplan::data::{Provenance, TraceRef, fingerprint};
use moeplan::formats::PlanMeta;
use moeplan::formats::{self, PlanFormat};
use moeplan::formats::{PlanContext, read_any_plan};
use moeplan::judge::Judge;
use moeplan::judge::Rule;
use moeplan::judge::{Migration, MoveCost, migration, relabel};
use moeplan::planners::{CraftOptions, Goal, REPLICAS_PER_GPU, ReplicaBudget, incremental};
use moeplan::studies::{self, Mix};
use moeplan::{LoadTrace, Plan, Topology};

use super::{place_in_model, plan_with, with_pricing};
use crate::args::PlanArgs;
use crate::error::CliError;
use crate::io::{budget, is_stdout, load, noted, read_limited, shown, spinner, write_file};
use crate::judge::{Cost, judge_quietly};
use moeplan::formats::dataset::{self, Dataset, Split};
use serde_json::json;

pub fn run(args: PlanArgs) -> Result<(), CliError> {
    if args.trace.traces.len() > 1 {
        return run_mix(args);
    }
    // Sources kept: a planner may read them (GRACE's affinities come from
    // token routes), and `--dispatch` replays them.
    let Dataset { trace, sources } = load(&args.trace.nth(0))?;
    if args.trace.weights.is_some() {
        return Err(moeplan::Error::Argument(
            "--weights needs several --trace files (one weight per trace)".into(),
        )
        .into());
    }
    let trace = place_in_model(trace, args.model.as_deref(), args.model_layers)?;
    // Refused before planning: the file needs it, and planning can take a while.
    needs_model_layers(args.format, &trace)?;
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    // --dispatch judges the plan; --hardware prices it (under `even`
    // unless --dispatch names a rule).
    let cost = match (args.dispatch, &args.cost.hardware) {
        (None, None) => None,
        _ => Some(Cost::choose(args.model.as_deref(), &trace)?.priced(&args.cost)?),
    };
    // What the file and the messages need from the whole trace, before it
    // moves into the workload planned on (no copy of the counts).
    let model_layers = trace.known_model_layers();
    let model_name = args
        .model
        .clone()
        .or_else(|| trace.model().map(str::to_string));
    let total_batches = trace.num_batches();
    // The fingerprint of the whole trace, held-out batches included, so
    // `eval` can tell this trace (and which of its batches were seen) from
    // another one.
    let whole = fingerprint(&trace);
    let rule = args
        .dispatch
        .or(args.cost.hardware.as_ref().map(|_| Rule::Even));
    let Split {
        planning, held_out, ..
    } = noted(|n| dataset::split(trace, &sources, args.holdout, topology, rule, n))?;
    drop(sources);
    let provenance = Provenance {
        traces: vec![TraceRef {
            fingerprint: whole,
            batches: total_batches,
            planned: [0, planning.trace().num_batches()],
            weight: None,
        }],
    };
    // CRAFT planning for time (--objective time) prices on --hardware.
    let settings = with_pricing(
        &args.planner.settings,
        cost.as_ref().and_then(|c| c.pricing.as_ref()),
    )?;
    let planner = args.algo.planner()?;
    if args.planner.robust {
        eprintln!(
            "note: --objective robust maximises the worst case over several --trace files; on one trace it is CRAFT's mean objective"
        );
    }
    let bar = spinner("planning");
    let made = plan_with(planner, &planning, topology, &settings);
    let (planned, notes) = (made.planned, made.notes);
    bar.finish_and_clear();
    for note in &notes {
        eprintln!("note: {note}");
    }
    let plan = planned?.plan.with_provenance(Some(provenance));
    finish(
        args,
        plan,
        ToWrite {
            planning: Arc::new(planning),
            held_out: held_out.map(Arc::new),
            model_layers,
            model_name,
            total_batches,
            topology,
            cost,
            rule,
        },
    )
}

/// `--from`: the new plan relabelled onto the current one's GPUs, and
/// what moving to it copies, as planned and relabelled.
fn from_current(
    path: &std::path::Path,
    args: &PlanArgs,
    plan: Plan,
    judge: &Judge,
    topology: Topology,
    cost: Option<&Cost>,
) -> Result<Plan, CliError> {
    let planned_on = judge.trace();
    let max_mib = args.trace.source.max_trace_mib;
    let bytes = read_limited(path, max_mib)?;
    let ctx = PlanContext {
        budget: budget(max_mib),
        ..PlanContext::for_trace(planned_on, Some(topology))
    };
    let in_file = CliError::in_file(path);
    let current = read_any_plan(&bytes, &ctx).map_err(&in_file)?.plan;
    // --hardware's pricing (its model and precision), else the model
    // --model or the trace names, in its checkpoint's precision, priced
    // on h100-ib-ndr's links.
    let pricing = match cost.and_then(|c| c.pricing.clone()) {
        Some(p) => p,
        None => judge.priced_on(moeplan::data::hardware::preset("h100-ib-ndr")?),
    };
    let (hardware, preset) = (&pricing.hardware, &pricing.model);
    let relabelled =
        relabel(&current, &plan, MoveCost::for_hardware(hardware)).map_err(&in_file)?;
    let (naive, ours) = (
        migration(&current, &plan)?,
        migration(&current, &relabelled)?,
    );
    let expert_bytes = pricing.assumptions.expert_bytes(preset);
    let line = |m: &Migration| {
        let (intra, inter) = m.bytes(expert_bytes);
        format!(
            "{} copies in {} of {} layers ({:.2} GB inside nodes, {:.2} GB across), a {:.1} ms pause on {}",
            m.copies(),
            m.layers_changed,
            plan.layers().len(),
            intra / 1e9,
            inter / 1e9,
            m.time_us(hardware, expert_bytes) / 1e3,
            hardware.name
        )
    };
    eprintln!(
        "from {}: the new plan as numbered moves {}; relabelled onto its GPUs, {} (same balance and slots per GPU; {}'s experts at {} bytes each)",
        path.display(),
        line(&naive),
        line(&ours),
        preset.name,
        expert_bytes
    );
    if args.max_moved_experts.is_none() && args.min_balancedness.is_none() {
        return Ok(relabelled);
    }
    if let Some(b) = args.min_balancedness
        && !(0.0..=1.0).contains(&b)
    {
        return Err(moeplan::Error::Argument(format!(
            "--min-balancedness {b} must be between 0 and 1"
        ))
        .into());
    }
    let goal = Goal {
        max_moved_experts: args.max_moved_experts,
        min_balancedness: args.min_balancedness,
    };
    let adjusted = incremental(&current, planned_on.summed().view(), goal)?;
    let bal = |p: &Plan| judge.eval_report(p).map(|r| r.balancedness);
    eprintln!(
        "incremental (the current plan adjusted, {} moves): balancedness {:.4} → {:.4} on the planning batches, {}; the fresh plan relabelled: {:.4}",
        adjusted.moves,
        bal(&current)?,
        bal(&adjusted.plan)?,
        line(&migration(&current, &adjusted.plan)?),
        bal(&relabelled)?
    );
    Ok(adjusted.plan)
}

/// What writing and reporting a plan needs besides the plan.
struct ToWrite {
    planning: Arc<Workload>,
    held_out: Option<Arc<Workload>>,
    model_layers: Option<usize>,
    model_name: Option<String>,
    total_batches: usize,
    topology: Topology,
    cost: Option<Cost>,
    rule: Option<moeplan::judge::Rule>,
}

/// `plan` with several `--trace`: one plan for the mix (`moeplan::studies::across`).
/// EPLB and BASE read the weighted sum of the traces' loads (what an engine
/// accumulates); CRAFT with `--objective robust` the worst case over the
/// traces; every other planner the traces' batches weighted by repetition.
fn run_mix(args: PlanArgs) -> Result<(), CliError> {
    if args.holdout.is_some() {
        return Err(moeplan::Error::Argument(
            "--holdout takes one trace; with several --trace files, judge the plan on another trace with `eval` or `cross`".into(),
        )
        .into());
    }
    let mut traces = Vec::with_capacity(args.trace.traces.len());
    for i in 0..args.trace.traces.len() {
        let t = load(&args.trace.nth(i))?.trace;
        traces.push(place_in_model(t, args.model.as_deref(), args.model_layers)?);
    }
    let mix = Mix::new(traces, args.trace.weights.as_deref())?;
    let first = mix
        .traces()
        .first()
        .ok_or_else(|| moeplan::Error::Argument("no trace".into()))?;
    needs_model_layers(args.format, first)?;
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let cost = match (args.dispatch, &args.cost.hardware) {
        (None, None) => None,
        _ => Some(Cost::choose(args.model.as_deref(), first)?.priced(&args.cost)?),
    };
    let model_layers = first.known_model_layers();
    let model_name = args
        .model
        .clone()
        .or_else(|| first.model().map(str::to_string));
    let settings = with_pricing(
        &args.planner.settings,
        cost.as_ref().and_then(|c| c.pricing.as_ref()),
    )?;
    let planner = args.algo.planner()?;
    let id = planner.id().as_str();
    let summed = matches!(id, "eplb" | "base");
    if args.planner.robust && id != "craft" {
        return Err(moeplan::Error::Argument(format!(
            "--objective robust is CRAFT's (--algo craft), not {id}'s"
        ))
        .into());
    }
    let planning = Workload::new(if summed {
        mix.weighted_sum()?
    } else {
        mix.combined()?
    });
    let shares = |w: &[f64]| {
        w.iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let bar = spinner("planning on every trace");
    let plan = if args.planner.robust {
        let options = CraftOptions::from_settings(&settings)?;
        let budget = settings
            .budget(&REPLICAS_PER_GPU)?
            .map_or(ReplicaBudget::Auto, ReplicaBudget::ReplicasPerGpu);
        let robust =
            studies::craft_robust(&mix, topology, &options, budget, studies::ROBUST_ROUNDS)?;
        bar.finish_and_clear();
        for (k, r) in robust.rounds.iter().enumerate() {
            eprintln!(
                "robust round {k}: shares {} → balancedness {} (worst {:.4}){}",
                shares(&r.weights),
                shares(&r.balancedness),
                r.worst(),
                if k == robust.best { ", kept" } else { "" }
            );
        }
        robust.plan
    } else {
        let made = plan_with(planner, &planning, topology, &settings);
        bar.finish_and_clear();
        for note in &made.notes {
            eprintln!("note: {note}");
        }
        if !summed {
            eprintln!(
                "planned on {} traces' batches, shares {} (asked {})",
                mix.traces().len(),
                shares(&mix.realised_weights()),
                shares(mix.weights())
            );
        }
        made.planned?.plan
    };
    let plan = plan.with_provenance(Some(mix.provenance()?));
    let total_batches = planning.trace().num_batches();
    let rule = args
        .dispatch
        .or(args.cost.hardware.as_ref().map(|_| Rule::Even));
    finish(
        args,
        plan,
        ToWrite {
            planning: Arc::new(planning),
            held_out: None,
            model_layers,
            model_name,
            total_batches,
            topology,
            cost,
            rule,
        },
    )
}

/// Pads or fixes the plan for its format, writes it, and reports.
fn finish(args: PlanArgs, plan: Plan, made: ToWrite) -> Result<(), CliError> {
    let ToWrite {
        planning,
        held_out,
        model_layers,
        model_name,
        total_batches,
        topology,
        cost,
        rule,
    } = made;
    if args.json && is_stdout(&args.out) {
        return Err(moeplan::Error::Argument(
            "--json and --out - both print to stdout: write the plan to a file".into(),
        )
        .into());
    }
    let planned_on = planning.trace();
    // The planning batches judged: on --model (else the trace's) model.
    let judge = match &cost {
        Some(c) => c.judge(planning.clone()),
        None => Judge::new(planning.clone(), args.model.as_deref())?,
    };
    let needs_uniform = args.format.needs_uniform_slots();
    let plan = if needs_uniform && plan.uniform_slots_per_gpu().is_none() {
        if args.no_pad {
            return Err(moeplan::Error::Export {
                format: "sglang/vllm/vllm-ascend/trtllm",
                message: format!(
                    "this {} plan has different slot counts per GPU or layer, which the format cannot express; without --no-pad it is padded to the closest plan that fits",
                    plan.algorithm()
                ),
            }
            .into());
        }
        let padded = plan.padded_to_uniform(planned_on.summed().view())?;
        eprintln!(
            "note: {} holds one expert count per GPU: this {} plan was padded to {} slots per GPU in every layer, {} more replicas (--no-pad refuses instead)",
            args.format.name(),
            plan.algorithm(),
            padded.uniform_slots_per_gpu().unwrap_or(0),
            padded.summary().replicas - plan.summary().replicas
        );
        padded
    } else {
        plan
    };
    let plan = if args.format == PlanFormat::VllmAscend {
        without_same_gpu_copies(plan, &judge, rule, cost.as_ref())?
    } else {
        plan
    };
    let plan = match &args.from {
        Some(path) => from_current(path, &args, plan, &judge, topology, cost.as_ref())?,
        None => plan,
    };
    let meta = PlanMeta {
        // Only a known count: an assumed one would let a later export trust
        // layer ids that may be MoE positions.
        model_layers,
        model: model_name,
        holdout: args.holdout,
        // every option of the planner as it ran, so `eval` can re-make a
        // per-batch plan as it was made
        options: args
            .algo
            .planner()
            .ok()
            .map(|p| args.planner.settings.resolved_for(p.spec())),
    };
    let text = args.format.write(&plan, &meta)?;
    write_file(&args.out, &text)?;
    let s = plan.summary();
    eprintln!(
        "wrote {}: {} plan for {topology}, {} layers, {} replicas, {}..{} slots per GPU{}",
        shown(&args.out),
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
    let mut judged = Vec::new();
    if let (Some(rule), Some(cost)) = (rule, &cost) {
        let mut parts = vec![("planned", judge.clone())];
        if let Some(ev) = &held_out {
            parts.push(("held-out", cost.judge(ev.clone())));
        }
        for (name, work) in parts {
            let on = work.trace();
            let j = judge_quietly(&work, &plan, rule, cost)?;
            if args.json {
                judged.push(json!({
                    "on": name,
                    "batches": on.num_batches(),
                    "judged": j.json(),
                }));
            }
            eprintln!(
                "under {} dispatch ({}), on the {} {} batch(es): balancedness {:.4}, imbalance {:.4}, local {:.1}%, cross-node {:.1}% ({:.3} GB at {})",
                j.replay.rule,
                j.replay.sources,
                on.num_batches(),
                name,
                j.report.balancedness,
                j.report.imbalance_ratio,
                j.local_pct(),
                j.cross_node_pct(),
                j.cross_node_gb(),
                cost.describe()
            );
            if let Some(p) = &j.predicted {
                eprintln!(
                    "  predicted on {} ({}): step {:.3} ms, {:.0} tokens/s; MoE layer {:.1} µs = compute {:.1} + dispatch {:.1} + combine {:.1}; KV cache {:.1} GiB per GPU",
                    p.hardware,
                    p.model,
                    p.step_ms,
                    p.tokens_per_s,
                    p.moe_layer_us,
                    p.compute_us,
                    p.dispatch_us,
                    p.combine_us,
                    p.kv_cache_gib_per_gpu
                );
            }
        }
    }
    if args.json {
        crate::io::emit_json(json!({
                "out": shown(&args.out),
                "format": args.format.name(),
                "algorithm": plan.algorithm(),
            "topology": topology,
            "layers": plan.layers().len(),
                "replicas": s.replicas,
                "slots_per_gpu": { "min": s.slots_per_gpu_min, "max": s.slots_per_gpu_max },
                "planned_batches": planned_on.num_batches(),
                "batches": total_batches,
            "judged": judged,
        }));
    }
    Ok(())
}

/// SGLang's rows and TensorRT-LLM's keys are model layers: a trace that
/// does not know its model is refused before planning, by the writers' own
/// check ([`formats::check_model_layers`]).
fn needs_model_layers(format: PlanFormat, trace: &LoadTrace) -> Result<(), CliError> {
    let Some(file) = format.model_keyed() else {
        return Ok(());
    };
    formats::check_model_layers(
        file,
        trace.layer_ids(),
        trace.num_experts(),
        trace.known_model_layers(),
    )?;
    Ok(())
}

/// vllm-ascend gives each expert one slot per device: second copies on one
/// GPU are swapped away (slot and copy counts kept), and the balance change
/// is reported (under `--dispatch` when given, else the even split).
fn without_same_gpu_copies(
    plan: Plan,
    work: &Judge,
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
            work.eval_report(&plan)?.balancedness,
            work.eval_report(&fixed)?.balancedness,
            String::new(),
        ),
    };
    eprintln!(
        "vllm-ascend holds one copy of an expert per device: moved {n} second copies to other devices (balancedness on the planned batches{under} {before:.4} → {after:.4})"
    );
    Ok(fixed)
}
