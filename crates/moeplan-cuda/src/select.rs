//! Replica selection: which physical copy of its logical expert each
//! (token, k) row goes to.
//!
//! Physical slots are numbered GPU-major as in the plan ([`LayerSlots`]):
//! GPU `g` owns slots `gpu_start[g] .. gpu_start[g + 1]`, so ordering rows by
//! slot orders them by (GPU, slot). Two deterministic engine rules:
//!
//! - **`vllm`** (vLLM's EPLB mapping): the row's flattened position in its
//!   source rank's local batch, `p = local_token · top_k + k`, picks copy
//!   `p mod copies(e)`, copies listed in physical-slot order (vLLM's
//!   `logical_to_physical_map`).
//! - **`sglang-static`** (SGLang's static dispatch): one fixed copy per
//!   (source rank, logical expert). A copy on the rank's own GPU if there is
//!   one (the first such), else one on the same node (the first such), else
//!   the ranks left over are spread over all copies evenly: every copy `q`
//!   times in slot order for `q` full rounds, plus a seeded choice of
//!   `remainder` distinct copies, the list seeded-shuffled and handed to the
//!   left-over ranks in rank order (SGLang's `_fair_choices`; the RNG is
//!   ChaCha8, not Python's, so the draws differ from SGLang's while the rule
//!   is the same).
//!
//! Source ranks are the GPUs: token `t` of `n` comes from rank `⌊t·D/n⌋`.

use rand::SeedableRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;

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
    /// SGLang's static rule: one fixed copy per (source rank, expert).
    SglangStatic,
}

impl std::str::FromStr for DispatchRule {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "vllm" => Ok(DispatchRule::Vllm),
            "sglang-static" => Ok(DispatchRule::SglangStatic),
            _ => Err(Error::Argument(format!(
                "unknown dispatch rule {s:?}; known: vllm, sglang-static"
            ))),
        }
    }
}

impl std::fmt::Display for DispatchRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DispatchRule::Vllm => "vllm",
            DispatchRule::SglangStatic => "sglang-static",
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
    /// Prepares `rule` for `slots` (`seed` feeds `sglang-static`'s spread).
    pub fn new(rule: DispatchRule, slots: &LayerSlots, seed: u64) -> Self {
        match rule {
            DispatchRule::Vllm => Selector::Vllm,
            DispatchRule::SglangStatic => Selector::Table(sglang_static_table(slots, seed)),
        }
    }
}

/// SGLang's static table: for every (source rank `r`, expert `e`), the slot
/// rank `r` sends expert `e`'s rows to; `D × E`, row-major.
///
/// ```
/// use moeplan_cuda::select::{sglang_static_table, LayerSlots};
/// // 2 nodes × 2 GPUs; expert 0 on GPUs 0 and 3, expert 1 on GPU 1.
/// let s = LayerSlots::new(&[vec![0], vec![1], vec![], vec![0]], 2, 2)?;
/// let t = sglang_static_table(&s, 7);
/// let e0: Vec<u32> = (0..4).map(|r| t[r * 2]).collect();
/// assert_eq!(e0, [0, 0, 2, 2]); // own GPU (0, 3), else same node
/// # Ok::<(), moeplan_cuda::Error>(())
/// ```
pub fn sglang_static_table(slots: &LayerSlots, seed: u64) -> Vec<u32> {
    let d = slots.num_gpus();
    let e_n = slots.num_experts;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut table = vec![u32::MAX; d * e_n];
    let mut left: Vec<usize> = Vec::with_capacity(d);
    for e in 0..e_n {
        let cands = slots.copies(e);
        let gpu = |s: u32| slots.slot_gpu[s as usize] as usize;
        left.clear();
        for g in 0..d {
            let pick = cands.iter().find(|&&s| gpu(s) == g).or_else(|| {
                cands
                    .iter()
                    .find(|&&s| slots.node_of(gpu(s)) == slots.node_of(g))
            });
            match pick {
                Some(&s) => table[g * e_n + e] = s,
                None => left.push(g),
            }
        }
        if left.is_empty() {
            continue;
        }
        let (q, rem) = (left.len() / cands.len(), left.len() % cands.len());
        let mut choices: Vec<u32> = Vec::with_capacity(left.len());
        for _ in 0..q {
            choices.extend_from_slice(cands);
        }
        choices.extend(cands.choose_multiple(&mut rng, rem).copied());
        choices.shuffle(&mut rng);
        for (&g, &s) in left.iter().zip(&choices) {
            table[g * e_n + e] = s;
        }
    }
    table
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
