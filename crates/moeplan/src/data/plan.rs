//! Plans: for every MoE layer, which logical experts each GPU hosts.
//!
//! A logical expert may sit on several GPUs (replicas); slot counts may differ
//! between layers (CRAFT spends replicas unevenly) and between GPUs of one
//! layer, as long as each GPU's total over all layers is what the planner
//! promised. [`Plan::new`] checks every invariant, so a `Plan` value is always
//! servable: every expert has a copy in every layer and every id is in range.

use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

pub(crate) use super::provenance::{Provenance, Scope};

/// Most slots (experts + replicas over all GPUs) one layer may have.
pub(crate) const MAX_SLOTS_PER_LAYER: usize = 1 << 20;

/// Where the copies of one layer's experts live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct LayerPlacement {
    /// The model's layer id.
    pub layer: u32,
    /// `gpus[g]` lists the logical experts GPU `g` hosts, in slot order.
    pub gpus: Vec<Vec<u32>>,
}

impl LayerPlacement {
    /// Slots in this layer over all GPUs (experts plus replicas).
    pub fn total_slots(&self) -> usize {
        self.gpus.iter().map(Vec::len).sum()
    }

    /// At most [`MAX_SLOTS_PER_LAYER`] slots: a bound that keeps a hostile
    /// plan file from making the replay allocate without limit (real plans
    /// are far below it).
    fn check_slots(&self) -> Result<()> {
        let n = self.total_slots();
        if n > MAX_SLOTS_PER_LAYER {
            return Err(Error::Plan(format!(
                "layer {} has {n} slots, more than the {MAX_SLOTS_PER_LAYER} supported",
                self.layer,
            )));
        }
        Ok(())
    }

    /// Copies of each logical expert.
    pub fn copies(&self, num_experts: usize) -> Vec<u32> {
        let mut c = vec![0u32; num_experts];
        for &e in self.gpus.iter().flatten() {
            if let Some(x) = c.get_mut(e as usize) {
                *x += 1;
            }
        }
        c
    }

    /// Slots holding an expert the same GPU already holds: they add memory
    /// and no balance, since both copies receive the same GPU's tokens.
    pub(crate) fn same_gpu_duplicates(&self) -> usize {
        self.gpus
            .iter()
            .map(|g| {
                // A GPU's few slots are compared pairwise (a schedule
                // checks every layer of every batch); many are sorted.
                if g.len() <= 32 {
                    (1..g.len()).filter(|&i| g[..i].contains(&g[i])).count()
                } else {
                    let mut v = g.clone();
                    v.sort_unstable();
                    v.windows(2).filter(|w| w[0] == w[1]).count()
                }
            })
            .sum()
    }
}

/// A complete, validated placement for every MoE layer of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    topology: Topology,
    num_experts: usize,
    layers: Vec<LayerPlacement>,
    algorithm: String,
    provenance: Option<Provenance>,
    /// Per MoE layer and logical expert, the load the plan was planned on
    /// (summed over its planning batches): the offline profile GRACE's
    /// routing rules weigh copies by (Eq. 3). `layers × num_experts`.
    profile: Option<Array2<f64>>,
}

impl Plan {
    /// Builds a plan and checks it; see `Plan::validate` for the rules.
    ///
    /// ```
    /// use moeplan::{Plan, Topology, LayerPlacement};
    /// let t = Topology::new(1, 2)?;
    /// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0, 1], vec![2, 1]] };
    /// let plan = Plan::new(t, 3, vec![layer], "by-hand")?;
    /// assert_eq!(plan.summary().replicas, 1);
    /// // expert 2 missing from the layer: rejected
    /// let bad = LayerPlacement { layer: 0, gpus: vec![vec![0], vec![1]] };
    /// assert!(Plan::new(t, 3, vec![bad], "by-hand").is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(
        topology: Topology,
        num_experts: usize,
        layers: Vec<LayerPlacement>,
        algorithm: impl Into<String>,
    ) -> Result<Self> {
        let plan = Plan {
            topology,
            num_experts,
            layers,
            algorithm: algorithm.into(),
            provenance: None,
            profile: None,
        };
        // The invariants alone: the summary is computed when asked for
        // (a Libra schedule makes a plan per batch and never asks).
        plan.check()?;
        Ok(plan)
    }

    /// `base` with copies appended to its GPUs' slots, layer by layer
    /// (`layers[ℓ]` the base's layer ℓ with slots added after its own):
    /// Libra's plan of one batch. Checks only what the appended slots can
    /// break — the same layers and GPUs, each base slot list a prefix,
    /// expert ids in range, the slot bound — since every expert already has
    /// its base copy: O(slots) with no allocation, where [`Plan::new`]
    /// counts every expert's copies (a Libra schedule makes a plan per
    /// batch, 64 on the page's default).
    ///
    /// ```
    /// use moeplan::{LayerPlacement, Plan, Topology};
    /// let base = Plan::new(Topology::new(1, 2)?, 2, vec![LayerPlacement { layer: 0, gpus: vec![vec![0], vec![1]] }], "base")?;
    /// let more = vec![LayerPlacement { layer: 0, gpus: vec![vec![0, 1], vec![1]] }];
    /// assert_eq!(Plan::extending(&base, more, "libra")?.summary().replicas, 1);
    /// let lost = vec![LayerPlacement { layer: 0, gpus: vec![vec![1], vec![1]] }];
    /// assert!(Plan::extending(&base, lost, "libra").is_err()); // expert 0's base copy is gone
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn extending(
        base: &Plan,
        layers: Vec<LayerPlacement>,
        algorithm: impl Into<String>,
    ) -> Result<Self> {
        if layers.len() != base.layers.len() {
            return Err(Error::Plan(format!(
                "{} layers extend a base of {}",
                layers.len(),
                base.layers.len()
            )));
        }
        let e = base.num_experts;
        for (lp, bp) in layers.iter().zip(&base.layers) {
            if lp.layer != bp.layer || lp.gpus.len() != bp.gpus.len() {
                return Err(Error::Plan(format!(
                    "layer {} ({} GPUs) does not extend the base's layer {} ({} GPUs)",
                    lp.layer,
                    lp.gpus.len(),
                    bp.layer,
                    bp.gpus.len()
                )));
            }
            lp.check_slots()?;
            for (g, (slots, own)) in lp.gpus.iter().zip(&bp.gpus).enumerate() {
                let added = slots.strip_prefix(own.as_slice()).ok_or_else(|| {
                    Error::Plan(format!(
                        "layer {}, GPU {g}: the base's slots are not kept first",
                        lp.layer
                    ))
                })?;
                if let Some(&bad) = added.iter().find(|&&x| x as usize >= e) {
                    return Err(Error::Plan(format!(
                        "layer {}, GPU {g}: expert {bad} is out of range (0..{e})",
                        lp.layer
                    )));
                }
            }
        }
        Ok(Plan {
            topology: base.topology,
            num_experts: e,
            layers,
            algorithm: algorithm.into(),
            provenance: None,
            profile: None,
        })
    }

    /// Checks every invariant and returns the memory summary: at least one
    /// layer, strictly increasing layer ids, one slot list per GPU, expert ids
    /// in range, every logical expert with at least one copy in every layer.
    /// Two copies of an expert on one GPU are legal (DeepSeek's EPLB makes
    /// them) and counted in [`PlanSummary::same_gpu_duplicates`].
    #[cfg(test)]
    pub(crate) fn validate(&self) -> Result<PlanSummary> {
        self.check()?;
        Ok(self.summary())
    }

    /// [`Plan::validate`]'s invariants, without the summary.
    fn check(&self) -> Result<()> {
        let d = self.topology.num_gpus();
        let e = self.num_experts;
        if e == 0 {
            return Err(Error::Plan("zero experts per layer".into()));
        }
        if self.layers.is_empty() {
            return Err(Error::Plan("no layers".into()));
        }
        if self.layers.windows(2).any(|w| w[0].layer >= w[1].layer) {
            return Err(Error::Plan("layer ids must be strictly increasing".into()));
        }
        for lp in &self.layers {
            if lp.gpus.len() != d {
                return Err(Error::Plan(format!(
                    "layer {} lists {} GPUs, the topology has {d}",
                    lp.layer,
                    lp.gpus.len()
                )));
            }
            lp.check_slots()?;
            for (g, slots) in lp.gpus.iter().enumerate() {
                if let Some(&bad) = slots.iter().find(|&&x| x as usize >= e) {
                    return Err(Error::Plan(format!(
                        "layer {}, GPU {g}: expert {bad} is out of range (0..{e})",
                        lp.layer
                    )));
                }
            }
            if let Some(missing) = lp.copies(e).iter().position(|&c| c == 0) {
                return Err(Error::Plan(format!(
                    "layer {}: expert {missing} has no copy on any GPU",
                    lp.layer
                )));
            }
        }
        Ok(())
    }
    /// A 64-bit hash of everything a judgement reads: the cluster, the
    /// experts, every layer's slots, the planner's name and the profile's
    /// bits (GRACE's rules weigh copies by it). What [`crate::judge::Judge`]
    /// keeps its answers by; one pass over the slots and the profile.
    pub(crate) fn content_hash(&self) -> u64 {
        // FxHash's step: not a defence against crafted collisions (a plan
        // only ever collides with a plan the same front end made), fast
        // over the ~20 k slots of a DeepSeek-V3 plan on 64 GPUs.
        fn step(h: u64, x: u64) -> u64 {
            (h.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
        }
        let t = self.topology;
        let mut h = step(0, t.nodes() as u64);
        h = step(h, t.gpus_per_node() as u64);
        h = step(h, self.num_experts as u64);
        for b in self.algorithm.bytes() {
            h = step(h, u64::from(b));
        }
        for lp in &self.layers {
            h = step(h, u64::from(lp.layer));
            for g in &lp.gpus {
                h = step(h, g.len() as u64);
                for &e in g {
                    h = step(h, u64::from(e));
                }
            }
        }
        match &self.profile {
            Some(p) => p.iter().fold(step(h, 1), |h, x| step(h, x.to_bits())),
            None => step(h, 0),
        }
    }

    /// Memory and replica accounting (assumes a valid plan).
    pub fn summary(&self) -> PlanSummary {
        let d = self.topology.num_gpus();
        let mut slots_per_gpu = vec![0usize; d];
        let mut replicas_per_layer = Vec::with_capacity(self.layers.len());
        let mut same_gpu_duplicates = 0;
        for lp in &self.layers {
            for (g, s) in lp.gpus.iter().enumerate() {
                slots_per_gpu[g] += s.len();
            }
            replicas_per_layer.push(lp.total_slots().saturating_sub(self.num_experts));
            same_gpu_duplicates += lp.same_gpu_duplicates();
        }
        let fullest = slots_per_gpu.iter().copied().max().unwrap_or(0);
        PlanSummary {
            replicas: replicas_per_layer.iter().sum(),
            replica_slots_fullest_gpu: fullest
                .saturating_sub((self.num_experts * self.layers.len()).div_ceil(d.max(1))),
            slots_per_gpu_max: fullest,
            slots_per_gpu_min: slots_per_gpu.iter().copied().min().unwrap_or(0),
            slots_per_gpu,
            replicas_per_layer,
            same_gpu_duplicates,
        }
    }

    /// The cluster this plan is for.
    pub fn topology(&self) -> Topology {
        self.topology
    }

    /// Logical experts per layer.
    pub fn num_experts(&self) -> usize {
        self.num_experts
    }

    /// Placement of every MoE layer.
    pub fn layers(&self) -> &[LayerPlacement] {
        &self.layers
    }

    /// Name of the planner that made it.
    pub fn algorithm(&self) -> &str {
        &self.algorithm
    }

    /// The same plan recording what it was planned on (`None`: unknown).
    pub fn with_provenance(mut self, provenance: Option<Provenance>) -> Plan {
        self.provenance = provenance;
        self
    }

    /// What the plan was planned on, when it records it.
    pub fn provenance(&self) -> Option<&Provenance> {
        self.provenance.as_ref()
    }

    /// The same plan recording `profile`: per MoE layer and logical expert,
    /// the load it was planned on (summed over its planning batches) —
    /// what a router that profiled those batches knows, and all GRACE's
    /// routing rules may predict from when the plan serves other batches.
    /// `None` clears it. Errors unless `layers × num_experts`, finite and
    /// non-negative.
    pub(crate) fn with_profile(mut self, profile: Option<Array2<f64>>) -> Result<Plan> {
        if let Some(p) = &profile {
            let want = (self.layers.len(), self.num_experts);
            if p.dim() != want {
                return Err(Error::Plan(format!(
                    "the load profile is {} × {}, the plan has {} layers × {} experts",
                    p.dim().0,
                    p.dim().1,
                    want.0,
                    want.1
                )));
            }
            if let Some(bad) = p.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
                return Err(Error::Plan(format!(
                    "the load profile holds {bad}: loads must be finite and non-negative"
                )));
            }
        }
        self.profile = profile;
        Ok(self)
    }

    /// The loads the plan was planned on, per layer and expert, when it
    /// records them (`Plan::with_profile`).
    pub fn profile(&self) -> Option<ndarray::ArrayView2<'_, f64>> {
        self.profile.as_ref().map(|p| p.view())
    }

    /// Checks that this plan was made for `trace`: same experts per layer and
    /// the same MoE layer ids.
    pub(crate) fn check_matches(&self, trace: &LoadTrace) -> Result<()> {
        if self.num_experts != trace.num_experts() {
            return Err(Error::Mismatch(format!(
                "the plan has {} experts per layer, the trace {}",
                self.num_experts,
                trace.num_experts()
            )));
        }
        let ids: Vec<u32> = self.layers.iter().map(|l| l.layer).collect();
        if ids != trace.layer_ids() {
            return Err(Error::Mismatch(format!(
                "the plan covers MoE layers {}, the trace {}",
                id_list(&ids),
                id_list(trace.layer_ids())
            )));
        }
        Ok(())
    }

    /// Slots per GPU when every GPU holds the same number in every layer —
    /// the shape engines with a fixed physical-expert count need.
    pub fn uniform_slots_per_gpu(&self) -> Option<usize> {
        let s = self.layers.first()?.gpus.first()?.len();
        self.layers
            .iter()
            .all(|l| l.gpus.iter().all(|g| g.len() == s))
            .then_some(s)
    }

    /// Per layer, the logical expert of every physical slot, GPU-major
    /// (GPU `g` owns slots `g·S .. (g+1)·S`).
    pub(crate) fn physical_to_logical(&self) -> Vec<Vec<u32>> {
        self.layers
            .iter()
            .map(|l| l.gpus.iter().flatten().copied().collect())
            .collect()
    }
}

impl Plan {
    /// The closest plan every engine with one physical-expert count per GPU
    /// can load: each GPU of each layer is filled up to the largest slot
    /// count of the plan, each extra slot taking the expert with the highest
    /// load per copy (`loads`: layers × experts) not yet on that GPU. The
    /// original placement stays; only replicas are added.
    ///
    /// ```
    /// use moeplan::{LayerPlacement, Plan, Topology};
    /// use ndarray::array;
    /// let t = Topology::new(1, 2)?;
    /// let layers = vec![
    ///     LayerPlacement { layer: 0, gpus: vec![vec![0, 1], vec![2, 0]] },
    ///     LayerPlacement { layer: 1, gpus: vec![vec![0], vec![1, 2]] },
    /// ];
    /// let plan = Plan::new(t, 3, layers, "x")?;
    /// let padded = plan.padded_to_uniform(array![[5., 1., 1.], [1., 1., 9.]].view())?;
    /// assert_eq!(padded.uniform_slots_per_gpu(), Some(2));
    /// assert_eq!(padded.layers()[1].gpus[0], vec![0, 2]); // expert 2 is hottest per copy
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn padded_to_uniform(&self, loads: ndarray::ArrayView2<'_, f64>) -> Result<Plan> {
        let target = self
            .layers
            .iter()
            .flat_map(|l| l.gpus.iter().map(Vec::len))
            .max()
            .unwrap_or(0);
        if loads.dim() != (self.layers.len(), self.num_experts) {
            return Err(Error::Mismatch(format!(
                "loads are {:?}, the plan has {} layers of {} experts",
                loads.dim(),
                self.layers.len(),
                self.num_experts
            )));
        }
        if target > self.num_experts {
            return Err(Error::Plan(format!(
                "{target} slots per GPU is more than the {} experts: padding would need two copies of an expert on one GPU",
                self.num_experts
            )));
        }
        let mut layers = self.layers.clone();
        for (lp, w) in layers.iter_mut().zip(loads.outer_iter()) {
            let mut copies = lp.copies(self.num_experts);
            for g in 0..lp.gpus.len() {
                while lp.gpus[g].len() < target {
                    let best = (0..self.num_experts)
                        .filter(|&e| !lp.gpus[g].contains(&(e as u32)))
                        .max_by(|&a, &b| {
                            (w[a] / copies[a].max(1) as f64)
                                .total_cmp(&(w[b] / copies[b].max(1) as f64))
                                .then(b.cmp(&a))
                        });
                    let Some(e) = best else { break };
                    lp.gpus[g].push(e as u32);
                    copies[e] += 1;
                }
            }
        }
        Plan::new(
            self.topology,
            self.num_experts,
            layers,
            self.algorithm.clone(),
        )?
        .with_provenance(self.provenance.clone())
        .with_profile(self.profile.clone())
    }
}

impl Plan {
    /// The same plan with no GPU holding two copies of one expert, for
    /// engines that allow one slot per expert per device (vllm-ascend maps
    /// each expert to one local slot, so a second copy is never routed to).
    /// Each second copy is swapped with a copy of another expert, one the
    /// first GPU lacks, on a GPU that lacks the first expert, so no swap
    /// makes a new second copy, every GPU keeps its slot count and every
    /// expert its copy count. Of all such swaps the one leaving the pair's busier GPU least
    /// loaded under even split of `loads` (layers × experts, the trace's
    /// summed counts) is taken, which usually relieves the layer, since the
    /// GPU holding two copies carries two shares of that expert. Where no
    /// single swap avoids making the layer's busiest GPU busier (EPLB
    /// balances so tightly that it happens on the real DeepSeek-V3 trace at
    /// 192 redundant experts), the layer is then rebalanced by swaps off its
    /// busiest GPU that create no second copy, for as long as one lowers it.
    /// On that trace (64 GPUs, 64 to 256 redundant experts) no layer's
    /// busiest GPU ends up busier, and balancedness rises where EPLB doubled
    /// up most (0.9838 → 0.9853 at 192). Where no single swap can move a
    /// second copy (every GPU lacking the expert holds only experts the
    /// first GPU has), the layer is laid out again with its copy and slot
    /// counts — Ryser's construction, heaviest experts first on the emptiest,
    /// least-loaded GPUs — and then rebalanced the same way. Refused with the
    /// reason when impossible: an expert with more copies than there are
    /// GPUs, a GPU with more slots than there are experts, or (with unequal
    /// slot counts) no 0-1 layout of these copy and slot counts at all.
    ///
    /// ```
    /// use moeplan::{LayerPlacement, Plan, Topology};
    /// use ndarray::array;
    /// let t = Topology::new(1, 2)?;
    /// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0, 0], vec![1, 2]] };
    /// let plan = Plan::new(t, 3, vec![layer], "x")?;
    /// let fixed = plan.without_same_gpu_duplicates(array![[2., 10., 10.]].view())?;
    /// assert_eq!(fixed.summary().same_gpu_duplicates, 0);
    /// assert_eq!(fixed.layers()[0].gpus, vec![vec![0, 1], vec![0, 2]]);
    /// // one GPU cannot hold two copies apart
    /// let one = Plan::new(Topology::new(1, 1)?, 1, vec![LayerPlacement { layer: 0, gpus: vec![vec![0, 0]] }], "x")?;
    /// assert!(one.without_same_gpu_duplicates(array![[1.]].view()).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn without_same_gpu_duplicates(&self, loads: ndarray::ArrayView2<'_, f64>) -> Result<Plan> {
        let e = self.num_experts;
        if loads.dim() != (self.layers.len(), e) {
            return Err(Error::Mismatch(format!(
                "loads are {:?}, the plan has {} layers of {e} experts",
                loads.dim(),
                self.layers.len(),
            )));
        }
        let d = self.topology.num_gpus();
        let mut layers = self.layers.clone();
        for (lp, w) in layers.iter_mut().zip(loads.outer_iter()) {
            if lp.same_gpu_duplicates() == 0 {
                continue;
            }
            let impossible = |why: String| {
                Error::Plan(format!(
                    "layer {}: {why}, so some GPU must hold an expert twice",
                    lp.layer
                ))
            };
            let copies = lp.copies(e);
            if let Some(x) = copies.iter().position(|&c| c as usize > d) {
                return Err(impossible(format!(
                    "expert {x} has {} copies on {d} GPUs",
                    copies[x]
                )));
            }
            if let Some(g) = lp.gpus.iter().position(|s| s.len() > e) {
                return Err(impossible(format!(
                    "GPU {g} has {} slots for {e} experts",
                    lp.gpus[g].len()
                )));
            }
            // Even split: each copy of expert x carries w[x] / copies[x].
            let share: Vec<f64> = (0..e).map(|x| w[x] / f64::from(copies[x].max(1))).collect();
            let mut load: Vec<f64> = lp
                .gpus
                .iter()
                .map(|s| s.iter().map(|&x| share[x as usize]).sum())
                .collect();
            let busiest = load.iter().copied().fold(0.0, f64::max);
            // Every swap removes one second copy and adds none, so this ends.
            while let Some((a, i)) = second_copy(&lp.gpus) {
                let x = lp.gpus[a][i];
                let xs = share[x as usize];
                let mut best: Option<(f64, usize, usize)> = None;
                for (b, slots) in lp.gpus.iter().enumerate() {
                    if b == a || slots.contains(&x) {
                        continue;
                    }
                    for (j, &y) in slots.iter().enumerate() {
                        if lp.gpus[a].contains(&y) {
                            continue;
                        }
                        let ys = share[y as usize];
                        let worst = (load[a] - xs + ys).max(load[b] + xs - ys);
                        if best.is_none_or(|(m, _, _)| worst < m) {
                            best = Some((worst, b, j));
                        }
                    }
                }
                let Some((_, b, j)) = best else {
                    // No single swap: every GPU lacking x holds only experts
                    // GPU a has. Lay the layer out again, copy counts and
                    // slot counts kept, then rebalance below.
                    let slots: Vec<usize> = lp.gpus.iter().map(Vec::len).collect();
                    lp.gpus = place_apart(&copies, &slots, &share).ok_or_else(|| {
                        impossible(format!(
                            "no placement of these copy counts in these slots keeps the copies of \
                             every expert apart (GPU {a} holds expert {x} twice)"
                        ))
                    })?;
                    load = lp
                        .gpus
                        .iter()
                        .map(|s| s.iter().map(|&x| share[x as usize]).sum())
                        .collect();
                    break;
                };
                swap(&mut lp.gpus, &mut load, &share, (a, i), (b, j));
            }
            if load.iter().any(|&l| l > busiest) {
                relieve_busiest(&mut lp.gpus, &mut load, &share);
            }
        }
        Plan::new(self.topology, e, layers, self.algorithm.clone())?
            .with_provenance(self.provenance.clone())
            .with_profile(self.profile.clone())
    }
}

/// A placement of `copies[x]` copies of each expert into GPUs of `slots`
/// slots with no GPU holding an expert twice, or `None` when none exists.
/// Experts with most copies first (heaviest share among equals), each on the
/// GPUs with the most free slots (least loaded among equals): Ryser's
/// construction of a 0-1 matrix with given row and column sums, which finds
/// one whenever one exists. O(E · D log D).
fn place_apart(copies: &[u32], slots: &[usize], share: &[f64]) -> Option<Vec<Vec<u32>>> {
    let mut room = slots.to_vec();
    let mut load = vec![0.0f64; slots.len()];
    let mut gpus: Vec<Vec<u32>> = slots.iter().map(|&n| Vec::with_capacity(n)).collect();
    let mut order: Vec<usize> = (0..copies.len()).collect();
    crate::sort::sort_by(&mut order, |&p, &q| {
        copies[q]
            .cmp(&copies[p])
            .then(share[q].total_cmp(&share[p]))
            .then(p.cmp(&q))
    });
    let mut by: Vec<usize> = (0..slots.len()).collect();
    for x in order {
        let c = copies[x] as usize;
        crate::sort::sort_by(&mut by, |&p, &q| {
            room[q]
                .cmp(&room[p])
                .then(load[p].total_cmp(&load[q]))
                .then(p.cmp(&q))
        });
        let chosen = by.get(..c)?;
        if chosen.iter().any(|&g| room[g] == 0) {
            return None;
        }
        for &g in chosen {
            gpus[g].push(x as u32);
            room[g] -= 1;
            load[g] += share[x];
        }
    }
    room.iter().all(|&r| r == 0).then_some(gpus)
}

/// Exchanges the experts of slot `i` of GPU `a` and slot `j` of GPU `b`,
/// keeping the GPU loads (`share`: load per copy of each expert) current.
fn swap(
    gpus: &mut [Vec<u32>],
    load: &mut [f64],
    share: &[f64],
    (a, i): (usize, usize),
    (b, j): (usize, usize),
) {
    let (x, y) = (gpus[a][i], gpus[b][j]);
    gpus[a][i] = y;
    gpus[b][j] = x;
    let moved = share[x as usize] - share[y as usize];
    load[a] -= moved;
    load[b] += moved;
}

/// Lowers one layer's busiest GPU by exchanging one of its experts with a
/// lighter one on another GPU, leaving both below the old maximum and no
/// GPU with two copies of an expert, until no exchange does. Each step
/// lowers the sorted load vector, so it ends; the cap bounds the time.
fn relieve_busiest(gpus: &mut [Vec<u32>], load: &mut [f64], share: &[f64]) {
    for _ in 0..4 * gpus.len() {
        let Some(a) = (0..load.len()).max_by(|&p, &q| load[p].total_cmp(&load[q])) else {
            return;
        };
        let top = load[a];
        let mut best: Option<(f64, usize, usize, usize)> = None;
        for (i, &x) in gpus[a].iter().enumerate() {
            let xs = share[x as usize];
            for (b, slots) in gpus.iter().enumerate() {
                if b == a || slots.contains(&x) {
                    continue;
                }
                for (j, &y) in slots.iter().enumerate() {
                    let ys = share[y as usize];
                    if ys >= xs || gpus[a].contains(&y) {
                        continue;
                    }
                    let worst = (top - xs + ys).max(load[b] + xs - ys);
                    // A relative margin: float drift must not make a step
                    // that only looks better.
                    if worst < top * (1.0 - 1e-12) && best.is_none_or(|(m, ..)| worst < m) {
                        best = Some((worst, i, b, j));
                    }
                }
            }
        }
        let Some((_, i, b, j)) = best else { return };
        swap(gpus, load, share, (a, i), (b, j));
    }
}

/// The first slot holding an expert its GPU already holds: (GPU, slot).
pub(crate) fn second_copy(gpus: &[Vec<u32>]) -> Option<(usize, usize)> {
    gpus.iter().enumerate().find_map(|(g, slots)| {
        (1..slots.len())
            .find(|&i| slots[..i].contains(&slots[i]))
            .map(|i| (g, i))
    })
}

/// Shortens a list of layer ids for an error message.
fn id_list(ids: &[u32]) -> String {
    match ids {
        [] => "none".into(),
        [one] => format!("[{one}]"),
        [first, .., last] if ids.len() > 6 => {
            format!("[{first}..{last}] ({} layers)", ids.len())
        }
        _ => format!("{ids:?}"),
    }
}

/// Memory accounting of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct PlanSummary {
    /// Copies beyond the first, over all layers.
    pub replicas: usize,
    /// Replicas in each layer.
    pub replicas_per_layer: Vec<usize>,
    /// Slots (experts + replicas) each GPU holds over all layers: its expert
    /// memory in units of one expert.
    pub slots_per_gpu: Vec<usize>,
    /// The largest entry of `slots_per_gpu`: what sizes the KV-cache budget.
    pub slots_per_gpu_max: usize,
    /// The fullest GPU's replica memory: `slots_per_gpu_max` beyond an even
    /// share of the experts without replicas (`⌈E · L / D⌉`), in units of
    /// one expert. Plans compared "at equal memory" are compared by this,
    /// not by `replicas` (the total): a plan with uneven groups can hold
    /// fewer replicas in all and still leave its fullest GPU less room for
    /// the KV cache.
    pub replica_slots_fullest_gpu: usize,
    /// The smallest entry of `slots_per_gpu`.
    pub slots_per_gpu_min: usize,
    /// Slots holding a second copy of an expert already on the same GPU.
    pub same_gpu_duplicates: usize,
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn plan_with_profile_example() {
        let run = || {
            use moeplan::{LoadTrace, Topology, planners::contiguous};
            use ndarray::{Array3, array};
            let trace = LoadTrace::new(Array3::from_elem((2, 1, 2), 3.0), vec![0])?;
            let plan = contiguous(&trace, Topology::new(1, 2)?)?;
            let p = plan.clone().with_profile(Some(array![[6.0, 6.0]]))?;
            assert_eq!(p.profile().map(|a| a.row(0).to_vec()), Some(vec![6.0, 6.0]));
            assert!(plan.with_profile(Some(array![[1.0, -1.0]])).is_err());
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {
    #[test]
    fn plan_with_provenance_example() {
        let run = || {
            use moeplan::data::Provenance;
            use moeplan::{LoadTrace, Topology, planners::contiguous};
            use ndarray::Array3;
            let trace = LoadTrace::new(Array3::from_elem((4, 1, 4), 1.0), vec![0])?;
            let plan = contiguous(&trace, Topology::new(1, 2)?)?
                .with_provenance(Some(Provenance::of(&trace, 0..3)?));
            assert_eq!(plan.provenance().map(|p| p.traces[0].planned), Some([0, 3]));
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
