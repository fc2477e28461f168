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
//! slots.
//!
//! Cost: a prediction's rows are read once, O(D · E) (O(slots + E) when
//! every source is predicted to send the same row, as under even
//! arrival), phase 1 keeps each GPU's `L` best in a small sorted buffer
//! instead of sorting its row; phase 2 is O(D + E / D) per step (a source's
//! remote pairs are only those of the experts it is home to), at most
//! `D · N + E + D` steps. [`Prefetcher`] keeps the buffers between calls:
//! a schedule prefetches every layer of every batch (64 batches × 58
//! layers on the page's default), and allocates only the layers it
//! returns.

use crate::data::plan::LayerPlacement;
use crate::error::{Error, Result};

use super::predict::PredictedCounts;

const NAME: &str = "libra";

/// Whether a row of non-negative counts has a non-zero entry: one OR of
/// the bits (vectorised; a test per entry that stops early is not).
fn sends(row: &[f64]) -> bool {
    row.iter().fold(0u64, |a, &x| a | x.to_bits()) != 0
}

/// Copies `base` plus Libra's copies for one batch's layer, predicted
/// pairs `predicted` (one row per GPU of `base`), at most `extra_per_gpu`
/// (`N`) copies per GPU, of which `local_copies` (`L`, at most `N`) go to
/// phase 1. One call of `Prefetcher::run` with fresh buffers.
///
/// ```
/// use moeplan::planners::{prefetch, PredictedCounts};
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
    Prefetcher::default().run(base, predicted, extra_per_gpu, local_copies)
}

/// Algorithm 1 with its buffers kept between calls (see the module
/// documentation for the cost).
#[derive(Debug, Default, Clone)]
pub struct Prefetcher {
    /// `hosts[g · E + e]`: GPU `g` holds `e` (base and copies so far).
    hosts: Vec<bool>,
    /// `hosts` is all false (a finished call unsets what it set: clearing
    /// the whole D × E table every batch and layer was 4 % of a schedule).
    hosts_clear: bool,
    /// Per expert: its primary copy's (slot position, GPU).
    primary: Vec<(usize, usize)>,
    /// Experts by home GPU: `homed[homed_start[g] .. homed_start[g + 1]]`.
    homed_start: Vec<usize>,
    homed: Vec<u32>,
    cursor: Vec<usize>,
    /// Per expert: GPUs holding it, for a uniform prediction's loads.
    holders: Vec<u32>,
    /// Per expert: the last GPU counted in `holders` (`usize::MAX`: none).
    seen: Vec<usize>,
    extras: Vec<usize>,
    /// Per source: its predicted row has a pair (8 ranks on 64 GPUs leave
    /// most rows empty), found once per call (not uniform) for phase 1 and the loads.
    sends: Vec<bool>,
    load: Vec<f64>,
    /// Per expert: its remote pairs, all at its home GPU.
    remote: Vec<f64>,
    /// Per expert: phase 2 tried it from its home and failed.
    tried: Vec<bool>,
    /// Phase 2's sources, busiest first (ties: lower GPU).
    srcs: Vec<u32>,
    /// GPUs with room for a copy, least loaded first (ties: lower GPU).
    dsts: Vec<u32>,
    /// One GPU's best candidates, (count, expert), best first.
    top: Vec<(f64, u32)>,
    /// A uniform prediction's experts, best first.
    order: Vec<u32>,
}

impl Prefetcher {
    /// [`prefetch`], reusing this prefetcher's buffers.
    pub(crate) fn run(
        &mut self,
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
                format!(
                    "{local_copies} local copies exceed the {extra_per_gpu} extra experts per GPU"
                ),
            ));
        }
        self.index_base(base, e_n)?;
        // Room for the copies up front: pushing onto exact clones would
        // reallocate every GPU's slots.
        let mut out = LayerPlacement {
            layer: base.layer,
            gpus: base
                .gpus
                .iter()
                .map(|g| {
                    let mut v = Vec::with_capacity(g.len() + extra_per_gpu);
                    v.extend_from_slice(g);
                    v
                })
                .collect(),
        };
        self.extras.clear();
        self.extras.resize(d, 0);
        match predicted.uniform_row() {
            Some(row) => self.phase1_uniform(row, local_copies, &mut out),
            None => {
                self.sends.clear();
                let held = predicted.held_rows();
                self.sends
                    .extend((0..d).map(|g| g < held && sends(predicted.row(g))));
                self.phase1(predicted, local_copies, &mut out)
            }
        }
        let target = match predicted.uniform_row() {
            Some(row) => self.loads_uniform(row, &out),
            None => self.loads(predicted),
        };
        self.phase2(predicted, target, extra_per_gpu, &mut out);
        for (g, slots) in out.gpus.iter().enumerate() {
            for &e in slots {
                self.hosts[g * e_n + e as usize] = false;
            }
        }
        self.hosts_clear = true;
        Ok(out)
    }

    /// Hosts, primaries and each GPU's homed experts from the base.
    fn index_base(&mut self, base: &LayerPlacement, e_n: usize) -> Result<()> {
        let d = base.gpus.len();
        if !(self.hosts_clear && self.hosts.len() == d * e_n) {
            self.hosts.clear();
            self.hosts.resize(d * e_n, false);
        }
        self.hosts_clear = false;
        self.primary.clear();
        self.primary.resize(e_n, (usize::MAX, usize::MAX));
        for (g, slots) in base.gpus.iter().enumerate() {
            for (pos, &e) in slots.iter().enumerate() {
                let e = e as usize;
                if e >= e_n {
                    return Err(Error::Plan(format!(
                        "layer {}: expert {e} is out of range (0..{e_n})",
                        base.layer
                    )));
                }
                self.hosts[g * e_n + e] = true;
                if (pos, g) < self.primary[e] {
                    self.primary[e] = (pos, g);
                }
            }
        }
        if let Some(e) = self.primary.iter().position(|p| p.1 == usize::MAX) {
            return Err(Error::Plan(format!(
                "layer {}: expert {e} has no copy",
                base.layer
            )));
        }
        // Counting sort of experts by home GPU, ascending within a GPU.
        self.homed_start.clear();
        self.homed_start.resize(d + 1, 0);
        for &(_, g) in &self.primary {
            self.homed_start[g + 1] += 1;
        }
        for g in 0..d {
            self.homed_start[g + 1] += self.homed_start[g];
        }
        self.homed.clear();
        self.homed.resize(e_n, 0);
        self.cursor.clone_from(&self.homed_start);
        for (e, &(_, g)) in self.primary.iter().enumerate() {
            self.homed[self.cursor[g]] = e as u32;
            self.cursor[g] += 1;
        }
        Ok(())
    }

    /// Phase 1: each GPU's `L` most requested experts it lacks, by count
    /// then lower id, kept in a sorted buffer of `L`.
    fn phase1(&mut self, predicted: &PredictedCounts, local: usize, out: &mut LayerPlacement) {
        if local == 0 {
            return;
        }
        let e_n = predicted.experts();
        for (g, slots) in out.gpus.iter_mut().enumerate() {
            if !self.sends[g] {
                continue;
            }
            self.top.clear();
            let hosts = &self.hosts[g * e_n..(g + 1) * e_n];
            // An entry must beat this: nothing (0) until `L` are kept, then
            // the least kept. One test per entry, which rarely passes once
            // the buffer is full, where testing zero first was a branch
            // that went either way.
            let mut floor = 0.0;
            for (e, (&n, &held)) in predicted.row(g).iter().zip(hosts).enumerate() {
                if (n <= floor) | held {
                    continue;
                }
                // After every kept entry with as many pairs: ids ascend.
                let at = self.top.partition_point(|w| w.0 >= n);
                self.top.insert(at, (n, e as u32));
                self.top.truncate(local);
                if self.top.len() == local {
                    floor = self.top.last().map_or(0.0, |w| w.0);
                }
            }
            for &(_, e) in &self.top {
                self.hosts[g * e_n + e as usize] = true;
                slots.push(e);
                self.extras[g] += 1;
            }
        }
    }

    /// Phase 1 when every source sends `row`: one order of the experts,
    /// walked by each GPU past those it holds.
    fn phase1_uniform(&mut self, row: &[f64], local: usize, out: &mut LayerPlacement) {
        if local == 0 {
            return;
        }
        let e_n = row.len();
        let by = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
        self.order.clear();
        self.order
            .extend((0..e_n as u32).filter(|&e| row[e as usize] > 0.0));
        // A GPU skips at most the experts it holds.
        let widest = out.gpus.iter().map(Vec::len).max().unwrap_or(0);
        let keep = (local + widest).min(self.order.len());
        if keep > 0 && keep < self.order.len() {
            self.order.select_nth_unstable_by(keep - 1, by);
            self.order.truncate(keep);
        }
        self.order.sort_unstable_by(by);
        for (g, slots) in out.gpus.iter_mut().enumerate() {
            let hosts = &mut self.hosts[g * e_n..(g + 1) * e_n];
            let mut taken = 0;
            for &e in &self.order {
                if taken == local {
                    break;
                }
                if !hosts[e as usize] {
                    hosts[e as usize] = true;
                    slots.push(e);
                    taken += 1;
                }
            }
            self.extras[g] += taken;
        }
    }

    /// Loads under the mapping (local pairs stay, the rest go home) and the
    /// remote pairs at each home; returns the mean load.
    fn loads(&mut self, predicted: &PredictedCounts) -> f64 {
        let (d, e_n) = (predicted.sources(), predicted.experts());
        self.load.clear();
        self.load.resize(d, 0.0);
        self.remote.clear();
        self.remote.resize(e_n, 0.0);
        for s in 0..d {
            // Sources that send nothing (ranks fewer than GPUs) add nothing.
            if !self.sends[s] {
                continue;
            }
            let row = predicted.row(s);
            let hosts = &self.hosts[s * e_n..(s + 1) * e_n];
            // A zero adds nothing either way (the sums start at +0), so no
            // test for it: a branch on it went either way.
            for (e, (&n, &held)) in row.iter().zip(hosts).enumerate() {
                if held {
                    self.load[s] += n;
                } else {
                    let h = self.primary[e].1;
                    self.load[h] += n;
                    self.remote[e] += n;
                }
            }
        }
        self.load.iter().sum::<f64>() / d.max(1) as f64
    }

    /// [`Prefetcher::loads`] when every source sends `row`: a GPU's local
    /// pairs are its held experts' entries, an expert's remote pairs its
    /// entry times the GPUs without it.
    fn loads_uniform(&mut self, row: &[f64], out: &LayerPlacement) -> f64 {
        let (d, e_n) = (out.gpus.len(), row.len());
        self.load.clear();
        self.load.resize(d, 0.0);
        self.holders.clear();
        self.holders.resize(e_n, 0);
        self.seen.clear();
        self.seen.resize(e_n, usize::MAX);
        for (g, slots) in out.gpus.iter().enumerate() {
            for &e in slots {
                let e = e as usize;
                if self.seen[e] != g {
                    self.seen[e] = g;
                    self.holders[e] += 1;
                    self.load[g] += row[e];
                }
            }
        }
        self.remote.clear();
        self.remote.resize(e_n, 0.0);
        for (e, (&n, &held)) in row.iter().zip(&self.holders).enumerate() {
            let x = n * (d - held as usize) as f64;
            let h = self.primary[e].1;
            self.load[h] += x;
            self.remote[e] = x;
        }
        self.load.iter().sum::<f64>() / d.max(1) as f64
    }

    /// Phase 2: the busiest GPU's hottest remote expert to the least
    /// loaded GPU with room.
    fn phase2(
        &mut self,
        predicted: &PredictedCounts,
        target: f64,
        extra_per_gpu: usize,
        out: &mut LayerPlacement,
    ) {
        let (d, e_n) = (out.gpus.len(), predicted.experts());
        self.tried.clear();
        self.tried.resize(e_n, false);
        // Sources (above the mean), busiest first; a GPU at or below the
        // mean never becomes one (a destination ends at most at the mean).
        let load = &self.load;
        let busiest = |a: &u32, b: &u32| {
            load[*b as usize]
                .total_cmp(&load[*a as usize])
                .then(a.cmp(b))
        };
        self.srcs.clear();
        self.srcs
            .extend((0..d as u32).filter(|&g| load[g as usize] > target));
        self.srcs.sort_unstable_by(busiest);
        // Destinations with room, least loaded first. A GPU above the mean
        // could never take a copy (its load plus its own pairs would pass
        // the mean), so the sources are left out until they drop to it:
        // the first non-holder is then the same GPU or none, and a source
        // need not be found among the destinations at every copy.
        self.dsts.clear();
        self.dsts
            .extend((0..d as u32).filter(|&g| {
                self.extras[g as usize] < extra_per_gpu && load[g as usize] <= target
            }));
        self.dsts.sort_unstable_by(|a, b| lightest(load, a, b));
        let steps = d * extra_per_gpu + e_n + d;
        for _ in 0..steps {
            let Some(&src) = self.srcs.first() else {
                break;
            };
            let src = src as usize;
            let mut hot: Option<usize> = None;
            for &e in &self.homed[self.homed_start[src]..self.homed_start[src + 1]] {
                let e = e as usize;
                if !self.tried[e]
                    && self.remote[e] > 0.0
                    && hot.is_none_or(|h| self.remote[e] > self.remote[h])
                {
                    hot = Some(e);
                }
            }
            let Some(e) = hot else {
                self.srcs.remove(0);
                continue;
            };
            let hosts = &self.hosts;
            let di = self.dsts.iter().position(|&g| !hosts[g as usize * e_n + e]);
            let dst = di.map(|i| self.dsts[i] as usize);
            let own = dst.map_or(0.0, |g| predicted.get(g, e));
            match (di, dst) {
                (Some(di), Some(g)) if self.load[g] + own <= target => {
                    self.hosts[g * e_n + e] = true;
                    out.gpus[g].push(e as u32);
                    self.extras[g] += 1;
                    // The destination's own pairs become local, and the
                    // rebalancer will move the source's pairs up to its room.
                    let localized = own.min(self.remote[e]);
                    let shard = (self.remote[e] - localized).min(target - self.load[g] - own);
                    let moved = localized + shard.max(0.0);
                    self.remote[e] -= moved;
                    self.load[src] -= moved;
                    self.load[g] += moved;
                    self.resort(src, (g, di), target, extra_per_gpu);
                }
                _ => self.tried[e] = true,
            }
        }
    }

    /// Puts the source `src` (the first of `srcs`, not among the
    /// destinations while above the mean) and the destination `dst` (at
    /// `di` in `dsts`) back in order in the two lists after a copy changed
    /// their loads (and `dst`'s room); a source that dropped to the mean
    /// joins the destinations if it has room.
    fn resort(&mut self, src: usize, (dst, di): (usize, usize), target: f64, extra_per_gpu: usize) {
        let load = &self.load;
        let busiest = |a: &u32, b: &u32| {
            load[*b as usize]
                .total_cmp(&load[*a as usize])
                .then(a.cmp(b))
        };
        if self.srcs.first() == Some(&(src as u32)) {
            self.srcs.remove(0);
        }
        if load[src] > target {
            let at = self
                .srcs
                .partition_point(|g| busiest(g, &(src as u32)).is_lt());
            self.srcs.insert(at, src as u32);
        }
        // Out before anything goes back: the search needs the rest in order.
        self.dsts.remove(di);
        let back = [
            (self.extras[dst] < extra_per_gpu).then_some(dst as u32),
            (load[src] <= target && self.extras[src] < extra_per_gpu).then_some(src as u32),
        ];
        for g in back.into_iter().flatten() {
            let at = self.dsts.partition_point(|x| lightest(load, x, &g).is_lt());
            self.dsts.insert(at, g);
        }
    }
}

/// Least loaded first, ties to the lower GPU: phase 2's destination order.
fn lightest(load: &[f64], a: &u32, b: &u32) -> std::cmp::Ordering {
    load[*a as usize]
        .total_cmp(&load[*b as usize])
        .then(a.cmp(b))
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn prefetch_prefetcher_example() {
        let run = || {
            use moeplan::LayerPlacement;
            use moeplan::planners::{PredictedCounts, Prefetcher, prefetch};
            let base = LayerPlacement {
                layer: 0,
                gpus: vec![vec![0, 1], vec![2, 3]],
            };
            // every GPU predicted to send the same row: GPU 0 serves 12 pairs, GPU 1
            // 4, the mean is 8; a copy of expert 0 would take GPU 1's own 5 pairs
            // too (9 > 8), so expert 1, the next hottest at GPU 0, goes
            let p = PredictedCounts::uniform(2, vec![5.0, 1.0, 1.0, 1.0])?;
            let mut f = Prefetcher::default();
            let next = f.run(&base, &p, 1, 0)?;
            assert_eq!(next.gpus, vec![vec![0, 1], vec![2, 3, 1]]);
            assert_eq!(f.run(&base, &p, 1, 0)?, prefetch(&base, &p, 1, 0)?);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
