//! One module per command; what several share lives here.

mod compare;
mod eval;
mod gen_trace;
mod inspect;
mod plan;
mod sweep;

use moeplan::model::{self, ModelPreset};
use moeplan::planners::craft::{Craft, CraftOptions};
use moeplan::planners::{Budget, EplbConfig, base, contiguous, eplb};
use moeplan::{LoadTrace, Plan, Topology};

use crate::args::{Algo, ClusterArgs, Command};
use crate::error::CliError;
use crate::io::emit;
use crate::report;

pub fn run(command: Command) -> Result<(), CliError> {
    match command {
        Command::Gen { source, out } => gen_trace::run(&source, &out),
        Command::Inspect {
            trace,
            source,
            json,
        } => inspect::run(trace, source, json),
        Command::Plan(args) => plan::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Presets => {
            emit(&report::presets());
            Ok(())
        }
    }
}

pub fn make_plan(
    algo: Algo,
    trace: &LoadTrace,
    topology: Topology,
    cluster: &ClusterArgs,
    redundant: usize,
    budget: Budget,
    options: &CraftOptions,
) -> Result<Plan, moeplan::Error> {
    match algo {
        Algo::Eplb => eplb(
            trace,
            topology,
            EplbConfig {
                redundant_experts: redundant,
                groups: cluster.groups,
            },
        ),
        Algo::Base => base(trace, topology, cluster.groups),
        Algo::Contiguous => contiguous(trace, topology),
        Algo::Craft => Ok(Craft::prepare(trace, topology, options)?.plan(budget)?.plan),
    }
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

pub fn algo_name(algo: Algo, k: usize) -> String {
    match algo {
        Algo::Eplb => format!("eplb (+{k})"),
        Algo::Base => "base".into(),
        Algo::Contiguous => "contiguous".into(),
        Algo::Craft => "craft (R = 8)".into(),
    }
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
    if let Some(p) = preset {
        if p.experts != trace.num_experts() {
            return Err(moeplan::Error::Mismatch(format!(
                "the trace has {} experts per layer, {} has {}",
                trace.num_experts(),
                p.name,
                p.experts
            ))
            .into());
        }
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
