//! Replica selection: which physical copy of its logical expert each
//! (token, k) row goes to.
//!
//! Physical slots are numbered GPU-major as in the plan ([`LayerSlots`]):
//! GPU `g` owns slots `gpu_start[g] .. gpu_start[g + 1]`, so ordering rows by
//! slot orders them by (GPU, slot). The rules are the planner's own
//! ([`moeplan::sim::Rule`]), so the CPU reference here is the model the
//! planner's simulator replays:
//!
//! - **`vllm`** ([`Rule::Vllm`], vLLM's EPLB mapping): the row's flattened
//!   position in its source rank's local batch, `p = local_token · top_k +
//!   k`, picks copy `p mod copies(e)`, copies listed in physical-slot order
//!   (vLLM's `logical_to_physical_map`). The core replays the same rule on
//!   token routes but exposes no per-pair function, so the definition is
//!   shared through `tests/cpu.rs`, which checks this selection against
//!   [`moeplan::sim::simulate`] integer for integer.
//! - **`sglang-static`** ([`Rule::SglangStatic`] with
//!   [`SglangVersion::Nearest`]) and **`sglang-static-v0`**
//!   ([`SglangVersion::SameGpu`], SGLang before `_find_nearest_expert`):
//!   one fixed copy per (source rank, logical expert), the table taken from
//!   [`moeplan::sim::sglang_dispatch_map`] — the core's port of SGLang's
//!   `compute_logical_to_rank_dispatch_physical_map`, with CPython's
//!   `random.Random(42)` walked over every layer of the model. The table of
//!   a layer therefore depends on the plan's layers before it:
//!   [`Selector::for_plan`] and [`Selector::from_plan`] take the whole plan.
//!
//! Source ranks are the GPUs: token `t` of `n` comes from rank `⌊t·D/n⌋`.

use moeplan::sim::{Rule, SglangVersion, sglang_dispatch_map};
use moeplan::{LayerPlacement, Plan, Topology};

use crate::error::{Error, Result};
use crate::routing::{Routing, rank_first_token, source_rank};

/// One layer's placement, flattened GPU-major, with each logical expert's
/// copies in physical-slot order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerSlots {
    /// Logical experts.
    pub num_experts: usize,
    /// GPUs per node (for `sglang-static`'s same-node step).
    pub gpus_per_node: usize,
    /// GPU `g` owns slots `gpu_start[g] .. gpu_start[g + 1]` (`D + 1` entries).
    pub gpu_start: Vec<u32>,
    /// Logical expert of every slot.
    pub slot_expert: Vec<u32>,
    /// GPU of every slot.
    pub slot_gpu: Vec<u32>,
    /// Copies of expert `e` are `copy_slots[copy_start[e] .. copy_start[e + 1]]`
    /// (`E + 1` entries).
    pub copy_start: Vec<u32>,
    /// Slots of every expert's copies, ascending within an expert.
    pub copy_slots: Vec<u32>,
}

impl LayerSlots {
    /// Flattens `gpus[g]` (the experts GPU `g` hosts, in slot order).
    ///
    /// ```
    /// use moeplan_cuda::select::LayerSlots;
    /// let s = LayerSlots::new(&[vec![0, 1], vec![2, 0]], 3, 2)?;
    /// assert_eq!(s.copies(0), &[0, 3]);
    /// assert!(LayerSlots::new(&[vec![0], vec![0]], 2, 1).is_err()); // expert 1 has no copy
    /// # Ok::<(), moeplan_cuda::Error>(())
    /// ```
    pub fn new(gpus: &[Vec<u32>], num_experts: usize, gpus_per_node: usize) -> Result<Self> {
        if gpus.is_empty() || gpus_per_node == 0 || num_experts == 0 {
            return Err(Error::Argument(
                "a layer needs GPUs, GPUs per node and experts".into(),
            ));
        }
        let total: usize = gpus.iter().map(Vec::len).sum();
        if total > u32::MAX as usize / 2 {
            return Err(Error::Argument(format!("{total} slots is too many")));
        }
        let mut gpu_start = Vec::with_capacity(gpus.len() + 1);
        let mut slot_expert = Vec::with_capacity(total);
        let mut slot_gpu = Vec::with_capacity(total);
        gpu_start.push(0u32);
        for (g, list) in gpus.iter().enumerate() {
            for &e in list {
                if e as usize >= num_experts {
                    return Err(Error::Argument(format!(
                        "GPU {g} hosts expert {e}, out of range (0..{num_experts})"
                    )));
                }
                slot_expert.push(e);
                slot_gpu.push(g as u32);
            }
            gpu_start.push(slot_expert.len() as u32);
        }
        let mut copy_start = vec![0u32; num_experts + 1];
        for &e in &slot_expert {
            copy_start[e as usize + 1] += 1;
        }
        if let Some(e) = (0..num_experts).find(|&e| copy_start[e + 1] == 0) {
            return Err(Error::Argument(format!(
                "expert {e} has no copy on any GPU"
            )));
        }
        for e in 0..num_experts {
            copy_start[e + 1] += copy_start[e];
        }
        let mut cursor = copy_start.clone();
        let mut copy_slots = vec![0u32; total];
        for (s, &e) in slot_expert.iter().enumerate() {
            copy_slots[cursor[e as usize] as usize] = s as u32;
            cursor[e as usize] += 1;
        }
        Ok(LayerSlots {
            num_experts,
            gpus_per_node,
            gpu_start,
            slot_expert,
            slot_gpu,
            copy_start,
            copy_slots,
        })
    }

    /// Layer index `layer` of `plan`.
    pub fn from_plan(plan: &moeplan::Plan, layer: usize) -> Result<Self> {
        let lp = plan.layers().get(layer).ok_or_else(|| {
            Error::Argument(format!(
                "layer index {layer} is outside the plan's {} layers",
                plan.layers().len()
            ))
        })?;
        LayerSlots::new(
            &lp.gpus,
            plan.num_experts(),
            plan.topology().gpus_per_node(),
        )
    }

    /// This layer as a one-layer core [`Plan`] (layer id 0) on `D / G`
    /// nodes of `G = gpus_per_node` GPUs; `D` must be a multiple of `G`.
    ///
    /// ```
    /// use moeplan_cuda::select::LayerSlots;
    /// let s = LayerSlots::new(&[vec![0, 1], vec![2, 0]], 3, 1)?;
    /// let p = s.to_plan()?;
    /// assert_eq!((p.topology().nodes(), p.layers()[0].gpus[1].clone()), (2, vec![2, 0]));
    /// assert_eq!(LayerSlots::from_plan(&p, 0)?, s);
    /// # Ok::<(), moeplan_cuda::Error>(())
    /// ```
    pub fn to_plan(&self) -> Result<Plan> {
        let (d, gpn) = (self.num_gpus(), self.gpus_per_node);
        if d % gpn != 0 {
            return Err(Error::Argument(format!(
                "{d} GPUs do not make whole nodes of {gpn}"
            )));
        }
        let gpus = (0..d)
            .map(|g| self.slot_expert[self.gpu_slots(g)].to_vec())
            .collect();
        Ok(Plan::new(
            Topology::new(d / gpn, gpn)?,
            self.num_experts,
            vec![LayerPlacement { layer: 0, gpus }],
            "layer",
        )?)
    }

    /// GPUs (also the number of source ranks).
    pub fn num_gpus(&self) -> usize {
        self.gpu_start.len() - 1
    }

    /// Physical slots in all.
    pub fn num_slots(&self) -> usize {
        self.slot_expert.len()
    }

    /// Slots of GPU `g`.
    pub fn gpu_slots(&self, g: usize) -> std::ops::Range<usize> {
        self.gpu_start[g] as usize..self.gpu_start[g + 1] as usize
    }

    /// Slots holding expert `e`, ascending.
    pub fn copies(&self, e: usize) -> &[u32] {
        &self.copy_slots[self.copy_start[e] as usize..self.copy_start[e + 1] as usize]
    }

    /// Node of GPU `g`.
    pub fn node_of(&self, g: usize) -> usize {
        g / self.gpus_per_node
    }
}

/// The engine rule that picks a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchRule {
    /// vLLM: flattened position modulo copies.
    Vllm,
    /// SGLang's static rule, current versions (`_find_nearest_expert`):
    /// one fixed copy per (source rank, expert), nearest first.
    SglangStatic,
    /// SGLang's static rule before `_find_nearest_expert` (commits 01fec5c2,
    /// 6270b014): a copy on the rank's own GPU, else the seeded fair draw.
    SglangStaticV0,
}

impl DispatchRule {
    /// The simulator's rule: what the planner replays for this engine.
    ///
    /// ```
    /// use moeplan::sim::{Rule, SglangVersion};
    /// use moeplan_cuda::select::DispatchRule;
    /// assert_eq!(DispatchRule::SglangStaticV0.sim_rule(), Rule::SglangStatic(SglangVersion::SameGpu));
    /// ```
    pub fn sim_rule(self) -> Rule {
        match self {
            DispatchRule::Vllm => Rule::Vllm,
            DispatchRule::SglangStatic => Rule::SglangStatic(SglangVersion::Nearest),
            DispatchRule::SglangStaticV0 => Rule::SglangStatic(SglangVersion::SameGpu),
        }
    }
}

impl std::str::FromStr for DispatchRule {
    type Err = Error;
    /// `vllm`, `sglang-static`, `sglang-static-v0` (also under the core's
    /// name for it, `sglang-static-same-gpu`).
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "vllm" => Ok(DispatchRule::Vllm),
            "sglang-static" => Ok(DispatchRule::SglangStatic),
            "sglang-static-v0" | "sglang-static-same-gpu" => Ok(DispatchRule::SglangStaticV0),
            _ => Err(Error::Argument(format!(
                "unknown dispatch rule {s:?}; known: vllm, sglang-static, sglang-static-v0"
            ))),
        }
    }
}

impl std::fmt::Display for DispatchRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DispatchRule::Vllm => "vllm",
            DispatchRule::SglangStatic => "sglang-static",
            DispatchRule::SglangStaticV0 => "sglang-static-v0",
        })
    }
}

/// A rule made ready for one layer: what the selection kernels read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// vLLM's rule needs only the copies ([`LayerSlots::copies`]).
    Vllm,
    /// A physical slot per (source rank, logical expert), `D × E` row-major.
    Table(Vec<u32>),
}

impl Selector {
    /// `rule` for every layer of `plan`, in the plan's layer order. For the
    /// SGLang rules this is the core's [`sglang_dispatch_map`], computed
    /// once for the whole plan (cost: one walk of SGLang's loop over the
    /// model's layers).
    ///
    /// ```
    /// use moeplan::{LayerPlacement, Plan, Topology};
    /// use moeplan_cuda::select::{DispatchRule, Selector};
    /// // 2 nodes × 2 GPUs; expert 0 on GPUs 0 and 3, expert 1 on GPU 1
    /// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0], vec![1], vec![], vec![0]] };
    /// let plan = Plan::new(Topology::new(2, 2)?, 2, vec![layer], "by-hand")?;
    /// let Selector::Table(t) = &Selector::for_plan(DispatchRule::SglangStatic, &plan)?[0] else { panic!() };
    /// let e0: Vec<u32> = (0..4).map(|r| t[r * 2]).collect();
    /// assert_eq!(e0, [0, 0, 2, 2]); // own GPU (slots 0 and 2), else same node
    /// # Ok::<(), moeplan_cuda::Error>(())
    /// ```
    pub fn for_plan(rule: DispatchRule, plan: &Plan) -> Result<Vec<Selector>> {
        Ok(match rule.sim_rule() {
            Rule::SglangStatic(v) => sglang_dispatch_map(plan, v)?
                .into_iter()
                .map(Selector::Table)
                .collect(),
            _ => vec![Selector::Vllm; plan.layers().len()],
        })
    }

    /// `rule` for layer index `layer` of `plan` (the SGLang table depends
    /// on the layers before it, so the whole plan is needed).
    pub fn from_plan(rule: DispatchRule, plan: &Plan, layer: usize) -> Result<Selector> {
        let n = plan.layers().len();
        if layer >= n {
            return Err(Error::Argument(format!(
                "layer index {layer} is outside the plan's {n} layers"
            )));
        }
        Ok(match rule {
            DispatchRule::Vllm => Selector::Vllm,
            _ => Selector::for_plan(rule, plan)?.swap_remove(layer),
        })
    }

    /// `rule` for `slots` taken as the only layer of a model (layer id 0,
    /// no layers before it): what [`Selector::from_plan`] gives for
    /// [`LayerSlots::to_plan`].
    pub fn single_layer(rule: DispatchRule, slots: &LayerSlots) -> Result<Selector> {
        match rule {
            DispatchRule::Vllm => Ok(Selector::Vllm),
            _ => Selector::from_plan(rule, &slots.to_plan()?, 0),
        }
    }
}

/// The physical slot of every (token, k) row: the CPU reference of the
/// selection kernels.
///
/// ```
/// use moeplan_cuda::routing::Routing;
/// use moeplan_cuda::select::{select_cpu, LayerSlots, Selector};
/// // expert 0 has copies in slots 0 and 2; one rank, top-2
/// let s = LayerSlots::new(&[vec![0, 1, 0]], 2, 1)?;
/// let r = Routing::new(2, 2, vec![0, 1, 1, 0], vec![0.5; 4])?;
/// // positions 0..4: expert 0 at p = 0 → copy 0 (slot 0), at p = 3 → copy 1 (slot 2)
/// assert_eq!(select_cpu(&r, &s, &Selector::Vllm)?, [0, 1, 1, 2]);
/// # Ok::<(), moeplan_cuda::Error>(())
/// ```
pub fn select_cpu(routing: &Routing, slots: &LayerSlots, selector: &Selector) -> Result<Vec<u32>> {
    let (n, k) = (routing.tokens, routing.top_k);
    let d = slots.num_gpus();
    if let Some(&bad) = routing
        .ids
        .iter()
        .find(|&&e| e as usize >= slots.num_experts)
    {
        return Err(Error::Argument(format!(
            "routing names expert {bad}, the layer has {}",
            slots.num_experts
        )));
    }
    if let Selector::Table(t) = selector {
        if t.len() != d * slots.num_experts {
            return Err(Error::Argument(format!(
                "dispatch table has {} entries, {d} ranks × {} experts need {}",
                t.len(),
                slots.num_experts,
                d * slots.num_experts
            )));
        }
    }
    let mut phys = Vec::with_capacity(n * k);
    for t in 0..n {
        let r = source_rank(t, n, d);
        let local = t - rank_first_token(r, n, d);
        for kk in 0..k {
            let e = routing.ids[t * k + kk] as usize;
            let s = match selector {
                Selector::Vllm => {
                    let c = slots.copies(e);
                    c[(local * k + kk) % c.len()]
                }
                Selector::Table(table) => table[r * slots.num_experts + e],
            };
            phys.push(s);
        }
    }
    Ok(phys)
}
