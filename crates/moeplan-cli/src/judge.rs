//! A plan judged on a trace under a dispatch rule, through the core's one
//! entry point (`moeplan::judge::judge`), with what the CLI adds: where the
//! sizes that turn pairs into bytes came from, and the JSON it prints.

use moeplan::Workload;
use moeplan::judge::cost::{Assumptions, Kernel, Overlap, Phase, Prediction, Pricing};
use moeplan::judge::{CostModel, Messages, ModelChoice, Report, Rule, Schedule, Served};
use moeplan::planners::Prepared;
use moeplan::{EvalReport, LoadTrace, Plan, data::model};
use serde_json::{Value, json};

/// The sizes that turn pairs into bytes, and where they came from; with
/// `--hardware`, the pricing that turns them into time.
#[derive(Debug, Clone)]
pub struct Cost {
    pub model: CostModel,
    pub pricing: Option<Pricing>,
    /// The preset whose hidden size is used.
    pub preset: &'static str,
    /// `--model`, `the trace` or `default`.
    pub from: &'static str,
}

impl Cost {
    /// `--model`, else the trace's model when it is a preset, else
    /// DeepSeek-V3: the core's one choice ([`ModelChoice::choose`]).
    pub fn choose(model: Option<&str>, trace: &LoadTrace) -> Result<Cost, moeplan::Error> {
        let chosen = ModelChoice::choose(model, trace)?;
        Ok(Cost {
            model: chosen.cost(),
            pricing: None,
            preset: chosen.preset.name,
            from: match chosen.from {
                "asked" => "--model",
                other => other,
            },
        })
    }

    /// The same cost priced on `--hardware` with the flags' assumptions
    /// (unchanged without `--hardware`).
    pub fn priced(mut self, args: &crate::args::CostArgs) -> Result<Cost, crate::error::CliError> {
        let Some(name) = &args.hardware else {
            return Ok(self);
        };
        let hardware = crate::io::hardware(name)?;
        let assumptions = Assumptions {
            phase: if args.phase == "decode" {
                Phase::Decode
            } else {
                Phase::Prefill
            },
            dispatch_fp8: !args.bf16_dispatch,
            kernel: if args.kernel == "low-latency" {
                Kernel::LowLatency
            } else {
                Kernel::Normal
            },
            peer_buffer_tokens: args.peer_buffer_tokens,
            context_tokens: args.context,
            memory_fraction: args.memory_fraction,
            attention_tp: args.attention_tp,
            bytes_per_weight: args
                .weight_precision
                .as_deref()
                .map(|w| if w == "fp8" { 1 } else { 2 }),
            overlap: if args.overlap == "tbo" {
                Overlap::Tbo
            } else {
                Overlap::None
            },
        };
        assumptions.check()?;
        self.pricing = Some(Pricing {
            hardware,
            model: *model::preset(self.preset)?,
            assumptions,
        });
        Ok(self)
    }

    /// One phrase for the tables: whose sizes turn pairs into bytes.
    pub fn describe(&self) -> String {
        let whose = match self.from {
            "--model" => "",
            "the trace" => ", the trace's model",
            _ => ", the default: name the model with --model",
        };
        format!(
            "{} × {} bytes per pair ({}'s hidden size in bf16{whose})",
            self.model.hidden, self.model.bytes_per_activation, self.preset
        )
    }

    pub fn json(&self) -> Value {
        json!({
            "model": self.preset,
            "hidden": self.model.hidden,
            "bytes_per_activation": self.model.bytes_per_activation,
            "from": self.from,
        })
    }
}

/// One plan judged under one rule.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The evaluator's report, balance replaced by the rule's.
    pub report: EvalReport,
    /// Everything the simulator measured.
    pub sim: Report,
    /// A per-batch planner's schedule (Libra), when the plan was served
    /// through one: `report` is then the base's with the schedule's balance.
    pub schedule: Option<Schedule>,
    /// Bytes of one expert's weights (the cost model's).
    pub expert_bytes: u64,
    /// Time, memory and throughput on `--hardware`.
    pub predicted: Option<Prediction>,
}

/// Judges `plan` on `work` under `rule`; `progress(done, total)` follows
/// the evaluator's layers.
pub fn judge(
    work: &Workload,
    plan: &Plan,
    rule: Rule,
    cost: &Cost,
    progress: impl FnMut(usize, usize),
) -> Result<Judged, moeplan::Error> {
    let v = moeplan::judge::judge(
        work,
        Served::Plan { plan, rule },
        &cost.model,
        cost.pricing.as_ref(),
        progress,
    )?;
    Ok(Judged {
        report: v.report,
        sim: v.sim,
        schedule: None,
        expert_bytes: cost.model.expert_bytes,
        predicted: v.predicted,
    })
}

/// `base` as its prepared planner serves it on `work`: a per-batch planner
/// (Libra) through its schedule under the schedule's own rule (`rule` does
/// not apply: its dispatch is part of the method), any other under `rule`.
pub fn judge_prepared(
    work: &Workload,
    ready: &dyn Prepared,
    base: &Plan,
    rule: Rule,
    cost: &Cost,
) -> Result<Judged, moeplan::Error> {
    match ready.schedule(base, work)? {
        Some(s) => judge_schedule(work, base, s, cost),
        None => judge_quietly(work, base, rule, cost),
    }
}

/// `base` served through `schedule` (see [`moeplan::judge::judge`]).
pub fn judge_schedule(
    work: &Workload,
    base: &Plan,
    schedule: Schedule,
    cost: &Cost,
) -> Result<Judged, moeplan::Error> {
    let served = Served::Schedule {
        base,
        schedule: &schedule,
    };
    let v = moeplan::judge::judge(work, served, &cost.model, cost.pricing.as_ref(), |_, _| {})?;
    Ok(Judged {
        report: v.report,
        sim: v.sim,
        schedule: Some(schedule),
        expert_bytes: cost.model.expert_bytes,
        predicted: v.predicted,
    })
}

/// [`judge`] with no progress shown.
pub fn judge_quietly(
    work: &Workload,
    plan: &Plan,
    rule: Rule,
    cost: &Cost,
) -> Result<Judged, moeplan::Error> {
    judge(work, plan, rule, cost, |_, _| {})
}

impl Judged {
    /// The report as JSON: the evaluator's keys, plus `dispatch`, `sources`,
    /// `predictions` (GRACE's rules: what they predict loads from),
    /// `traffic` (with `messages`, null without token routes) and
    /// `per_batch_imbalance_ratio`.
    pub fn json(&self) -> Value {
        let mut v = serde_json::to_value(&self.report).unwrap_or_default();
        let t = &self.sim.traffic;
        v["dispatch"] = self.sim.rule.clone().into();
        v["sources"] = self.sim.sources.clone().into();
        if let Some(p) = &self.sim.predictions {
            v["predictions"] = p.clone().into();
        }
        v["traffic"] = json!({
            "local": t.local,
            "intra_node": t.intra_node,
            "cross_node": t.cross_node,
            "cross_node_bytes": t.cross_node_bytes,
            "max_gpu_ingress": t.max_ingress,
            // token messages (a token once per destination GPU / node):
            // null without token routes, which alone say which pairs share
            // a token
            "messages": t.messages,
        });
        v["per_batch_imbalance_ratio"] = json!(self.sim.per_batch_imbalance_ratio);
        v["per_batch_balancedness"] = json!(self.sim.per_batch);
        v["per_batch_bytes_moved"] = json!(self.per_batch_bytes_moved());
        v["bytes_moved"] = json!(self.sim.bytes_moved);
        v["schedule"] = match &self.schedule {
            // What Libra copies: every layer of every batch refills its
            // buffers, more than the slots that differ between batches
            // (`per_batch_bytes_moved`).
            Some(s) => json!({
                "about": s.about,
                "rule": s.strategy.rule.name(),
                "extra_slots_per_gpu": s.extra_slots_per_gpu,
                "resident_slots_per_gpu": s.resident_slots_per_gpu,
                "per_batch_copies": s.copies_per_batch,
                "per_batch_bytes_copied": s.bytes_copied(self.expert_bytes),
            }),
            None => Value::Null,
        };
        if let Some(p) = &self.predicted {
            v["predicted"] = serde_json::to_value(p).unwrap_or_default();
        }
        v
    }

    /// Expert bytes the placement moves before each batch (the simulator's
    /// moves between consecutive plans; all zero for a static plan).
    pub fn per_batch_bytes_moved(&self) -> Vec<u64> {
        let mut out = vec![0; self.sim.batches];
        for m in &self.sim.moves {
            if let Some(b) = out.get_mut(m.at_batch) {
                *b += m.bytes;
            }
        }
        out
    }

    /// Share of pairs served on their own GPU, in percent.
    pub fn local_pct(&self) -> f64 {
        pct(self.sim.traffic.local, self.sim.traffic.pairs)
    }

    /// Share of pairs served on another node, in percent.
    pub fn cross_node_pct(&self) -> f64 {
        pct(self.sim.traffic.cross_node, self.sim.traffic.pairs)
    }

    /// Token messages, when the workload has token routes.
    pub fn messages(&self) -> Option<&Messages> {
        self.sim.traffic.messages.as_ref()
    }

    /// Cross-node bytes in GB (10⁹ bytes).
    pub fn cross_node_gb(&self) -> f64 {
        self.sim.traffic.cross_node_bytes / 1e9
    }
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// BASE's prediction under `rule` on `work`, planned on `planning`: what
/// every priced plan's speedup is over. `None` without `--hardware`.
pub fn base_prediction(
    planning: &LoadTrace,
    work: &Workload,
    topology: moeplan::Topology,
    rule: Rule,
    cost: &Cost,
) -> Result<Option<Prediction>, moeplan::Error> {
    if cost.pricing.is_none() {
        return Ok(None);
    }
    let base = moeplan::planners::base(planning, topology, 1)?;
    Ok(judge_quietly(work, &base, rule, cost)?.predicted)
}

impl Judged {
    /// Sets the prediction's speedup over `base`'s throughput.
    pub fn speedup_over(&mut self, base: Option<&Prediction>) {
        if let (Some(p), Some(b)) = (&mut self.predicted, base) {
            p.compare_with(b);
        }
    }
}
