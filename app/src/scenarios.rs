//! The page's bundled scenarios: three that each show one effect, and
//! three that put each paper's system in the setting its authors ran, with
//! [`paper_line`], the paper's figure against what the page predicts there.
//! Plain Rust (no page): the presenter's buttons and keys
//! ([`crate::present`]) and the worker's tests read the same list.

use crate::settings::Settings;

/// A bundled view: a generated trace and cluster chosen to show one effect,
/// as the URL hash that reproduces it, and what to look at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scenario {
    /// The button's id suffix (`scenario-hot`).
    pub id: &'static str,
    /// The button's label.
    pub title: &'static str,
    /// The settings, as a URL hash ([`Settings::from_hash`]).
    pub hash: &'static str,
    /// One sentence: what the view shows and where to look.
    pub what: &'static str,
    /// A paper's own setting: what it reported, compared in one line with
    /// what moeplan predicts here ([`paper_line`]).
    pub paper: Option<Paper>,
}

/// What a paper reported for its system in the setting a scenario
/// reproduces: a throughput ratio of one row over another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paper {
    /// What the paper reported, where, and on what (one clause).
    pub reported: &'static str,
    /// The row it is about (a planner id).
    pub planner: &'static str,
    /// The row it is against (`eplb`, `base`).
    pub against: &'static str,
    /// The ratio's range the paper reports, lowest and highest (its mean
    /// where it gives only that).
    pub range: (f64, f64),
    /// What differs here from the paper's own run, said once.
    pub differs: &'static str,
}

impl Scenario {
    /// The settings the scenario applies.
    pub fn settings(&self) -> Settings {
        Settings::from_hash(self.hash)
    }

    /// Whether `s` shows this scenario's trace, cluster and machine (the
    /// budget, layer and rule may have moved since: the scenario invites
    /// that).
    pub fn matches(&self, s: &Settings) -> bool {
        let t = self.settings();
        (
            &t.preset,
            t.batches,
            t.seed,
            t.routes,
            t.nodes,
            t.gpus_per_node,
            &t.memory_model,
            &t.hardware,
            &t.phase,
        ) == (
            &s.preset,
            s.batches,
            s.seed,
            s.routes,
            s.nodes,
            s.gpus_per_node,
            &s.memory_model,
            &s.hardware,
            &s.phase,
        )
    }
}

/// The bundled scenarios, keys `1` to `6` in this order. The figures in
/// the first three sentences are what the generator gives for these seeds
/// (checked by `moeplan sweep` with the same settings, and by
/// `tests/present.mjs`); the last three are each paper's own setting, and
/// their comparison with the paper is made from the figures shown
/// ([`paper_line`]).
pub const SCENARIOS: [Scenario; 6] = [
    Scenario {
        id: "hot",
        title: "Hot experts in DeepSeek-V3",
        // Layer 37 (index 34) is the generated trace's hottest: its top
        // expert takes 29× the mean.
        hash: "#preset=deepseek-v3&batches=64&seed=7&nodes=8&gpus=8&groups=8&r=0&layer=34&mem=deepseek-v3&rule=even&routes=0",
        what: "64 GPUs, no replicas yet: BASE's hottest GPU carries 3× the mean load, and the red cells of \
               the load map are the hot GPUs of each layer. Press ] to give CRAFT replicas and watch them cool; \
               EPLB's row is the same fix at its own budget.",
        paper: None,
    },
    Scenario {
        id: "flat",
        title: "Replicas that buy nothing",
        hash: "#preset=deepseek-v3&batches=64&seed=7&nodes=1&gpus=8&groups=8&r=32&layer=34&mem=deepseek-v3&rule=even&routes=0",
        what: "One node of 8 GPUs: each hosts 32 of the 256 experts, so hot experts average out and BASE is \
               already at 0.93. The curve is flat: R = 32 spends 1.3 GiB on every GPU for 0.02 balancedness.",
        paper: None,
    },
    Scenario {
        id: "memory",
        title: "Memory vs balance",
        // 160 experts on 32 GPUs (64 would leave BASE without a contiguous
        // split); GLM-4.5's router has no expert groups.
        hash: "#preset=glm-4.5&batches=64&seed=7&nodes=4&gpus=8&groups=1&r=64&layer=0&mem=glm-4.5&rule=even&routes=0",
        what: "GLM-4.5's experts take 45 MiB each: on 32 GPUs, R = 64 costs 2.8 GiB of every GPU (the table's \
               replica memory) for 0.02 more balancedness than the knee, R = 8 at 0.35 GiB. Press a for the \
               knee, [ and ] to walk the curve.",
        paper: None,
    },
    Scenario {
        id: "craft-paper",
        title: "CRAFT's setting",
        // CRAFT (seed 000) §3.1 and §5.2: SGLang serving DeepSeek-R1 on 8
        // p4de nodes (8 × A100-80GB, EFA), R = 8, decode with the KV cache
        // the replicas leave; DeepSeek-R1 has DeepSeek-V3's shape.
        hash: "#preset=deepseek-v3&batches=64&seed=7&nodes=8&gpus=8&groups=8&r=8&layer=0&mem=deepseek-v3&rule=sglang-static&routes=0&hw=a100-80g-efa&phase=decode",
        what: "CRAFT as its paper ran it: DeepSeek-R1's shape on 8 × 8 A100s, R = 8, SGLang's dispatch, decode.",
        paper: Some(Paper {
            // CRAFT §5.2: "CRA8 achieves on average 1.15× higher goodput (up
            // to 1.2×) on DeepSeek-R1 ... in an 8-node cluster" than EPLB.
            reported: "CRAFT's paper (§5.2): CRAFT R = 8 serves 1.15× EPLB's goodput on DeepSeek-R1, 8 × 8 A100 (up to 1.2×)",
            planner: "craft",
            against: "eplb",
            range: (1.15, 1.2),
            differs: "generated DeepSeek-V3 loads, not its datasets; tokens/s of one decode step, not goodput under a request rate",
        }),
    },
    Scenario {
        id: "grace-paper",
        title: "GRACE's setting",
        // GRACE-MoE (seed 003) §5.1: OLMoE among its three models, 2 nodes
        // × 4 RTX 4090 (PCIe 4.0) over 25 GbE, its own locality-aware
        // routing; prefill of 128 × 64 tokens, BF16.
        hash: "#preset=olmoe&batches=64&seed=7&nodes=2&gpus=4&groups=1&r=auto&layer=0&mem=olmoe&rule=even&hw=4090-pcie4-25gbe",
        what: "GRACE as its paper ran it: OLMoE's token routes on 2 × 4 RTX 4090s over 25 GbE, its own routing.",
        paper: Some(Paper {
            // GRACE-MoE §5.2: "overall speedups of 0.95–3.79×" end to end
            // over its baselines, across models and clusters.
            reported: "GRACE's paper (§5.2): 0.95–3.79× end to end over its baselines across models and clusters, RTX 3090/4090 over 25 GbE",
            planner: "grace",
            against: "base",
            range: (0.95, 3.79),
            differs: "generated OLMoE routes, not WikiText-2; the MoE layers' time over a step, not end-to-end latency",
        }),
    },
    Scenario {
        id: "libra-paper",
        title: "Libra's setting",
        // Libra (seed 004) §5: 8 × H200-SXM5 in one node, prefill only,
        // Qwen3-MoE (here the 235B) and GLM-4.5; its predictor 70–90 %
        // accurate (Table 1): the noisy predictor keeps 80 %.
        hash: "#preset=qwen3-235b-a22b&batches=64&seed=7&nodes=1&gpus=8&groups=1&r=auto&layer=0&mem=qwen3-235b-a22b&rule=even&routes=0&hw=h200-ib-ndr&predictor=noisy",
        what: "Libra as its paper ran it: Qwen3-235B-A22B on 8 H200s, prefill, a predictor right 80 % of the time.",
        paper: Some(Paper {
            // Libra abstract and §5: "improves throughput by up to 19.2%"
            // over the state of the art (SGLang with EPLB) in prefill.
            reported: "Libra's paper (§5): up to 1.192× the prefill throughput of SGLang's EPLB on 8 × H200, Qwen3-MoE and GLM-4.5",
            planner: "libra",
            against: "eplb",
            range: (1.0, 1.192),
            differs: "generated loads, not its eight benchmarks; a simulated predictor, not its speculative gate",
        }),
    },
];

/// The one-line comparison of a paper scenario with the paper, made from
/// the figures shown: the ratio of the two rows' predicted tokens/s, where
/// it falls against the paper's range, and why it differs (the row's
/// reason against BASE, [`moeplan::judge::cost::Prediction::reason`]).
/// `None` until both rows are priced.
///
/// ```
/// use moeplan_app::scenarios::{paper_line, SCENARIOS};
/// use moeplan_view::page::{Figures, Predicted};
/// let row = |name: &str, label: &str, t: f64| Figures { name: name.into(), label: label.into(),
///     predicted: Some(Predicted { hardware: "a100-80g-efa".into(), tokens_per_s: t,
///         reason: Some("wins on expert compute: 1.00 ms a step less than BASE's".into()), ..Default::default() }),
///     ..Default::default() };
/// let paper = SCENARIOS[3].paper.unwrap();
/// let line = paper_line(&paper, &[row("eplb", "EPLB +64", 1000.0), row("craft", "CRAFT R = 8", 1100.0)]).unwrap();
/// assert!(line.contains("Here: CRAFT R = 8 serves 1.10× EPLB +64"), "{line}");
/// assert!(line.contains("below the paper's 1.15–1.20×"), "{line}");
/// assert!(paper_line(&paper, &[row("eplb", "EPLB +64", 1000.0)]).is_none());
/// ```
pub fn paper_line(paper: &Paper, plans: &[moeplan_view::page::Figures]) -> Option<String> {
    let find = |name: &str| plans.iter().find(|p| p.name == name);
    let (row, against) = (find(paper.planner)?, find(paper.against)?);
    let (p, a) = (row.predicted.as_ref()?, against.predicted.as_ref()?);
    if a.tokens_per_s <= 0.0 {
        return None;
    }
    let ratio = p.tokens_per_s / a.tokens_per_s;
    let (lo, hi) = paper.range;
    // Compared at the two decimals the line prints.
    let shown = (ratio * 100.0).round() / 100.0;
    let range = if lo == hi {
        format!("{lo:.2}×")
    } else {
        format!("{lo:.2}–{hi:.2}×")
    };
    let verdict = if shown < lo {
        format!("below the paper's {range}")
    } else if shown > hi {
        format!("above the paper's {range}")
    } else {
        format!("within the paper's {range}")
    };
    let why = p
        .reason
        .as_ref()
        .map(|r| format!("; against BASE it {r}"))
        .unwrap_or_default();
    Some(format!(
        "{}. Here: {} serves {shown:.2}× {} in predicted tokens/s on {}, {verdict} ({}){why}.",
        paper.reported, row.label, against.label, p.hardware, paper.differs
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_hash_is_read_in_full() {
        for sc in SCENARIOS {
            let again = sc.settings().to_hash();
            for pair in sc.hash.trim_start_matches('#').split('&') {
                assert!(
                    again.contains(pair),
                    "{}: {pair} was not taken ({again})",
                    sc.id
                );
            }
            assert!(sc.matches(&sc.settings()));
        }
        // Distinct views, each its own key.
        for (i, a) in SCENARIOS.iter().enumerate() {
            for b in &SCENARIOS[i + 1..] {
                assert!(!a.matches(&b.settings()), "{} and {}", a.id, b.id);
            }
        }
    }
}
