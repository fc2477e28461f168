//! Libra's adaptive token rebalancer (Libra paper, §3.3 and appendix C,
//! Algorithm 2): the dispatch of [`super::Rule::Libra`].
//!
//! Tokens whose source GPU hosts their expert stay there (Libra's
//! `MoE_local`). Every other (remote) pair of an expert starts where
//! [`RemoteStart`] puts it — by default split evenly over the expert's
//! copies, as the engine's own dispatch would send it before any
//! rebalancing, or all on the expert's *primary* copy; then, while the busiest GPU exceeds
//! `(1 + ε) · B` (`B` the mean load), the busiest GPU above `B` hands
//! remote pairs of its hottest replicated expert to the least-loaded other
//! GPU holding a copy, at most up to `B` there; after each transfer the
//! loop starts again from the busiest GPU. It stops when balanced or when
//! no transfer is possible.
//!
//! Conventions the paper leaves open, stated:
//! - where remote pairs start: Algorithm 2 takes the remote loads as an
//!   input and never says on which copy they begin. [`RemoteStart::Even`]
//!   (the default) starts them where the engines' even split over copies
//!   puts them (`Rule::Even`, a GPU holding two copies taking two shares);
//!   [`RemoteStart::Primary`] starts them all on the primary copy, which
//!   stalls on a base with replicas of its own (a copy that starts full
//!   cannot take pairs from a busier one above the mean);
//! - the primary copy of an expert is its copy at the smallest position in
//!   its GPU's slot list, ties to the lower GPU: a base plan's own experts
//!   come first on each GPU, and Libra's prefetcher appends its copies, so
//!   this is the expert's home GPU;
//! - loads are real numbers (even arrival splits counts by `D`); a
//!   destination with less than `1e-9 · B` of room counts as full;
//! - a GPU that received pairs ends at most at `B`, never above, so it is
//!   never a source afterwards: each transfer either empties one (GPU,
//!   expert) entry of a source or fills a destination, which bounds the
//!   loop by `D · R + D` transfers for `R` replicated experts;
//! - for traffic, each remote source's pairs of an expert split over the
//!   GPUs that end up serving them in proportion to what each serves (the
//!   algorithm moves counts, not named tokens).
//!
//! The maximum never rises: a source only loses pairs and a destination
//! ends at most at `B`, below the source it relieved.
//!
//! Cost per call: O(S · E) to split local from remote pairs, then per
//! transfer O(D log D + R_g log R_g) for the `R_g` replicated experts a
//! source serves. No allocation once the buffers have grown.

use crate::data::plan::LayerPlacement;
use crate::error::{Error, Result};

use std::collections::BinaryHeap;
use std::collections::binary_heap::PeekMut;

use super::eval::largest;
use super::traffic::Tally;
use crate::data::topology::Topology;

/// Where Algorithm 2's remote pairs of a replicated expert start, before
/// any transfer (the paper leaves it open; see the module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemoteStart {
    /// Split evenly over the expert's copies, as the engines' own rule
    /// sends them (a GPU with two copies takes two shares).
    #[default]
    Even,
    /// All on the expert's primary copy (its home GPU).
    Primary,
}

impl RemoteStart {
    /// Both starts, the default first: the one list front ends offer.
    pub(crate) const ALL: [RemoteStart; 2] = [RemoteStart::Even, RemoteStart::Primary];
    /// Their names, in [`RemoteStart::ALL`]'s order (what an option's
    /// choices list).
    pub(crate) const NAMES: [&'static str; 2] = ["even", "primary"];

    /// Its name in options and reports: `even`, `primary`.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The start named `name`.
    pub(crate) fn from_name(name: &str) -> Result<RemoteStart> {
        RemoteStart::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                Error::Argument(format!(
                    "unknown remote start {name:?}: even (the engines' split) or primary"
                ))
            })
    }

    /// One phrase for reports.
    pub fn describe(self) -> &'static str {
        match self {
            RemoteStart::Even => "remote pairs start evenly split over copies",
            RemoteStart::Primary => "remote pairs start on the primary copy",
        }
    }
}

/// moeplan's ε when none is given: the loop stops once the busiest GPU is
/// within 5 % of the mean (the paper gives only ε ∈ (0, 1)).
pub const DEFAULT_TOLERANCE_PERCENT: u16 = 5;

/// Algorithm 2 on one layer's placement, its tables built once and reused
/// for every batch.
#[derive(Debug, Default, Clone)]
pub struct Rebalancer {
    d: usize,
    e_n: usize,
    /// `hosted[g · E + e]`: GPU `g` holds a copy of `e`.
    hosted: Vec<bool>,
    primary: Vec<u32>,
    /// Replicated experts (copies on two GPUs or more).
    flex: Vec<u32>,
    /// Per expert: its index in `flex`, or `NONE`.
    flex_index: Vec<u32>,
    /// Flex expert `f`'s distinct GPUs: `flex_gpu[flex_start[f] .. flex_start[f + 1]]`;
    /// a position there is one (flex expert, GPU) copy.
    flex_start: Vec<usize>,
    flex_gpu: Vec<u32>,
    /// Per copy position: its flex expert.
    flex_of: Vec<u32>,
    /// Copies of the flex expert on each of `flex_gpu`'s GPUs.
    flex_mult: Vec<u32>,
    /// Flex expert `f`'s copies in all (the even start's denominator).
    flex_copies: Vec<u32>,
    /// GPU `g`'s distinct experts: `held[held_start[g] .. held_start[g + 1]]`,
    /// with its copies of each in `held_mult`.
    held_start: Vec<usize>,
    held: Vec<u32>,
    held_mult: Vec<u32>,
    /// Per expert: its copies in the layer.
    copies: Vec<u32>,
    /// Per expert: the GPUs holding it.
    holders: Vec<u32>,
    /// GPU `g`'s replicated experts (their copy positions, ascending as
    /// their flex indices are): `gpu_flex[gpu_flex_start[g] .. gpu_flex_start[g + 1]]`.
    gpu_flex_start: Vec<usize>,
    gpu_flex: Vec<u32>,
    cursor: Vec<usize>,
    /// Per expert and node: the share of one source's remote pairs that
    /// GPUs of that node serve (the uniform route's scratch).
    node_share: Vec<f64>,
    /// Per node: `node_share` summed over experts.
    node_total: Vec<f64>,
    /// The entries of `node_share` the last route wrote, zeroed after it
    /// (clearing all `E × nodes` every batch and layer was 3 % of a replay).
    touched: Vec<u32>,
    /// Where remote pairs start.
    start: RemoteStart,
    /// Per call: GPU loads, local pairs, remote pairs per copy position
    /// (only the GPUs holding an expert serve its remote pairs, so a
    /// D × F table would be mostly zeros to clear).
    loads: Vec<f64>,
    local: Vec<f64>,
    remote: Vec<f64>,
    /// Per flex expert: its remote pairs in all.
    remote_total: Vec<f64>,
    /// Per expert on one GPU only: its remote pairs.
    fixed_remote: Vec<f64>,
    initial_max: f64,
    transfers: usize,
    /// Sources found unable to give since some GPU last gained room.
    stuck: Vec<u32>,
    /// Sources that may give, busiest on top.
    heap: Vec<Busiest>,
    hot: Vec<(f64, u32)>,
}

const NONE: u32 = u32::MAX;

/// A source GPU by load, busiest first, ties to the lower GPU.
#[derive(Debug, Clone, Copy)]
struct Busiest(f64, u32);

impl PartialEq for Busiest {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Busiest {}

impl PartialOrd for Busiest {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Busiest {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(other.1.cmp(&self.1))
    }
}

impl Rebalancer {
    /// The tables of `layer` for experts `0..num_experts`.
    ///
    /// ```
    /// use moeplan::{judge::Rebalancer, LayerPlacement};
    /// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0], vec![1]] };
    /// assert!(Rebalancer::new(&layer, 2).is_ok());
    /// assert!(Rebalancer::new(&layer, 1).is_err()); // hosts expert 1 of 1
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(layer: &LayerPlacement, num_experts: usize) -> Result<Self> {
        if let Some(&e) = layer
            .gpus
            .iter()
            .flatten()
            .find(|&&e| e as usize >= num_experts)
        {
            return Err(Error::Plan(format!(
                "layer {}: expert {e} is out of range (0..{num_experts})",
                layer.layer
            )));
        }
        let mut r = Rebalancer::default();
        r.prepare(layer, num_experts);
        Ok(r)
    }

    /// The same rebalancer with remote pairs starting by `start`
    /// ([`RemoteStart::Even`] unless set).
    pub(crate) fn with_start(mut self, start: RemoteStart) -> Self {
        self.start = start;
        self
    }

    pub(crate) fn set_start(&mut self, start: RemoteStart) {
        self.start = start;
    }

    /// Builds the tables of `layer` for experts `0..num_experts` (ids
    /// past them are skipped; [`Rebalancer::new`] refuses them), straight
    /// from its slots: a replay prepares every layer of every batch of a
    /// schedule (3,712 a Libra change on the page's default), and a slot
    /// table built first only to be read here was 7 % of that.
    pub(crate) fn prepare(&mut self, layer: &LayerPlacement, num_experts: usize) {
        let d = layer.gpus.len();
        let e_n = num_experts;
        if self.d == d && self.e_n == e_n && self.hosted.len() == d * e_n {
            // Unset only what the last layer set (its GPUs' distinct
            // experts): the whole D × E table is most of the work at 64 × 256.
            for (g, w) in self.held_start.windows(2).enumerate() {
                for &e in &self.held[w[0]..w[1]] {
                    self.hosted[g * e_n + e as usize] = false;
                }
            }
        } else {
            self.hosted.clear();
            self.hosted.resize(d * e_n, false);
        }
        self.d = d;
        self.e_n = e_n;
        self.held.clear();
        self.held_mult.clear();
        self.held_start.clear();
        self.held_start.push(0);
        self.holders.clear();
        self.holders.resize(e_n, 0);
        self.copies.clear();
        self.copies.resize(e_n, 0);
        // Primary copies in the same pass: the smallest position within
        // its GPU, then the lowest GPU, is the first slot seen at the
        // smallest position (GPUs in order).
        self.primary.clear();
        self.primary.resize(e_n, NONE);
        self.cursor.clear();
        self.cursor.resize(e_n, usize::MAX);
        for (g, slots) in layer.gpus.iter().enumerate() {
            let start = self.held.len();
            for (pos, &e) in slots.iter().enumerate() {
                if e as usize >= e_n {
                    continue;
                }
                let Some(h) = self.hosted.get_mut(g * e_n + e as usize) else {
                    continue;
                };
                let e = e as usize;
                self.copies[e] += 1;
                if pos < self.cursor[e] {
                    self.cursor[e] = pos;
                    self.primary[e] = g as u32;
                }
                if *h {
                    // A second copy on this GPU (EPLB makes them): counted
                    // on its entry, found among this GPU's few.
                    if let Some(i) = self.held[start..].iter().position(|&x| x as usize == e) {
                        self.held_mult[start + i] += 1;
                    }
                } else {
                    *h = true;
                    self.held.push(e as u32);
                    self.held_mult.push(1);
                    self.holders[e] += 1;
                }
            }
            self.held_start.push(self.held.len());
        }
        // Replicated experts (copies on two GPUs or more), ascending, each
        // with its GPUs ascending: a counting sort of the held entries.
        self.flex.clear();
        self.flex_index.clear();
        self.flex_copies.clear();
        self.flex_start.clear();
        self.flex_start.push(0);
        for e in 0..e_n {
            if self.holders[e] < 2 {
                self.flex_index.push(NONE);
                continue;
            }
            self.flex_index.push(self.flex.len() as u32);
            self.flex.push(e as u32);
            self.flex_copies.push(self.copies[e]);
            let end = self.flex_start[self.flex_start.len() - 1] + self.holders[e] as usize;
            self.flex_start.push(end);
        }
        let positions = self.flex_start[self.flex_start.len() - 1];
        self.flex_gpu.clear();
        self.flex_gpu.resize(positions, 0);
        self.flex_of.clear();
        self.flex_of.resize(positions, 0);
        self.flex_mult.clear();
        self.flex_mult.resize(positions, 0);
        self.cursor.clear();
        self.cursor
            .extend_from_slice(&self.flex_start[..self.flex.len()]);
        for g in 0..d {
            let (lo, hi) = (self.held_start[g], self.held_start[g + 1]);
            for (&e, &m) in self.held[lo..hi].iter().zip(&self.held_mult[lo..hi]) {
                let f = self.flex_index[e as usize];
                if f == NONE {
                    continue;
                }
                let at = &mut self.cursor[f as usize];
                self.flex_gpu[*at] = g as u32;
                self.flex_of[*at] = f;
                self.flex_mult[*at] = m;
                *at += 1;
            }
        }
        // Each GPU's replicated experts, ascending: a source's candidates.
        self.gpu_flex_start.clear();
        self.gpu_flex_start.resize(d + 1, 0);
        for &g in &self.flex_gpu {
            self.gpu_flex_start[g as usize + 1] += 1;
        }
        for g in 0..d {
            self.gpu_flex_start[g + 1] += self.gpu_flex_start[g];
        }
        self.gpu_flex.clear();
        self.gpu_flex.resize(self.flex_gpu.len(), 0);
        self.cursor.clone_from(&self.gpu_flex_start);
        for (p, &g) in self.flex_gpu.iter().enumerate() {
            let at = &mut self.cursor[g as usize];
            self.gpu_flex[*at] = p as u32;
            *at += 1;
        }
    }

    /// Rebalances one batch: `src[s · E + e]` are the pairs source GPU `s`
    /// sends to expert `e` (`S ≤ D` sources, `S · E` values), `epsilon` the
    /// tolerance ε. Returns the busiest GPU's load after rebalancing.
    ///
    /// Errors when `src` is not a whole number of rows of `E`, has more
    /// rows than GPUs, or `epsilon` is negative or not finite.
    pub fn solve(&mut self, src: &[f64], epsilon: f64) -> Result<f64> {
        let e_n = self.e_n.max(1);
        if src.len() % e_n != 0 || src.len() / e_n > self.d {
            return Err(Error::Argument(format!(
                "{} source counts are not S × {e_n} for at most {} sources",
                src.len(),
                self.d
            )));
        }
        if !(epsilon >= 0.0 && epsilon.is_finite()) {
            return Err(Error::Argument(format!(
                "tolerance {epsilon} must be finite and non-negative"
            )));
        }
        Ok(self.run(src, epsilon))
    }

    /// [`Rebalancer::solve`] without the checks (the simulator's inputs
    /// are checked once for the whole workload).
    pub(crate) fn run(&mut self, src: &[f64], epsilon: f64) -> f64 {
        let (d, e_n) = (self.d, self.e_n);
        self.clear_call();
        let sources = src.len() / e_n.max(1);
        for s in 0..sources.min(d) {
            let row = &src[s * e_n..(s + 1) * e_n];
            for (e, &n) in row.iter().enumerate() {
                if n == 0.0 {
                    continue;
                }
                if self.hosted[s * e_n + e] {
                    self.local[s] += n;
                    continue;
                }
                self.start_remote(e, n);
            }
        }
        self.balance(epsilon)
    }

    /// [`Rebalancer::run`] when each of the `D` GPUs sends `row[e]` pairs
    /// to expert `e` (even arrival): a GPU's local pairs are its held
    /// experts' entries, an expert's remote pairs its entry times the GPUs
    /// without it — O(slots + copies) instead of O(D · E). Equal to `run`
    /// on `D` copies of `row` up to rounding (the sums run in another
    /// order).
    pub(crate) fn run_uniform(&mut self, row: &[f64], epsilon: f64) -> f64 {
        let (d, e_n) = (self.d, self.e_n);
        self.clear_call();
        for g in 0..d {
            for &e in &self.held[self.held_start[g]..self.held_start[g + 1]] {
                self.local[g] += row.get(e as usize).copied().unwrap_or(0.0);
            }
        }
        for (e, &n) in row.iter().enumerate().take(e_n) {
            let without = d.saturating_sub(self.holders[e] as usize);
            if n == 0.0 || without == 0 {
                continue;
            }
            self.start_remote(e, n * without as f64);
        }
        self.balance(epsilon)
    }

    /// Puts `n` remote pairs of expert `e` where [`RemoteStart`] starts
    /// them (on its primary copy when it is on one GPU only).
    #[inline]
    fn start_remote(&mut self, e: usize, n: f64) {
        let d = self.d;
        match self.flex_index.get(e) {
            Some(&f) if f != NONE => {
                let f = f as usize;
                self.remote_total[f] += n;
                let span = self.flex_start[f]..self.flex_start[f + 1];
                match self.start {
                    RemoteStart::Even => {
                        let copies = self.flex_copies[f];
                        for p in span {
                            let (g, m) = (self.flex_gpu[p], self.flex_mult[p]);
                            let x = n * f64::from(m) / f64::from(copies.max(1));
                            self.loads[g as usize] += x;
                            self.remote[p] += x;
                        }
                    }
                    RemoteStart::Primary => {
                        let g = self.primary[e];
                        self.loads[g as usize] += n;
                        if let Some(p) = span.clone().find(|&p| self.flex_gpu[p] == g) {
                            self.remote[p] += n;
                        }
                    }
                }
            }
            _ => {
                if let Some(&p) = self.primary.get(e)
                    && (p as usize) < d
                {
                    self.loads[p as usize] += n;
                    self.fixed_remote[e] += n;
                }
            }
        }
    }

    /// Zeroes the per-call buffers.
    fn clear_call(&mut self) {
        let (d, e_n, f_n) = (self.d, self.e_n, self.flex.len());
        for (v, n) in [
            (&mut self.loads, d),
            (&mut self.local, d),
            (&mut self.remote, self.flex_gpu.len()),
            (&mut self.remote_total, f_n),
            (&mut self.fixed_remote, e_n),
        ] {
            v.clear();
            v.resize(n, 0.0);
        }
        self.transfers = 0;
    }

    /// Algorithm 2's loop on the loads the call filled in.
    fn balance(&mut self, epsilon: f64) -> f64 {
        let (d, f_n) = (self.d, self.flex.len());
        for (l, &x) in self.loads.iter_mut().zip(&self.local) {
            *l += x;
        }
        let total: f64 = self.loads.iter().sum();
        let target = total / d.max(1) as f64;
        let bound = (1.0 + epsilon) * target;
        let room_floor = 1e-9 * target;
        self.initial_max = largest(&self.loads);
        if f_n == 0 {
            return self.initial_max;
        }
        let max_transfers = d * f_n + d + 1;
        // Sources (above the mean), busiest first, ties to the lower GPU.
        // A source that could give nothing stays so until some GPU gains
        // room, which only a source dropping below the mean does: it waits
        // in `stuck` until then. Receivers end at most at the mean, so the
        // busiest GPU is the heap's top or a stuck source.
        self.heap.clear();
        self.heap.extend(
            (0..d)
                .filter(|&g| self.loads[g] > target)
                .map(|g| Busiest(self.loads[g], g as u32)),
        );
        let mut heap = BinaryHeap::from(std::mem::take(&mut self.heap));
        self.stuck.clear();
        let mut stuck_max = 0.0f64;
        while self.transfers < max_transfers {
            let top = heap.peek().map_or(0.0, |b| b.0);
            if top.max(stuck_max) <= bound {
                break;
            }
            // The busiest is re-keyed where it stands while it stays a
            // source (one sift instead of a pop and a push); GPUs are
            // distinct, so the order is total and the same either way.
            let Some(mut top) = heap.peek_mut() else {
                break;
            };
            let gs = top.1 as usize;
            if !self.give(gs, target, room_floor) {
                PeekMut::pop(top);
                self.stuck.push(gs as u32);
                stuck_max = stuck_max.max(self.loads[gs]);
                continue;
            }
            self.transfers += 1;
            if self.loads[gs] > target {
                top.0 = self.loads[gs];
                continue;
            }
            PeekMut::pop(top);
            if target - self.loads[gs] > room_floor {
                // It can receive now: a stuck source may give again if it
                // has remote pairs of an expert `gs` holds (no other GPU
                // gained room, and a stuck source's pairs stay as they
                // are); the others would only fail again.
                let e_n = self.e_n;
                let mut kept = 0;
                stuck_max = 0.0;
                for i in 0..self.stuck.len() {
                    let g = self.stuck[i] as usize;
                    let span = self.gpu_flex_start[g]..self.gpu_flex_start[g + 1];
                    let unblocked = self.gpu_flex[span].iter().any(|&p| {
                        let e = self.flex[self.flex_of[p as usize] as usize] as usize;
                        self.remote[p as usize] > 0.0 && self.hosted[gs * e_n + e]
                    });
                    if unblocked {
                        heap.push(Busiest(self.loads[g], g as u32));
                    } else {
                        self.stuck[kept] = g as u32;
                        kept += 1;
                        stuck_max = stuck_max.max(self.loads[g]);
                    }
                }
                self.stuck.truncate(kept);
            }
        }
        self.heap = heap.into_vec();
        largest(&self.loads)
    }

    /// One transfer of Algorithm 2's loop body from source `gs`: its
    /// hottest replicated expert first, to the least-loaded other copy
    /// with room. False when it can give nothing.
    fn give(&mut self, gs: usize, target: f64, room_floor: f64) -> bool {
        {
            self.hot.clear();
            let remote = &self.remote;
            self.hot.extend(
                self.gpu_flex[self.gpu_flex_start[gs]..self.gpu_flex_start[gs + 1]]
                    .iter()
                    .filter(|&&p| remote[p as usize] > 0.0)
                    .map(|&p| (remote[p as usize], p)),
            );
            // Hottest first, ties to the lower expert (a GPU's positions
            // ascend with their experts): the best left is
            // picked each time (the first usually takes the transfer, so
            // this is one pass where a sort of the whole list was
            // O(R log R) per transfer), the same order a sort gives.
            let hotter = |a: &(f64, u32), b: &(f64, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
            while let Some(hi) =
                (0..self.hot.len()).min_by(|&a, &b| hotter(&self.hot[a], &self.hot[b]))
            {
                let (r, ps) = self.hot.swap_remove(hi);
                let f = self.flex_of[ps as usize] as usize;
                // The least-loaded other holder, ties to the lower GPU
                // (positions ascend with their GPUs).
                let mut best: Option<(usize, usize)> = None;
                for q in self.flex_start[f]..self.flex_start[f + 1] {
                    let g = self.flex_gpu[q] as usize;
                    if g != gs
                        && best.is_none_or(|(_, b)| self.loads[g].total_cmp(&self.loads[b]).is_lt())
                    {
                        best = Some((q, g));
                    }
                }
                let Some((pd, gd)) = best else { continue };
                let room = target - self.loads[gd];
                if room > room_floor {
                    let moved = r.min(room);
                    self.remote[ps as usize] -= moved;
                    self.remote[pd] += moved;
                    self.loads[gs] -= moved;
                    self.loads[gd] += moved;
                    return true;
                }
            }
        }
        false
    }

    /// Each GPU's load after the last [`Rebalancer::solve`].
    pub fn gpu_loads(&self) -> &[f64] {
        &self.loads
    }

    /// Pairs each GPU served from its own tokens in the last solve.
    pub(crate) fn local_loads(&self) -> &[f64] {
        &self.local
    }

    /// The busiest GPU's load before any transfer (every remote pair where
    /// [`RemoteStart`] put it) in the last solve.
    #[cfg(test)]
    pub(crate) fn initial_max(&self) -> f64 {
        self.initial_max
    }

    /// Where the remote pairs were served in the last solve: (expert, GPU,
    /// pairs) for every expert with remote pairs, GPUs ascending.
    #[cfg(test)]
    pub(crate) fn assignment(&self) -> Vec<(u32, u32, f64)> {
        let mut out = Vec::new();
        for e in 0..self.e_n {
            let remote = match self.flex_index.get(e) {
                Some(&fi) if fi != NONE => self.remote_total[fi as usize],
                _ => self.fixed_remote.get(e).copied().unwrap_or(0.0),
            };
            if remote > 0.0 {
                self.remote_split(e, remote, |g, x| out.push((e as u32, g as u32, x)));
            }
        }
        out
    }

    /// Transfers the last solve made.
    #[cfg(test)]
    pub(crate) fn transfers(&self) -> usize {
        self.transfers
    }

    /// Where expert `e`'s remote pairs went in the last solve: (GPU,
    /// pairs) for every GPU serving some, through `f`. An expert on one
    /// GPU only sends everything to its primary copy.
    pub(crate) fn remote_split(&self, e: usize, remote: f64, mut f: impl FnMut(usize, f64)) {
        match self.flex_index.get(e) {
            Some(&fi) if fi != NONE => {
                let fi = fi as usize;
                for p in self.flex_start[fi]..self.flex_start[fi + 1] {
                    let x = self.remote[p];
                    if x > 0.0 {
                        f(self.flex_gpu[p] as usize, x);
                    }
                }
            }
            _ => {
                if let Some(&p) = self.primary.get(e)
                    && (p as usize) < self.d
                {
                    f(p as usize, remote);
                }
            }
        }
    }

    /// Routes each (source, expert) pair count of the last solve: local
    /// pairs to the source itself, remote ones in proportion to where the
    /// expert's remote pairs went. Calls `f(source, gpu, pairs)`.
    pub(crate) fn route(&self, src: &[f64], mut f: impl FnMut(usize, usize, f64)) {
        let e_n = self.e_n.max(1);
        let sources = (src.len() / e_n).min(self.d);
        for s in 0..sources {
            for e in 0..self.e_n {
                let n = src[s * e_n + e];
                self.route_one(s, e, n, |g, x| f(s, g, x));
            }
        }
    }

    /// [`Rebalancer::route`] after [`Rebalancer::run_uniform`] on `row`,
    /// straight into `tally`: a GPU's pairs of the experts it holds stay,
    /// and each expert's remote pairs reach the GPUs serving them from
    /// every GPU without it. O(E · copies + slots + D) instead of
    /// O(D · E · copies); equal to routing `D` copies of `row` up to
    /// rounding.
    pub(crate) fn route_uniform(&mut self, row: &[f64], topology: Topology, tally: &mut Tally) {
        let (d, e_n) = (self.d, self.e_n);
        let gpn = topology.gpus_per_node().max(1);
        let nodes = d.div_ceil(gpn);
        if self.node_share.len() != e_n * nodes {
            self.node_share.clear();
            self.node_share.resize(e_n * nodes, 0.0);
        }
        self.node_total.clear();
        self.node_total.resize(nodes, 0.0);
        let mut sent = 0.0;
        tally.local += self.local.iter().sum::<f64>();
        for (e, &n) in row.iter().enumerate().take(e_n) {
            if n == 0.0 {
                continue;
            }
            sent += n;
            let without = d.saturating_sub(self.holders[e] as usize) as f64;
            if without == 0.0 {
                continue;
            }
            // The expert's holders and the GPUs serving its remote pairs,
            // with one source's share on each.
            let fi = self.flex_index[e];
            let (holders, total, first) = if fi == NONE {
                let p = self.primary[e];
                if p as usize >= d {
                    continue;
                }
                (std::slice::from_ref(&self.primary[e]), 0.0, 0)
            } else {
                let fi = fi as usize;
                let first = self.flex_start[fi];
                (
                    &self.flex_gpu[first..self.flex_start[fi + 1]],
                    self.remote_total[fi],
                    first,
                )
            };
            for (i, &g) in holders.iter().enumerate() {
                let a = if fi == NONE {
                    n
                } else if total > 0.0 {
                    n * (self.remote[first + i] / total)
                } else {
                    0.0
                };
                if a <= 0.0 {
                    continue;
                }
                let node = g as usize / gpn;
                let held_here = holders
                    .iter()
                    .filter(|&&h| h as usize / gpn == node)
                    .count();
                let near = gpn.saturating_sub(held_here) as f64;
                let far = without - near;
                tally.by_pair = true;
                tally.ingress[g as usize] += a * without;
                tally.intra += a * near;
                tally.cross += a * far;
                tally.ingress_cross[g as usize] += a * far;
                let at = e * nodes + node;
                if self.node_share[at] == 0.0 {
                    self.touched.push(at as u32);
                }
                self.node_share[at] += a;
                self.node_total[node] += a;
            }
        }
        // A GPU sends every expert it lacks; the part its node serves
        // stays inside the node.
        for g in 0..d {
            let node = g / gpn;
            let mut near_held = 0.0;
            for &e in &self.held[self.held_start[g]..self.held_start[g + 1]] {
                near_held += self.node_share[e as usize * nodes + node];
            }
            let out = (sent - self.local[g]).max(0.0);
            let near = self.node_total[node] - near_held;
            tally.egress[g] += out;
            tally.egress_cross[g] += (out - near).max(0.0);
        }
        for &at in &self.touched {
            self.node_share[at as usize] = 0.0;
        }
        self.touched.clear();
    }

    /// Where source `s`'s `n` pairs of expert `e` go after the last
    /// [`Rebalancer::solve`] (whose `src[s · E + e]` they should be): all
    /// to `s` when it hosts the expert, else split over the GPUs serving
    /// the expert's remote pairs in proportion to what each serves. Calls
    /// `f(gpu, pairs)`; the pairs sum to `n`. Nothing for `n = 0` or `s`,
    /// `e` out of range.
    pub fn route_one(&self, s: usize, e: usize, n: f64, mut f: impl FnMut(usize, f64)) {
        if n == 0.0 || s >= self.d || e >= self.e_n {
            return;
        }
        if self.hosted[s * self.e_n + e] {
            f(s, n);
            return;
        }
        let fi = self.flex_index.get(e).copied().unwrap_or(NONE);
        if fi == NONE {
            self.remote_split(e, n, f);
        } else {
            let total = self.remote_total[fi as usize];
            if total > 0.0 {
                let fi = fi as usize;
                for p in self.flex_start[fi]..self.flex_start[fi + 1] {
                    let x = self.remote[p];
                    if x > 0.0 {
                        f(self.flex_gpu[p] as usize, n * (x / total));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn rebalance_assignment_example() {
        let run = || {
            use moeplan::{LayerPlacement, judge::Rebalancer};
            let layer = LayerPlacement {
                layer: 0,
                gpus: vec![vec![0], vec![1, 0], vec![2]],
            };
            let mut r = Rebalancer::new(&layer, 3)?;
            // GPU 2 sends 6 pairs to expert 0: they start 3 and 3 over its two
            // copies; with the primary start, GPU 1 takes 2 of them, up to the mean
            r.solve(&[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0], 0.0)?;
            assert_eq!(r.assignment(), vec![(0, 0, 3.0), (0, 1, 3.0)]);
            let mut p =
                Rebalancer::new(&layer, 3)?.with_start(moeplan::judge::RemoteStart::Primary);
            p.solve(&[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0], 0.0)?;
            assert_eq!(p.assignment(), vec![(0, 0, 4.0), (0, 1, 2.0)]);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
