//! The CLI's side of judging: the model and the pricing its flags choose
//! ([`Cost`]), handed to the core's one judge ([`moeplan::judge::Judge`]),
//! which measures every plan.

use std::sync::Arc;

use moeplan::judge::cost::Pricing;
use moeplan::judge::{Judge, ModelChoice, Rule, Served};
use moeplan::planners::Prepared;
use moeplan::{LoadTrace, Plan, Workload};
use serde_json::{Value, json};

use crate::judged::Judged;

/// The model `--model` (else the trace) names and, with `--hardware`, the
/// pricing on it: chosen once, by the core's one rule.
#[derive(Debug, Clone)]
pub struct Cost {
    pub choice: ModelChoice,
    pub pricing: Option<Pricing>,
}

impl Cost {
    /// `--model`, else the trace's model when it is a preset, else
    /// DeepSeek-V3 ([`ModelChoice::choose`]).
    pub fn choose(model: Option<&str>, trace: &LoadTrace) -> Result<Cost, moeplan::Error> {
        Ok(Cost {
            choice: ModelChoice::choose(model, trace)?,
            pricing: None,
        })
    }

    /// The same model priced on `--hardware` with the flags' assumptions
    /// (unchanged without `--hardware`).
    pub fn priced(mut self, args: &crate::args::CostArgs) -> Result<Cost, crate::error::CliError> {
        let Some(name) = &args.hardware else {
            return Ok(self);
        };
        let hardware = crate::io::hardware(name)?;
        self.pricing = Some(Pricing {
            assumptions: args.assumptions()?,
            ..Pricing::new(&hardware, self.choice.preset)
        });
        Ok(self)
    }

    /// The core's judge of `work` on this model.
    pub fn judge(&self, work: impl Into<Arc<Workload>>) -> Judge {
        Judge::with_model(work, self.choice)
    }

    /// One phrase for the tables: whose sizes turn pairs into bytes.
    pub fn describe(&self) -> String {
        let whose = match self.choice.from {
            "asked" => "",
            "the trace" => ", the trace's model",
            _ => ", the default: name the model with --model",
        };
        let c = self.choice.cost();
        format!(
            "{} × {} bytes per pair ({}'s hidden size in bf16{whose})",
            c.hidden, c.bytes_per_activation, self.choice.preset.name
        )
    }

    pub fn json(&self) -> Value {
        let c = self.choice.cost();
        json!({
            "model": self.choice.preset.name,
            "hidden": c.hidden,
            "bytes_per_activation": c.bytes_per_activation,
            "from": if self.choice.from == "asked" { "--model" } else { self.choice.from },
        })
    }
}

/// `plan` judged by `judge` under `rule`, priced with `cost`'s pricing;
/// `progress(done, total)` follows the evaluator's layers.
pub fn judge(
    judge: &Judge,
    plan: &Plan,
    rule: Rule,
    cost: &Cost,
    progress: impl FnMut(usize, usize),
) -> Result<Judged, moeplan::Error> {
    let v = judge.verdict(Served::Plan { plan, rule }, cost.pricing.as_ref(), progress)?;
    Ok(Judged::of(v, None, judge.cost().expert_bytes))
}

/// [`judge`] with no progress shown.
pub fn judge_quietly(
    j: &Judge,
    plan: &Plan,
    rule: Rule,
    c: &Cost,
) -> Result<Judged, moeplan::Error> {
    judge(j, plan, rule, c, |_, _| {})
}

/// `base` as its prepared planner serves it: a per-batch planner (Libra)
/// through its schedule under the schedule's own rule (`rule` does not
/// apply: its dispatch is part of the method), any other under `rule`.
pub fn judge_prepared(
    j: &Judge,
    ready: &dyn Prepared,
    base: &Plan,
    rule: Rule,
    cost: &Cost,
) -> Result<Judged, moeplan::Error> {
    let schedule = ready.schedule(base, j.workload())?;
    let served = match &schedule {
        Some(schedule) => Served::Schedule { base, schedule },
        None => Served::Plan { plan: base, rule },
    };
    let v = j.verdict(served, cost.pricing.as_ref(), |_, _| {})?;
    Ok(Judged::of(v, schedule, j.cost().expert_bytes))
}
