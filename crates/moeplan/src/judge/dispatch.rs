//! How a (token, expert) pair picks among the expert's copies: the
//! dispatch [`Rule`]s, and the per-layer tables the simulator replays them
//! with.
//!
//! Sources, per rule:
//! - [`Rule::Even`]: moeplan's [`crate::judge::eval`] (each expert's tokens split
//!   equally over its copies).
//! - [`Rule::Vllm`]: vLLM `eplb_map_to_physical_and_record`
//!   (`vllm/model_executor/layers/fused_moe/router/base_router.py`, earlier
//!   `layer.py`): position `p = token·top_k + k` in the rank's local batch,
//!   copy `p mod replica_count[e]` of `logical_to_physical_map[e]`.
//! - [`Rule::SglangStatic`], [`Rule::SglangDynamic`]: SGLang
//!   `python/sglang/srt/eplb/expert_location.py`
//!   (`compute_logical_to_rank_dispatch_physical_map`,
//!   `_find_nearest_expert`, `_fair_choices`) and
//!   `expert_location_dispatch.py`; see [`SglangVersion`] for which version
//!   does what, and [`super::sglang_dispatch_map`] for the port.
//! - [`Rule::LocalFirst`]: the topology-aware rule of GRACE-MoE and of a
//!   proposal for SGLang, stated plainly (own GPU, else own node, else
//!   anywhere), splitting evenly within a tier.
//! - [`Rule::GraceWeighted`], [`Rule::GraceTopology`]: GRACE-MoE (Wang et
//!   al., §4.3, Eq. 3; appendix A.3, Algorithms 3 and 4): weighted
//!   round-robin with load prediction, alone or within locality tiers; the
//!   weights are [`predicted_loads`].
//! - [`Rule::Libra`]: Libra's adaptive token rebalancer (Libra paper,
//!   §3.3, appendix C, Algorithm 2); see [`super::Rebalancer`].
//! - [`Rule::Optimal`]: the per-batch min-max split of DeepSeek's LPLB / the
//!   design's `Optimal`; see [`super::optimal_split`].
//!
//! Cost: a layer's tables are built once per layer and placement —
//! O(slots + E) for the flattened view, O(S · (E + slots)) for per-source
//! routes, O(slots) more for GRACE's predicted loads — and reused for every
//! batch.

use super::slots::SlotTable;
use crate::data::plan::LayerPlacement;
use crate::data::topology::Topology;
use crate::error::{Error, Result};

/// Which of SGLang's dispatch rules, by the behaviour of its versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SglangVersion {
    /// `expert_location.py` as in sgl-project/sglang at commits 01fec5c2
    /// and 6270b014: static dispatch gives each rank the first
    /// copy on its own GPU, else a seeded fair draw over all copies (even
    /// for an expert with a single copy, whose draw then only advances the
    /// random state); dynamic dispatch draws uniformly over all copies.
    SameGpu,
    /// Later versions (`_find_nearest_expert`): an expert with one copy
    /// goes there without a draw; else the first copy on the rank's own
    /// GPU; else the first copy on the rank's node when that narrows the
    /// choice (some but not all copies are on the node); else the fair
    /// draw. Dynamic dispatch is pinned to that nearest copy when there is
    /// one (the rank's `logical_to_all_physical_map` row is replaced by
    /// it), uniform over all copies otherwise. (Some forks prefer the node
    /// even when every copy is on it; that variant is not modelled.)
    Nearest,
}

/// How each (token, expert) pair picks one of the expert's copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Each expert's tokens split equally over its copies, wherever they
    /// come from: [`crate::evaluate`]'s replay, reproduced exactly.
    Even,
    /// vLLM: a pair at flattened position `p = token·top_k + k` of its
    /// source rank's local batch goes to copy `p mod c_e` of the expert's
    /// `c_e` copies in physical-slot order. Exact with token routes; with
    /// counts only, each source's pairs for an expert split evenly over
    /// the copies — what `p mod c_e` gives up to rounding (at most one
    /// pair per copy and source).
    Vllm,
    /// SGLang's `static` dispatch (its default with EPLB or an initial
    /// expert location): one fixed copy per (source rank, layer, expert),
    /// chosen by [`super::sglang_dispatch_map`]; all of a rank's pairs for
    /// an expert go to it.
    SglangStatic(SglangVersion),
    /// SGLang's `dynamic` dispatch: a uniformly random copy per pair (after
    /// the nearest-copy pin of [`SglangVersion::Nearest`]). Simulated by
    /// its expectation: an even split over the candidate copies.
    SglangDynamic(SglangVersion),
    /// A copy on the source's own GPU if any (all pairs go there); else the
    /// copies on the source's node, evenly; else all copies, evenly.
    LocalFirst,
    /// Per batch and layer, the split over copies that minimises the
    /// busiest GPU: no dispatch can beat it for that placement. Its traffic
    /// matches sources to that split locally first, then within nodes.
    Optimal,
    /// GRACE-MoE's weighted round-robin with load prediction (Algorithm 3,
    /// Eq. 3): each pair goes to one of the expert's copies drawn at random
    /// with weight `1 / predicted load` of the copy's GPU ([`predicted_loads`]),
    /// wherever the pair comes from. Simulated by its expectation, as
    /// [`Rule::SglangDynamic`] is: each source's pairs for an expert split
    /// over the copies in proportion to the weights.
    GraceWeighted,
    /// GRACE-MoE's topology-aware routing with locality preference
    /// (Algorithm 4): a copy on the source's own GPU takes all of that
    /// source's pairs; else the copies on the source's node, weighted as in
    /// [`Rule::GraceWeighted`]; else all copies, weighted. Simulated by its
    /// expectation. ([`Rule::LocalFirst`] is the same tiers split evenly.)
    GraceTopology,
    /// Libra's adaptive token rebalancer (Algorithm 2, [`super::Rebalancer`]):
    /// pairs whose source GPU hosts the expert stay there; the remote pairs
    /// of replicated experts move from the busiest GPU to the least-loaded
    /// GPU holding a copy until the busiest is within `(1 + ε)` of the mean
    /// or no move helps. ε is `tolerance_percent / 100`
    /// ([`super::DEFAULT_TOLERANCE_PERCENT`] in [`Rule::ALL`]); the remote
    /// pairs start where `start` puts them ([`super::RemoteStart::Even`],
    /// the engines' split, in [`Rule::ALL`]).
    Libra {
        /// ε in percent of the mean load.
        tolerance_percent: u16,
        /// Where remote pairs start before the first transfer.
        start: super::RemoteStart,
    },
}

impl Rule {
    /// The name reports carry.
    ///
    /// ```
    /// use moeplan::judge::{Rule, SglangVersion};
    /// assert_eq!(Rule::SglangStatic(SglangVersion::Nearest).name(), "sglang-static");
    /// assert_eq!(Rule::Even.name(), "even");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Rule::Even => "even",
            Rule::Vllm => "vllm",
            Rule::SglangStatic(SglangVersion::Nearest) => "sglang-static",
            Rule::SglangStatic(SglangVersion::SameGpu) => "sglang-static-same-gpu",
            Rule::SglangDynamic(SglangVersion::Nearest) => "sglang-dynamic",
            Rule::SglangDynamic(SglangVersion::SameGpu) => "sglang-dynamic-uniform",
            Rule::LocalFirst => "local-first",
            Rule::Optimal => "optimal",
            Rule::GraceWeighted => "grace-weighted",
            Rule::GraceTopology => "grace-topology",
            Rule::Libra { .. } => "libra-rebalance",
        }
    }

    /// One line on what the rule does, for help texts (the CLI's
    /// `--dispatch` values, the page's choices).
    ///
    /// ```
    /// use moeplan::judge::Rule;
    /// assert!(Rule::ALL.iter().all(|r| !r.about().is_empty()));
    /// ```
    pub fn about(&self) -> &'static str {
        match self {
            Rule::Even => {
                "Each expert's tokens split equally over its copies (moeplan's replay; the default)."
            }
            Rule::Vllm => {
                "vLLM: pair p of a rank's batch goes to copy p mod c of the expert's c copies."
            }
            Rule::SglangStatic(SglangVersion::Nearest) => {
                "SGLang static, since PR #9849 (Aug 2025): one copy per (rank, expert), own GPU, else own node, else a seeded fair draw."
            }
            Rule::SglangStatic(SglangVersion::SameGpu) => {
                "SGLang static before PR #9849: own GPU, else a seeded fair draw over all copies."
            }
            Rule::SglangDynamic(SglangVersion::Nearest) => {
                "SGLang dynamic, since PR #10874 (Oct 2025): the nearest copy when there is one, else a random copy per token."
            }
            Rule::SglangDynamic(SglangVersion::SameGpu) => {
                "SGLang dynamic before PR #10874: a random copy per token."
            }
            Rule::LocalFirst => {
                "Own GPU's copy, else the node's copies evenly, else all copies evenly."
            }
            Rule::GraceWeighted => {
                "GRACE-MoE's weighted round-robin: a copy drawn with weight 1 / its GPU's predicted load (expected split)."
            }
            Rule::GraceTopology => {
                "GRACE-MoE's topology-aware routing: own GPU's copy, else the node's copies, else all, weighted as grace-weighted."
            }
            Rule::Libra { .. } => {
                "Libra's token rebalancer (Algorithm 2): local pairs stay, remote pairs of replicated experts move from the busiest GPU to the least-loaded copy until within 5 % of the mean."
            }
            Rule::Optimal => {
                "Per batch and layer the split that minimises the busiest GPU: no dispatch does better."
            }
        }
    }

    /// Other names [`Rule::from_name`] accepts for the rule: the legacy
    /// SGLang rules' `-v0` spellings.
    pub fn aliases(&self) -> &'static [&'static str] {
        match self {
            Rule::SglangStatic(SglangVersion::SameGpu) => &["sglang-static-v0"],
            Rule::SglangDynamic(SglangVersion::SameGpu) => &["sglang-dynamic-v0"],
            _ => &[],
        }
    }

    /// Whether the rule is an engine's older behaviour, kept to judge plans
    /// for engines not yet upgraded (the SGLang versions before
    /// [`SglangVersion::Nearest`]).
    pub fn is_legacy(&self) -> bool {
        matches!(
            self,
            Rule::SglangStatic(SglangVersion::SameGpu)
                | Rule::SglangDynamic(SglangVersion::SameGpu)
        )
    }

    /// Every rule, in the order front ends list them: the one list the
    /// CLI's `--dispatch` is checked against and names are parsed from.
    ///
    /// ```
    /// use moeplan::judge::Rule;
    /// let names: Vec<&str> = Rule::ALL.iter().map(Rule::name).collect();
    /// assert!(names.contains(&"grace-topology"));
    /// assert_eq!(names.first(), Some(&"even"));
    /// ```
    pub const ALL: [Rule; 11] = [
        Rule::Even,
        Rule::Vllm,
        Rule::SglangStatic(SglangVersion::Nearest),
        Rule::SglangStatic(SglangVersion::SameGpu),
        Rule::SglangDynamic(SglangVersion::Nearest),
        Rule::SglangDynamic(SglangVersion::SameGpu),
        Rule::LocalFirst,
        Rule::GraceWeighted,
        Rule::GraceTopology,
        Rule::Libra {
            tolerance_percent: super::rebalance::DEFAULT_TOLERANCE_PERCENT,
            start: super::RemoteStart::Even,
        },
        Rule::Optimal,
    ];

    /// The rule of [`Rule::ALL`] whose [`Rule::name`] (or one of its
    /// [`Rule::aliases`]) is `name`.
    ///
    /// ```
    /// use moeplan::judge::{Rule, SglangVersion};
    /// assert_eq!(Rule::from_name("grace-weighted")?, Rule::GraceWeighted);
    /// assert_eq!(Rule::from_name("sglang-static-v0")?, Rule::SglangStatic(SglangVersion::SameGpu));
    /// assert!(Rule::from_name("round-robin").is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn from_name(name: &str) -> Result<Rule> {
        Rule::ALL
            .iter()
            .copied()
            .find(|r| r.name() == name || r.aliases().contains(&name))
            .ok_or_else(|| {
                let names: Vec<&str> = Rule::ALL.iter().map(Rule::name).collect();
                Error::Argument(format!(
                    "unknown dispatch rule {name:?}: one of {}",
                    names.join(", ")
                ))
            })
    }

    /// Whether the rule weighs copies by GRACE's predicted GPU loads
    /// ([`predicted_loads`]).
    pub(crate) fn is_grace(&self) -> bool {
        matches!(self, Rule::GraceWeighted | Rule::GraceTopology)
    }

    /// Rules that ignore where a pair comes from: their GPU loads are the
    /// even split's whatever the sources.
    pub(crate) fn is_blind(&self) -> bool {
        matches!(
            self,
            Rule::Even | Rule::Vllm | Rule::SglangDynamic(SglangVersion::SameGpu)
        )
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// GRACE-MoE's predicted load of each GPU of one layer (§4.3, Eq. 3): the
/// sum over its slots of the hosted expert's load divided by the expert's
/// copies. `expert_loads[e]` is expert `e`'s load over the whole workload
/// (the simulator sums the layer's counts over every batch). For GRACE's own
/// plan this is Eq. 3 — a replicated expert's load split evenly over its
/// instances, added to each hosting GPU's own — and for any other plan its
/// natural generalisation.
///
/// [`Rule::GraceWeighted`] and [`Rule::GraceTopology`] weigh a copy by
/// `1 / predicted load` of its GPU. A GPU with predicted load 0 (possible
/// only when every expert it hosts has no load at all, so no pair is ever
/// routed by its weight) takes the limit of that weight: the copies on
/// zero-load GPUs share their tier's pairs evenly and the others get none.
///
/// Errors when the layer hosts an expert `expert_loads` does not cover.
///
/// ```
/// use moeplan::{judge::predicted_loads, LayerPlacement};
/// // expert 0 on both GPUs: its 6 split 3 + 3 (Eq. 3's W_p)
/// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0, 1], vec![0, 2]] };
/// assert_eq!(predicted_loads(&layer, &[6.0, 4.0, 1.0])?, vec![7.0, 4.0]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn predicted_loads(layer: &LayerPlacement, expert_loads: &[f64]) -> Result<Vec<f64>> {
    let e_n = expert_loads.len();
    if let Some(&e) = layer.gpus.iter().flatten().find(|&&e| e as usize >= e_n) {
        return Err(Error::Mismatch(format!(
            "layer {} hosts expert {e}, the loads cover {e_n} experts",
            layer.layer
        )));
    }
    let mut view = SlotTable::default();
    view.prepare(layer, e_n);
    let mut loads = vec![0.0; view.num_gpus()];
    view.even_loads(expert_loads, &mut loads);
    Ok(loads)
}

/// Where each source GPU's pairs of each expert go under a rule whose
/// choice depends only on the layer's placement (and, for GRACE-MoE's
/// rules, the predicted GPU loads): a list of (GPU, fraction) per (source,
/// expert), the fractions summing to 1. This is the table the simulator
/// replays such rules with — it simulates the random or round-robin
/// choice by its expectation — so a runtime that realises these fractions
/// in whole pairs (moeplan-cuda's replica selection) runs the planner's
/// own model.
///
/// Rules: [`Rule::Even`], [`Rule::Vllm`] (its expectation under counts:
/// the even split), [`Rule::SglangDynamic`], [`Rule::LocalFirst`],
/// [`Rule::GraceWeighted`] and [`Rule::GraceTopology`]. The others are not
/// a fixed split: [`Rule::SglangStatic`] is one copy per (rank, expert)
/// from [`super::sglang_dispatch_map`], [`Rule::Optimal`] and
/// [`Rule::Libra`] are solved per batch (`super::optimal_split`,
/// [`super::Rebalancer`]).
///
/// An entry lists a GPU once per copy it holds in the tier, in slot order
/// (a GPU with two copies of an expert appears twice), except a source's
/// own GPU taking all its pairs, which appears once.
///
/// ```
/// use moeplan::judge::{predicted_loads, RouteShares, Rule};
/// use moeplan::{LayerPlacement, Topology};
/// // 1 node × 3 GPUs; expert 0 on GPUs 0 and 1
/// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0, 1], vec![0, 2], vec![3]] };
/// let loads = [6.0, 5.0, 1.0, 2.0];
/// assert_eq!(predicted_loads(&layer, &loads)?, vec![8.0, 4.0, 2.0]);
/// let topo = Topology::new(1, 3)?;
/// let w = RouteShares::new(Rule::GraceWeighted, &layer, topo, &loads)?;
/// // weights 1/8 and 1/4: GPU 1 takes two thirds of expert 0's pairs
/// let from2: Vec<(u32, f64)> = w.shares(2, 0).collect();
/// assert_eq!(from2.len(), 2);
/// assert!((from2[1].1 - 2.0 / 3.0).abs() < 1e-12);
/// let t = RouteShares::new(Rule::GraceTopology, &layer, topo, &loads)?;
/// assert_eq!(t.shares(0, 0).collect::<Vec<_>>(), [(0, 1.0)]); // its own copy
/// assert!(RouteShares::new(Rule::Optimal, &layer, topo, &loads).is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RouteShares {
    routes: Routes,
    sources: usize,
}

impl RouteShares {
    /// The table of `rule` for `layer` on `topology`, every GPU a source.
    /// `expert_loads[e]` is expert `e`'s load over the whole workload, from
    /// which GRACE's rules take [`predicted_loads`] (the simulator passes
    /// the plan's profile, the loads it was planned on, or for a plan
    /// without one the layer's counts over every batch); the other rules ignore it, but it
    /// must still cover every hosted expert, which fixes the number of
    /// experts.
    ///
    /// Errors when `rule` is not a fixed split (see above), the layer's
    /// GPUs are not the topology's, or it hosts an expert the loads do not
    /// cover.
    pub fn new(
        rule: Rule,
        layer: &LayerPlacement,
        topology: Topology,
        expert_loads: &[f64],
    ) -> Result<Self> {
        match rule {
            Rule::SglangStatic(_) | Rule::Optimal | Rule::Libra { .. } => {
                return Err(Error::Argument(format!(
                    "dispatch rule {} is not a fixed split over copies",
                    rule.name()
                )));
            }
            _ => {}
        }
        let d = topology.num_gpus();
        if layer.gpus.len() != d {
            return Err(Error::Mismatch(format!(
                "layer {} places experts on {} GPUs, the topology has {d}",
                layer.layer,
                layer.gpus.len()
            )));
        }
        let predicted = predicted_loads(layer, expert_loads)?;
        let mut view = SlotTable::default();
        view.prepare(layer, expert_loads.len());
        let mut routes = Routes::default();
        routes.build(rule, &view, topology, d, None, &predicted);
        Ok(RouteShares { routes, sources: d })
    }

    /// Source GPUs (the topology's GPUs).
    pub fn num_sources(&self) -> usize {
        self.sources
    }

    /// Logical experts.
    pub fn num_experts(&self) -> usize {
        self.routes.experts
    }

    /// Where source `s`'s pairs of expert `e` go: (GPU, fraction), the
    /// fractions summing to 1 (empty for an expert with no copy, or `s`
    /// or `e` out of range).
    pub fn shares(&self, s: usize, e: usize) -> impl Iterator<Item = (u32, f64)> + '_ {
        let range = if s < self.sources && e < self.routes.experts {
            self.routes.entries(s, e)
        } else {
            0..0
        };
        self.routes.gpu[range.clone()]
            .iter()
            .copied()
            .zip(self.routes.frac[range].iter().copied())
    }
}

/// SGLang's `_find_nearest_expert` (or, for [`SglangVersion::SameGpu`],
/// the same-GPU test that preceded it): the copy a rank is pinned to, if
/// any. `cand` are the expert's slots in order.
pub(crate) fn nearest(
    version: SglangVersion,
    cand: &[u32],
    slot_gpu: &[u32],
    rank: usize,
    gpus_per_node: usize,
) -> Option<u32> {
    let gpu = |c: u32| slot_gpu[c as usize] as usize;
    if version == SglangVersion::Nearest && cand.len() == 1 {
        return cand.first().copied();
    }
    if let Some(&c) = cand.iter().find(|&&c| gpu(c) == rank) {
        return Some(c);
    }
    if version == SglangVersion::Nearest {
        let node = rank / gpus_per_node;
        let mut same = cand.iter().filter(|&&c| gpu(c) / gpus_per_node == node);
        let first = same.next().copied();
        let count = first.map_or(0, |_| 1 + same.count());
        if count > 0 && count < cand.len() {
            return first;
        }
    }
    None
}

/// For every (source rank, expert) of one layer, where its pairs go:
/// a list of (GPU, fraction) summing to 1.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Routes {
    pub experts: usize,
    /// (source `s`, expert `e`) owns entries `start[s·E + e] .. start[s·E + e + 1]`.
    pub start: Vec<usize>,
    pub gpu: Vec<u32>,
    pub frac: Vec<f64>,
}

impl Routes {
    /// Builds the table of `rule` for sources `0..sources`. `map` is the
    /// layer's SGLang static map (`rank · E + e` → slot) for
    /// [`Rule::SglangStatic`]; `predicted` the GPUs' [`predicted_loads`]
    /// for GRACE's rules (empty for the others).
    pub(crate) fn build(
        &mut self,
        rule: Rule,
        view: &SlotTable,
        topology: Topology,
        sources: usize,
        map: Option<&[u32]>,
        predicted: &[f64],
    ) {
        let e_n = view.copy_start.len().saturating_sub(1);
        let gpn = topology.gpus_per_node();
        self.experts = e_n;
        self.start.clear();
        self.gpu.clear();
        self.frac.clear();
        self.start.push(0);
        for s in 0..sources {
            for e in 0..e_n {
                let cand = view.copies(e);
                let on = |pred: &dyn Fn(usize) -> bool| {
                    cand.iter()
                        .filter(|&&c| pred(view.slot_gpu[c as usize] as usize))
                        .count()
                };
                match rule {
                    Rule::SglangStatic(_) => {
                        let slot = map.and_then(|m| m.get(s * e_n + e)).copied();
                        if let Some(g) = slot.and_then(|c| view.slot_gpu.get(c as usize)) {
                            self.push(*g, 1.0);
                        }
                    }
                    Rule::SglangDynamic(SglangVersion::Nearest) => {
                        match nearest(SglangVersion::Nearest, cand, &view.slot_gpu, s, gpn) {
                            Some(c) => self.push(view.slot_gpu[c as usize], 1.0),
                            None => self.spread(view, cand, |_| true),
                        }
                    }
                    Rule::LocalFirst => {
                        if on(&|g| g == s) > 0 {
                            self.push(s as u32, 1.0);
                        } else if on(&|g| g / gpn == s / gpn) > 0 {
                            self.spread(view, cand, |g| g / gpn == s / gpn);
                        } else {
                            self.spread(view, cand, |_| true);
                        }
                    }
                    Rule::GraceWeighted => self.weighted(view, cand, predicted, |_| true),
                    Rule::GraceTopology => {
                        if on(&|g| g == s) > 0 {
                            self.push(s as u32, 1.0);
                        } else if on(&|g| g / gpn == s / gpn) > 0 {
                            self.weighted(view, cand, predicted, |g| g / gpn == s / gpn);
                        } else {
                            self.weighted(view, cand, predicted, |_| true);
                        }
                    }
                    // Older SGLang's dynamic dispatch draws over every copy.
                    Rule::Even
                    | Rule::Vllm
                    | Rule::Optimal
                    | Rule::Libra { .. }
                    | Rule::SglangDynamic(SglangVersion::SameGpu) => {
                        self.spread(view, cand, |_| true)
                    }
                }
                self.start.push(self.gpu.len());
            }
        }
    }

    fn push(&mut self, gpu: u32, frac: f64) {
        self.gpu.push(gpu);
        self.frac.push(frac);
    }

    /// An even split over the copies whose GPU passes `keep`.
    fn spread(&mut self, view: &SlotTable, cand: &[u32], keep: impl Fn(usize) -> bool) {
        let kept = cand
            .iter()
            .filter(|&&c| keep(view.slot_gpu[c as usize] as usize))
            .count();
        let f = 1.0 / kept.max(1) as f64;
        for &c in cand {
            let g = view.slot_gpu[c as usize];
            if keep(g as usize) {
                self.push(g, f);
            }
        }
    }

    /// The copies whose GPU passes `keep`, each in proportion to
    /// `1 / predicted[gpu]` (Algorithm 3's weights). Zero-load GPUs take
    /// the limit of that weight (see [`predicted_loads`]); weights that do
    /// not sum to a positive finite number fall back to the even split.
    fn weighted(
        &mut self,
        view: &SlotTable,
        cand: &[u32],
        predicted: &[f64],
        keep: impl Fn(usize) -> bool,
    ) {
        let load = |c: u32| {
            let g = view.slot_gpu[c as usize];
            (g, predicted.get(g as usize).copied().unwrap_or(0.0))
        };
        let (mut zeros, mut sum) = (0usize, 0.0);
        for &c in cand {
            let (g, p) = load(c);
            if keep(g as usize) {
                if p > 0.0 {
                    sum += 1.0 / p;
                } else {
                    zeros += 1;
                }
            }
        }
        if zeros == 0 && !(sum > 0.0 && sum.is_finite()) {
            return self.spread(view, cand, keep);
        }
        for &c in cand {
            let (g, p) = load(c);
            if !keep(g as usize) {
                continue;
            }
            if zeros > 0 {
                if p <= 0.0 {
                    self.push(g, 1.0 / zeros as f64);
                }
            } else {
                self.push(g, 1.0 / p / sum);
            }
        }
    }

    pub(crate) fn entries(&self, s: usize, e: usize) -> std::ops::Range<usize> {
        let i = s * self.experts + e;
        self.start[i]..self.start[i + 1]
    }
}

/// A source-aware rule under even arrival (every GPU sends `n_e / D` of
/// expert `e`), folded over the sources: per GPU, the experts it serves
/// with the fraction of `n_e` it receives in all, from itself, from its
/// node and from other nodes.
#[derive(Debug, Default)]
pub(crate) struct EvenArrival {
    pub gpu_start: Vec<usize>,
    pub expert: Vec<u32>,
    /// [all, local, intra-node, cross-node] fractions of the expert's pairs.
    pub weight: Vec<[f64; 4]>,
    dense: Vec<[f64; 4]>,
}

impl EvenArrival {
    pub(crate) fn build(&mut self, routes: &Routes, topology: Topology) {
        let d = topology.num_gpus();
        let gpn = topology.gpus_per_node();
        let e_n = routes.experts;
        self.dense.clear();
        self.dense.resize(d * e_n, [0.0; 4]);
        let per_source = 1.0 / d as f64;
        for s in 0..d {
            for e in 0..e_n {
                for i in routes.entries(s, e) {
                    let g = routes.gpu[i] as usize;
                    let w = routes.frac[i] * per_source;
                    let cell = &mut self.dense[g * e_n + e];
                    cell[0] += w;
                    let class = if g == s {
                        1
                    } else if g / gpn == s / gpn {
                        2
                    } else {
                        3
                    };
                    cell[class] += w;
                }
            }
        }
        self.gpu_start.clear();
        self.expert.clear();
        self.weight.clear();
        self.gpu_start.push(0);
        for g in 0..d {
            for e in 0..e_n {
                let cell = self.dense[g * e_n + e];
                if cell[0] > 0.0 {
                    self.expert.push(e as u32);
                    self.weight.push(cell);
                }
            }
            self.gpu_start.push(self.expert.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(gpus: Vec<Vec<u32>>, e: usize) -> SlotTable {
        let mut v = SlotTable::default();
        v.prepare(&LayerPlacement { layer: 0, gpus }, e);
        v
    }

    #[test]
    fn copies_in_slot_order() {
        let v = view(vec![vec![1, 0], vec![2, 1], vec![0, 1]], 3);
        assert_eq!(v.copies(0), &[1, 4]);
        assert_eq!(v.copies(1), &[0, 3, 5]);
        assert_eq!(v.copies(2), &[2]);
        assert_eq!(v.slot_gpu, vec![0, 0, 1, 1, 2, 2]);
    }

    #[test]
    fn nearest_follows_sglang() {
        // 2 nodes × 2 GPUs, one slot each; an expert on GPUs 0 and 3
        let v = view(vec![vec![0], vec![1], vec![2], vec![0]], 3);
        let cand = v.copies(0);
        let n = |ver, r| nearest(ver, cand, &v.slot_gpu, r, 2);
        assert_eq!(n(SglangVersion::Nearest, 0), Some(0));
        assert_eq!(n(SglangVersion::Nearest, 1), Some(0));
        assert_eq!(n(SglangVersion::Nearest, 2), Some(3));
        assert_eq!(n(SglangVersion::SameGpu, 1), None);
        // one node: the node does not narrow the choice
        let one = view(vec![vec![0], vec![1], vec![2], vec![0]], 3);
        assert_eq!(
            nearest(SglangVersion::Nearest, one.copies(0), &one.slot_gpu, 1, 4),
            None
        );
    }

    #[test]
    fn local_first_routes() {
        let t = Topology::new(2, 2).unwrap();
        // expert 0 on GPUs 0 and 1 (node 0), expert 1 on GPU 2
        let v = view(vec![vec![0], vec![0], vec![1], vec![1]], 2);
        let mut r = Routes::default();
        r.build(Rule::LocalFirst, &v, t, 4, None, &[]);
        let got = |s, e| {
            r.entries(s, e)
                .map(|i| (r.gpu[i], r.frac[i]))
                .collect::<Vec<_>>()
        };
        assert_eq!(got(0, 0), vec![(0, 1.0)]);
        assert_eq!(got(2, 0), vec![(0, 0.5), (1, 0.5)]);
        assert_eq!(got(1, 1), vec![(2, 0.5), (3, 0.5)]);
        assert_eq!(got(3, 1), vec![(3, 1.0)]);
    }

    #[test]
    fn grace_weights_and_their_zero_guard() {
        let t = Topology::new(1, 3).unwrap();
        // expert 0 on every GPU; GPU 2 predicted idle
        let v = view(vec![vec![0], vec![0], vec![0]], 1);
        let mut r = Routes::default();
        let got = |r: &Routes, s| {
            r.entries(s, 0)
                .map(|i| (r.gpu[i], r.frac[i]))
                .collect::<Vec<_>>()
        };
        r.build(Rule::GraceWeighted, &v, t, 1, None, &[1.0, 3.0, 0.0]);
        assert_eq!(got(&r, 0), vec![(2, 1.0)]);
        // a prediction missing for GPU 2 counts as load 0
        r.build(Rule::GraceWeighted, &v, t, 1, None, &[1.0, 3.0]);
        assert_eq!(got(&r, 0), vec![(2, 1.0)]);
        // weights 1, 1/3, 1/6 of a sum 3/2
        r.build(Rule::GraceWeighted, &v, t, 1, None, &[1.0, 3.0, 6.0]);
        let f = got(&r, 0);
        let want = [6.0 / 9.0, 2.0 / 9.0, 1.0 / 9.0];
        assert!(
            f.iter().zip(want).all(|(x, w)| (x.1 - w).abs() < 1e-15),
            "{f:?}"
        );
        // own copy first: source 1 keeps its pairs whatever the weights
        r.build(Rule::GraceTopology, &v, t, 2, None, &[1.0, 3.0, 6.0]);
        assert_eq!(got(&r, 1), vec![(1, 1.0)]);
    }
}
