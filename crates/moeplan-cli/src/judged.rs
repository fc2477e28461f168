//! What the CLI keeps and prints of a core verdict
//! ([`moeplan::judge::Verdict`]): the report, the replay, a per-batch
//! planner's schedule, and their JSON.

use moeplan::EvalReport;
use moeplan::judge::cost::Prediction;
use moeplan::judge::{Messages, Replay, Schedule, Verdict};
use serde_json::{Value, json};

/// One plan judged under one rule.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The evaluator's report, balance replaced by the rule's.
    pub report: EvalReport,
    /// Everything the replay under the rule measured.
    pub replay: Replay,
    /// A per-batch planner's schedule (Libra), when the plan was served
    /// through one: `report` is then the base's with the schedule's balance.
    pub schedule: Option<Schedule>,
    /// Bytes of one expert's weights (the cost model's).
    pub expert_bytes: u64,
    /// Time, memory and throughput on `--hardware`.
    pub predicted: Option<Prediction>,
}

impl Judged {
    /// A verdict as the CLI keeps it; `schedule` when it was served
    /// through one, `expert_bytes` the judge's model's.
    pub fn of(v: Verdict, schedule: Option<Schedule>, expert_bytes: u64) -> Judged {
        Judged {
            report: v.report,
            replay: v.replay,
            schedule,
            expert_bytes,
            predicted: v.predicted,
        }
    }

    /// Sets the prediction's speedup over `base`'s throughput.
    pub fn speedup_over(&mut self, base: Option<&Prediction>) {
        if let (Some(p), Some(b)) = (&mut self.predicted, base) {
            p.compare_with(b);
        }
    }

    /// The report as JSON: the evaluator's keys, plus `dispatch`, `sources`,
    /// `predictions` (GRACE's rules: what they predict loads from),
    /// `traffic` (with `messages`, null without token routes) and
    /// `per_batch_imbalance_ratio`.
    pub fn json(&self) -> Value {
        let mut v = serde_json::to_value(&self.report).unwrap_or_default();
        let t = &self.replay.traffic;
        v["dispatch"] = self.replay.rule.clone().into();
        v["sources"] = self.replay.sources.clone().into();
        if let Some(p) = &self.replay.predictions {
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
        v["per_batch_imbalance_ratio"] = json!(self.replay.per_batch_imbalance_ratio);
        v["per_batch_balancedness"] = json!(self.replay.per_batch);
        v["per_batch_bytes_moved"] = json!(self.per_batch_bytes_moved());
        v["bytes_moved"] = json!(self.replay.bytes_moved);
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
        let mut out = vec![0; self.replay.batches];
        for m in &self.replay.moves {
            if let Some(b) = out.get_mut(m.at_batch) {
                *b += m.bytes;
            }
        }
        out
    }

    /// Share of pairs served on their own GPU, in percent.
    pub fn local_pct(&self) -> f64 {
        pct(self.replay.traffic.local, self.replay.traffic.pairs)
    }

    /// Share of pairs served on another node, in percent.
    pub fn cross_node_pct(&self) -> f64 {
        pct(self.replay.traffic.cross_node, self.replay.traffic.pairs)
    }

    /// Token messages, when the workload has token routes.
    pub fn messages(&self) -> Option<&Messages> {
        self.replay.traffic.messages.as_ref()
    }

    /// Cross-node bytes in GB (10⁹ bytes).
    pub fn cross_node_gb(&self) -> f64 {
        self.replay.traffic.cross_node_bytes / 1e9
    }
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}
