//! Libra's hierarchical expert prefetcher (Libra paper §3.2, appendix B,
//! Algorithm 1): one batch's layer placement — a static base plus at most
//! `N` copies per GPU — from the predicted pairs per (source GPU, expert).
//!
//! - Phase 1 (locality): each GPU copies the `L = round(N · α)` experts
//!   its own tokens request most among those it does not hold (requested
//!   at least once), so those pairs become local (`MoE_local`).
//! - Loads: pairs whose source holds the expert are local; the rest go to
//!   the expert's primary copy (its smallest slot position on a GPU, ties
//!   to the lower GPU: the base's own expert, as in [`crate::judge::Rebalancer`]).
//! - Phase 2 (balance): while some GPU is above the mean `B`, the most
//!   loaded one's hottest remote expert is copied to the least-loaded GPU
//!   that does not hold it and has fewer than `N` copies, if that keeps the
//!   destination at most at `B`; a failed (GPU, expert) is not tried again.
//!
//! One choice the paper leaves open: after a copy, Algorithm 1 updates
//! the loads "to reflect newly localized computations". Counted alone,
//! that leaves the busiest GPU's load unchanged whenever the destination
//! requests nothing of the expert, and the loop would copy one expert onto
//! every GPU before considering another. The loads here also count what
//! the rebalancer (Algorithm 2) will move onto the copy: the source's
//! remaining pairs of the expert, up to the destination's room below `B`.
//!
//! Never a second copy on one GPU; copies are appended after the base's
//! slots. Cost: O(D · E log E) for phase 1, O(D + E) per phase-2 step, at
//! most `D · N + D · E` steps.

use crate::data::plan::LayerPlacement;
use crate::error::{Error, Result};

use super::predict::PredictedCounts;

const NAME: &str = "libra";

/// Copies `base` plus Libra's copies for one batch's layer, predicted
/// pairs `predicted` (one row per GPU of `base`), at most `extra_per_gpu`
/// (`N`) copies per GPU, of which `local_copies` (`L`, at most `N`) go to
/// phase 1.
///
/// ```
/// use moeplan::planners::libra::{prefetch, PredictedCounts};
/// use moeplan::LayerPlacement;
/// let base = LayerPlacement { layer: 0, gpus: vec![vec![0, 1], vec![2, 3]] };
/// // GPU 1's tokens want expert 0 (on GPU 0) most; expert 0 is hot overall
/// let p = PredictedCounts::new(2, 4, vec![6.0, 1.0, 0.0, 0.0, 3.0, 0.0, 1.0, 1.0])?;
/// let next = prefetch(&base, &p, 1, 1)?;
/// assert_eq!(next.gpus, vec![vec![0, 1], vec![2, 3, 0]]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn prefetch(
    base: &LayerPlacement,
    predicted: &PredictedCounts,
    extra_per_gpu: usize,
    local_copies: usize,
) -> Result<LayerPlacement> {
    let d = base.gpus.len();
    let e_n = predicted.experts();
    if predicted.sources() != d {
        return Err(Error::Mismatch(format!(
            "predicted counts for {} sources, the layer has {d} GPUs",
            predicted.sources()
        )));
    }
    if local_copies > extra_per_gpu {
        return Err(Error::planner(
            NAME,
            format!("{local_copies} local copies exceed the {extra_per_gpu} extra experts per GPU"),
        ));
    }
    let mut hosts = vec![false; d * e_n];
    let mut primary: Vec<Option<(usize, usize)>> = vec![None; e_n];
    for (g, slots) in base.gpus.iter().enumerate() {
        for (pos, &e) in slots.iter().enumerate() {
            let e = e as usize;
            if e >= e_n {
                return Err(Error::Plan(format!(
                    "layer {}: expert {e} is out of range (0..{e_n})",
                    base.layer
                )));
            }
            hosts[g * e_n + e] = true;
            if primary[e].is_none_or(|p| (pos, g) < p) {
                primary[e] = Some((pos, g));
            }
        }
    }
    if let Some(e) = primary.iter().position(Option::is_none) {
        return Err(Error::Plan(format!(
            "layer {}: expert {e} has no copy",
            base.layer
        )));
    }
    let home: Vec<usize> = primary.iter().map(|p| p.map_or(0, |(_, g)| g)).collect();
    let mut out = base.clone();
    let mut extras = vec![0usize; d];

    // Phase 1: each GPU's most requested experts it lacks.
    let mut wanted: Vec<usize> = Vec::with_capacity(e_n);
    for g in 0..d {
        wanted.clear();
        wanted.extend((0..e_n).filter(|&e| !hosts[g * e_n + e] && predicted.get(g, e) > 0.0));
        wanted.sort_unstable_by(|&a, &b| {
            predicted
                .get(g, b)
                .total_cmp(&predicted.get(g, a))
                .then(a.cmp(&b))
        });
        for &e in wanted.iter().take(local_copies) {
            hosts[g * e_n + e] = true;
            out.gpus[g].push(e as u32);
            extras[g] += 1;
        }
    }

    // Loads under the mapping: local pairs stay, the rest go home.
    let mut load = vec![0.0; d];
    let mut remote = vec![0.0; d * e_n];
    for s in 0..d {
        for e in 0..e_n {
            let n = predicted.get(s, e);
            if hosts[s * e_n + e] {
                load[s] += n;
            } else {
                load[home[e]] += n;
                remote[home[e] * e_n + e] += n;
            }
        }
    }
    let target = load.iter().sum::<f64>() / d.max(1) as f64;

    // Phase 2: the busiest GPU's hottest remote expert to the least
    // loaded GPU with room.
    let mut tried = vec![false; d * e_n];
    let mut done = vec![false; d];
    let steps = d * extra_per_gpu + d * e_n + d;
    for _ in 0..steps {
        let Some(src) = (0..d)
            .filter(|&g| !done[g] && load[g] > target)
            .max_by(|&a, &b| load[a].total_cmp(&load[b]).then(b.cmp(&a)))
        else {
            break;
        };
        let Some(e) = (0..e_n)
            .filter(|&e| !tried[src * e_n + e] && remote[src * e_n + e] > 0.0)
            .max_by(|&a, &b| {
                remote[src * e_n + a]
                    .total_cmp(&remote[src * e_n + b])
                    .then(b.cmp(&a))
            })
        else {
            done[src] = true;
            continue;
        };
        let dst = (0..d)
            .filter(|&g| !hosts[g * e_n + e] && extras[g] < extra_per_gpu)
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)));
        let own = dst.map_or(0.0, |g| predicted.get(g, e));
        match dst {
            Some(g) if load[g] + own <= target => {
                hosts[g * e_n + e] = true;
                out.gpus[g].push(e as u32);
                extras[g] += 1;
                // The destination's own pairs become local, and the
                // rebalancer will move the source's pairs up to its room.
                let localized = own.min(remote[src * e_n + e]);
                let shard = (remote[src * e_n + e] - localized).min(target - load[g] - own);
                let moved = localized + shard.max(0.0);
                remote[src * e_n + e] -= moved;
                load[src] -= moved;
                load[g] += moved;
            }
            _ => tried[src * e_n + e] = true,
        }
    }
    Ok(out)
}
