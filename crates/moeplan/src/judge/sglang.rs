//! SGLang's static dispatch map, ported: for every layer, source rank and
//! logical expert, the one physical copy that rank sends the expert's
//! tokens to.
//!
//! Source: `compute_logical_to_rank_dispatch_physical_map`,
//! `_find_nearest_expert` and `_fair_choices` in SGLang's
//! `python/sglang/srt/eplb/expert_location.py` (both behaviours of
//! [`SglangVersion`]). One `random.Random(42)` ([`PyRandom`]) is shared by
//! every layer and expert, walked layer by layer, expert by expert; for
//! each expert the ranks without a pinned copy (in rank order) take
//! `_fair_choices(candidates, k)`: the candidates repeated `k / c` times
//! plus `sample(candidates, k mod c)`, shuffled. SGLang walks every model
//! layer, dense ones included, so the random state reaching a MoE layer
//! depends on the layers before it: layer ids below the plan's last that
//! the plan does not list are taken as dense layers holding the trivial
//! map `slot mod E` (SGLang's `trivial` location and what moeplan's SGLang
//! export writes for them), and are walked too when every GPU holds the
//! same number of slots in every layer (the only plans SGLang loads; for
//! other plans dense layers are skipped).
//!
//! Cost: O(L_model · E · (D · c + c)) for `c` copies per expert, plus the
//! random draws; run once per plan, never per batch.

use crate::data::plan::{LayerPlacement, Plan};
use crate::data::trace::MAX_LAYERS;
use crate::error::{Error, Result};

use super::dispatch::{SglangVersion, nearest};
use super::pyrandom::PyRandom;
use super::slots::SlotTable;

/// SGLang's seed for the map (`seed: int = 42` in every version).
const SEED: u64 = 42;

/// SGLang's static dispatch map of `plan`: for each of the plan's layers,
/// `map[rank · E + e]` is the physical slot (GPU-major over the plan's
/// slot lists; SGLang's physical expert id when every GPU holds the same
/// number of slots) that source rank `rank` sends logical expert `e` to.
///
/// ```
/// use moeplan::judge::{sglang_dispatch_map, SglangVersion};
/// use moeplan::{LayerPlacement, Plan, Topology};
/// // 2 nodes × 2 GPUs, 2 slots each; expert 0 on GPUs 0 and 3
/// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![0, 2]] };
/// let plan = Plan::new(Topology::new(2, 2)?, 6, vec![layer], "by-hand")?;
/// let map = sglang_dispatch_map(&plan, SglangVersion::Nearest)?;
/// // ranks 0..4 for expert 0: own copy, same-node copy, same-node copy, own copy
/// assert_eq!([0, 1, 2, 3].map(|r| map[0][r * 6]), [0, 0, 6, 6]);
/// let old = sglang_dispatch_map(&plan, SglangVersion::SameGpu)?;
/// assert_eq!([0, 1, 2, 3].map(|r| old[0][r * 6]), [0, 6, 0, 6]); // ranks 1, 2: the fair draw
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn sglang_dispatch_map(plan: &Plan, version: SglangVersion) -> Result<Vec<Vec<u32>>> {
    let topology = plan.topology();
    let (d, gpn) = (topology.num_gpus(), topology.gpus_per_node());
    let e_n = plan.num_experts();
    let layers = plan.layers();
    let last = layers.last().map_or(0, |l| l.layer as usize);
    let uniform = plan.uniform_slots_per_gpu();
    if uniform.is_some() && last >= MAX_LAYERS {
        return Err(Error::Argument(format!(
            "layer id {last} is past the {MAX_LAYERS} layers a model may have; SGLang's dispatch map walks every layer below it"
        )));
    }
    // Dense layers: slot i holds expert i mod E.
    let dense = uniform.map(|s| {
        let mut v = SlotTable::default();
        let gpus = (0..d)
            .map(|g| (g * s..(g + 1) * s).map(|i| (i % e_n) as u32).collect())
            .collect();
        v.prepare(&LayerPlacement { layer: 0, gpus }, e_n);
        v
    });
    let mut r = PyRandom::new(SEED);
    let mut walk = Walk {
        version,
        gpus: d,
        gpus_per_node: gpn,
        remaining: Vec::with_capacity(d),
    };
    let mut out = Vec::with_capacity(layers.len());
    let mut view = SlotTable::default();
    let mut next = 0;
    for id in 0..=last {
        match layers.get(next) {
            Some(lp) if lp.layer as usize == id => {
                view.prepare(lp, e_n);
                let mut map = vec![0u32; d * e_n];
                walk.layer(&view, &mut r, Some(&mut map))?;
                out.push(map);
                next += 1;
            }
            _ => {
                if let Some(v) = &dense {
                    walk.layer(v, &mut r, None)?;
                }
            }
        }
    }
    Ok(out)
}

struct Walk {
    version: SglangVersion,
    gpus: usize,
    gpus_per_node: usize,
    remaining: Vec<usize>,
}

impl Walk {
    /// One layer of SGLang's loop; `out` is `None` for a dense layer, whose
    /// map only advances the random state.
    fn layer(
        &mut self,
        view: &SlotTable,
        r: &mut PyRandom,
        mut out: Option<&mut [u32]>,
    ) -> Result<()> {
        let e_n = view.copy_start.len().saturating_sub(1);
        for e in 0..e_n {
            let cand = view.copies(e);
            if cand.is_empty() {
                continue; // a valid plan has none; SGLang would refuse
            }
            self.remaining.clear();
            for rank in 0..self.gpus {
                match nearest(self.version, cand, &view.slot_gpu, rank, self.gpus_per_node) {
                    Some(c) => {
                        if let Some(m) = out.as_deref_mut() {
                            m[rank * e_n + e] = c;
                        }
                    }
                    None => self.remaining.push(rank),
                }
            }
            if self.remaining.is_empty() {
                // `_fair_choices(cand, 0)` samples and shuffles nothing.
                continue;
            }
            let choices = fair_choices(cand, self.remaining.len(), r)?;
            if let Some(m) = out.as_deref_mut() {
                for (&rank, &c) in self.remaining.iter().zip(&choices) {
                    m[rank * e_n + e] = c;
                }
            }
        }
        Ok(())
    }
}

/// `_fair_choices(arr, k, r)`: every candidate `k / len` times plus a
/// sample of `k mod len` of them, shuffled.
fn fair_choices(arr: &[u32], k: usize, r: &mut PyRandom) -> Result<Vec<u32>> {
    let (q, rem) = (k / arr.len(), k % arr.len());
    let mut ans = Vec::with_capacity(k);
    for _ in 0..q {
        ans.extend_from_slice(arr);
    }
    ans.extend(r.sample(arr, rem)?);
    r.shuffle(&mut ans);
    Ok(ans)
}
