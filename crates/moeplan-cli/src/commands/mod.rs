//! One module per command; what several share lives here.

mod calibrate;
mod compare;
mod cross;
mod eval;
mod gen_trace;
mod inspect;
mod plan;
mod replay;
mod sweep;

use moeplan::LoadTrace;
use moeplan::data::Topology;
use moeplan::data::Workload;
use moeplan::data::model::{self, ModelPreset};
use moeplan::planners::{self, Planned, Planner, Prepared, Settings};

use crate::args::Command;
use crate::error::CliError;
use crate::io::emit;
use crate::report;

pub fn run(command: Command) -> Result<(), CliError> {
    match command {
        Command::Gen {
            source,
            tokens,
            out,
        } => gen_trace::run(&source, &tokens, &out),
        Command::Inspect {
            trace,
            positional,
            json,
            variation,
        } => inspect::run(trace, positional, json, variation),
        Command::Plan(args) => plan::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Cross(args) => cross::run(args),
        Command::Calibrate(args) => calibrate::run(args),
        Command::Hardware { json } => {
            if json {
                crate::io::emit_json_list("hardware", &moeplan::data::hardware::PRESETS);
            } else {
                emit(&report::hardware());
            }
            Ok(())
        }
        Command::Completions { shell } => {
            // Into a buffer first: `emit` is the one writer to stdout, and
            // a closed pipe is an error there, not a panic.
            let mut script = Vec::new();
            let mut cli = crate::help::command();
            clap_complete::generate(shell, &mut cli, "moeplan", &mut script);
            emit(&String::from_utf8_lossy(&script));
            Ok(())
        }
        Command::Presets => {
            emit(&report::presets());
            Ok(())
        }
        Command::Planners { json } => {
            let list = planners::describe();
            if json {
                crate::io::emit_json_list("planners", &list);
            } else {
                emit(&report::planners(&list));
            }
            Ok(())
        }
    }
}

/// The planner flags with the command's pricing (CRAFT's `--objective
/// time` prices replicas on `--hardware`): refused up front when the time
/// objective has no hardware, rather than as one failed row.
pub fn with_pricing(
    settings: &Settings,
    pricing: Option<&moeplan::judge::cost::Pricing>,
) -> Result<Settings, CliError> {
    let time = settings.get(moeplan::planners::OBJECTIVE.name)
        == Some(&moeplan::planners::Value::Word("time".into()));
    if time && pricing.is_none() {
        return Err(moeplan::Error::Argument(
            "--objective time plans for predicted time: name the hardware with --hardware (moeplan hardware lists them)".into(),
        )
        .into());
    }
    Ok(settings.clone().priced(pricing.cloned()))
}

/// One planner on `work` with `settings` (its budget, else its default),
/// the plan's name in reports (`eplb (+64)`, `craft (R = 8)`): the budget
/// is named even when planning it fails — and the planner's notes
/// ([`moeplan::planners::Prepared::notes`]: how it fell back), empty when
/// it could not prepare.
pub fn plan_with(
    planner: &dyn Planner,
    work: &Workload,
    topology: Topology,
    settings: &Settings,
) -> Made {
    let failed = |name, e| Made {
        name,
        planned: Err(e),
        notes: Vec::new(),
        ready: None,
    };
    let budget = match planner.budget().map(|spec| settings.budget(spec)) {
        Some(Err(e)) => return failed(planner.label(None), e),
        Some(Ok(b)) => b,
        None => None,
    };
    let ready = match planners::prepare(planner, work, topology, settings) {
        Ok(r) => r,
        Err(e) => return failed(planner.label(budget), e),
    };
    let notes = ready.notes();
    let shown = match budget {
        Some(b) => Some(b),
        None => ready.auto_budget().ok().flatten(),
    };
    let (name, planned) = match ready.plan(budget) {
        Ok(p) => (planner.label(p.budget), Ok(p)),
        Err(e) => (planner.label(shown), Err(e)),
    };
    Made {
        name,
        planned,
        notes,
        ready: Some(ready),
    }
}

/// What [`plan_with`] made: the plan's name in reports, the plan, the
/// planner's notes, and the prepared planner (a per-batch planner's
/// schedule comes from it: [`moeplan::planners::Prepared::schedule`]).
pub struct Made {
    pub name: String,
    pub planned: Result<Planned, moeplan::Error>,
    pub notes: Vec<String>,
    pub ready: Option<Box<dyn Prepared>>,
}

/// Plan part and evaluation part of a trace, and a phrase saying which.
pub fn split_for(
    trace: &LoadTrace,
    holdout: Option<f64>,
) -> Result<(LoadTrace, LoadTrace, String), CliError> {
    Ok(match holdout {
        Some(h) => {
            let s = trace.holdout_split(h)?;
            let scope = format!(
                "held-out: planned on {} batches, evaluated on the next {}",
                s.plan.num_batches(),
                s.eval.num_batches()
            );
            (s.plan, s.eval, scope)
        }
        None => (
            trace.clone(),
            trace.clone(),
            format!("in-sample: {} batch(es)", trace.num_batches()),
        ),
    })
}

/// Places the trace in the model named by `--model` / `--model-layers` (or
/// by the trace itself, when it names a preset but not its layer count), so
/// MoE layer ids are model layer ids and the layer count is known.
pub fn place_in_model(
    trace: LoadTrace,
    model_name: Option<&str>,
    model_layers: Option<usize>,
) -> Result<LoadTrace, CliError> {
    let preset: Option<&ModelPreset> = match model_name {
        Some(name) => Some(model::preset(name)?),
        None if trace.known_model_layers().is_none() => {
            trace.model().and_then(|n| model::preset(n).ok())
        }
        None => None,
    };
    if let Some(p) = preset
        && p.experts != trace.num_experts()
    {
        return Err(moeplan::Error::Mismatch(format!(
            "the trace has {} experts per layer, {} has {}",
            trace.num_experts(),
            p.name,
            p.experts
        ))
        .into());
    }
    let total = match (model_layers, preset) {
        (Some(n), Some(p)) if n != p.total_layers => {
            return Err(moeplan::Error::Argument(format!(
                "--model-layers {n}, but {} has {} layers",
                p.name, p.total_layers
            ))
            .into());
        }
        (Some(n), _) => n,
        (None, Some(p)) => p.total_layers,
        (None, None) => return Ok(trace),
    };
    let before = trace.layer_ids().first().copied();
    let placed = trace.in_model(total, preset.map(|p| p.first_moe_layer))?;
    if let (Some(from), Some(p)) = (before, preset) {
        let to = placed.layer_ids()[0];
        if to != from {
            eprintln!(
                "MoE layers {from}..{} of the trace are model layers {to}..{} ({}: {} dense layers first)",
                from as usize + placed.num_layers() - 1,
                to as usize + placed.num_layers() - 1,
                p.name,
                p.first_moe_layer
            );
        }
    }
    Ok(placed)
}
