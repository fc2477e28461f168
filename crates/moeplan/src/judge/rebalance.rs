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

use super::slots::SlotTable;

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
    pub const ALL: [RemoteStart; 2] = [RemoteStart::Even, RemoteStart::Primary];
    /// Their names, in [`RemoteStart::ALL`]'s order (what an option's
    /// choices list).
    pub const NAMES: [&'static str; 2] = ["even", "primary"];

    /// Its name in options and reports: `even`, `primary`.
    ///
    /// ```
    /// use moeplan::judge::RemoteStart;
    /// assert_eq!(RemoteStart::default().name(), "even");
    /// assert_eq!(RemoteStart::from_name("primary")?, RemoteStart::Primary);
    /// assert!(RemoteStart::from_name("home").is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The start named `name`.
    pub fn from_name(name: &str) -> Result<RemoteStart> {
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

/// The paper's ε when none is given: the loop stops once the busiest GPU
/// is within 5 % of the mean.
pub const DEFAULT_TOLERANCE_PERCENT: u16 = 5;

/// Algorithm 2 on one layer's placement, its tables built once and reused
/// for every batch.
///
/// ```
/// use moeplan::judge::Rebalancer;
/// use moeplan::LayerPlacement;
/// // expert 0 on GPUs 0 and 1: GPU 2's 8 pairs of it start 4 and 4;
/// // expert 1 only on GPU 0: GPU 1's 4 pairs of it go there
/// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0, 1], vec![2, 0], vec![3]] };
/// let mut r = Rebalancer::new(&layer, 4)?;
/// let src = [0.0, 0.0, 0.0, 0.0, /* GPU 1 */ 0.0, 4.0, 0.0, 0.0, /* GPU 2 */ 8.0, 0.0, 0.0, 3.0];
/// let max = r.solve(&src, 0.05)?;
/// // GPU 0 starts at 8, the mean is 5: GPU 1 takes 1 of expert 0, up to the mean
/// assert_eq!(r.gpu_loads(), &[7.0, 5.0, 3.0]);
/// assert_eq!((max, r.initial_max(), r.transfers()), (7.0, 8.0, 1));
/// # Ok::<(), moeplan::Error>(())
/// ```
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
    /// Flex expert `f`'s distinct GPUs: `flex_gpu[flex_start[f] .. flex_start[f + 1]]`.
    flex_start: Vec<usize>,
    flex_gpu: Vec<u32>,
    /// Copies of the flex expert on each of `flex_gpu`'s GPUs.
    flex_mult: Vec<u32>,
    /// Flex expert `f`'s copies in all (the even start's denominator).
    flex_copies: Vec<u32>,
    /// Where remote pairs start.
    start: RemoteStart,
    /// Per call: GPU loads, local pairs, remote pairs per (GPU, flex expert).
    loads: Vec<f64>,
    local: Vec<f64>,
    remote: Vec<f64>,
    /// Per flex expert: its remote pairs in all.
    remote_total: Vec<f64>,
    /// Per expert on one GPU only: its remote pairs.
    fixed_remote: Vec<f64>,
    initial_max: f64,
    transfers: usize,
    order: Vec<u32>,
    hot: Vec<(f64, u32)>,
}

const NONE: u32 = u32::MAX;

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
        let mut view = SlotTable::default();
        view.prepare(layer, num_experts);
        let mut r = Rebalancer::default();
        r.prepare(&view);
        Ok(r)
    }

    /// The same rebalancer with remote pairs starting by `start`
    /// ([`RemoteStart::Even`] unless set).
    ///
    /// ```
    /// use moeplan::judge::{Rebalancer, RemoteStart};
    /// use moeplan::LayerPlacement;
    /// // expert 0 on GPUs 0 and 1 (GPU 1 also holds expert 1); GPU 2 sends 8 pairs of expert 0
    /// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0], vec![1, 0], vec![2]] };
    /// let src = [0.0, 0.0, 0.0, /* GPU 1 */ 0.0, 0.0, 0.0, /* GPU 2 */ 8.0, 0.0, 1.0];
    /// let mut even = Rebalancer::new(&layer, 3)?;
    /// even.solve(&src, 0.05)?;
    /// assert_eq!(even.gpu_loads(), &[4.0, 4.0, 1.0]); // half each, nothing above the mean of 3 can move
    /// let mut primary = Rebalancer::new(&layer, 3)?.with_start(RemoteStart::Primary);
    /// primary.solve(&src, 0.05)?;
    /// assert_eq!(primary.gpu_loads(), &[5.0, 3.0, 1.0]); // all on GPU 0, then 3 to GPU 1
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn with_start(mut self, start: RemoteStart) -> Self {
        self.start = start;
        self
    }

    pub(crate) fn set_start(&mut self, start: RemoteStart) {
        self.start = start;
    }

    pub(crate) fn prepare(&mut self, view: &SlotTable) {
        let d = view.num_gpus();
        let e_n = view.copy_start.len().saturating_sub(1);
        self.d = d;
        self.e_n = e_n;
        self.hosted.clear();
        self.hosted.resize(d * e_n, false);
        for (&e, &g) in view.slot_expert.iter().zip(&view.slot_gpu) {
            if let Some(h) = self.hosted.get_mut(g as usize * e_n + e as usize) {
                *h = true;
            }
        }
        self.primary.clear();
        self.flex.clear();
        self.flex_index.clear();
        self.flex_start.clear();
        self.flex_gpu.clear();
        self.flex_mult.clear();
        self.flex_copies.clear();
        self.flex_start.push(0);
        for e in 0..e_n {
            let cand = view.copies(e);
            // Smallest position within its GPU's slots, then lowest GPU.
            let primary = cand
                .iter()
                .map(|&c| {
                    let g = view.slot_gpu[c as usize] as usize;
                    (c as usize - view.gpu_start[g], g)
                })
                .min()
                .map_or(NONE, |(_, g)| g as u32);
            self.primary.push(primary);
            let first = cand.first().map(|&c| view.slot_gpu[c as usize]);
            if cand
                .iter()
                .any(|&c| Some(view.slot_gpu[c as usize]) != first)
            {
                self.flex_index.push(self.flex.len() as u32);
                self.flex.push(e as u32);
                // Copies come GPU-ascending (slot order), so duplicates
                // on one GPU are adjacent.
                let mut last = NONE;
                for &c in cand {
                    let g = view.slot_gpu[c as usize];
                    if g != last {
                        self.flex_gpu.push(g);
                        self.flex_mult.push(1);
                        last = g;
                    } else if let Some(m) = self.flex_mult.last_mut() {
                        *m += 1;
                    }
                }
                self.flex_copies.push(cand.len() as u32);
                self.flex_start.push(self.flex_gpu.len());
            } else {
                self.flex_index.push(NONE);
            }
        }
    }

    /// Rebalances one batch: `src[s · E + e]` are the pairs source GPU `s`
    /// sends to expert `e` (`S ≤ D` sources, `S · E` values), `epsilon` the
    /// tolerance ε. Returns the busiest GPU's load after rebalancing.
    ///
    /// Errors when `src` is not a whole number of rows of `E`, has more
    /// rows than GPUs, or `epsilon` is negative or not finite.
    ///
    /// ```
    /// use moeplan::{judge::Rebalancer, LayerPlacement};
    /// // no copies: nothing can move, the loads are where the tokens go
    /// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0], vec![1]] };
    /// let mut r = Rebalancer::new(&layer, 2)?;
    /// assert_eq!(r.solve(&[3.0, 1.0, 3.0, 1.0], 0.0)?, 6.0);
    /// assert_eq!(r.transfers(), 0);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
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
        let f_n = self.flex.len();
        self.loads.clear();
        self.loads.resize(d, 0.0);
        self.local.clear();
        self.local.resize(d, 0.0);
        self.remote.clear();
        self.remote.resize(d * f_n, 0.0);
        self.remote_total.clear();
        self.remote_total.resize(f_n, 0.0);
        self.fixed_remote.clear();
        self.fixed_remote.resize(e_n, 0.0);
        self.transfers = 0;
        let sources = src.len() / e_n.max(1);
        for s in 0..sources.min(d) {
            let row = &src[s * e_n..(s + 1) * e_n];
            let hosted = &self.hosted[s * e_n..(s + 1) * e_n];
            for (e, (&n, &h)) in row.iter().zip(hosted).enumerate() {
                if n == 0.0 {
                    continue;
                }
                if h {
                    self.local[s] += n;
                    continue;
                }
                match self.flex_index.get(e) {
                    Some(&f) if f != NONE => {
                        let f = f as usize;
                        self.remote_total[f] += n;
                        let span = self.flex_start[f]..self.flex_start[f + 1];
                        match self.start {
                            RemoteStart::Even => {
                                let copies = self.flex_copies[f];
                                for (&g, &m) in self.flex_gpu[span.clone()]
                                    .iter()
                                    .zip(&self.flex_mult[span])
                                {
                                    let x = n * f64::from(m) / f64::from(copies.max(1));
                                    self.loads[g as usize] += x;
                                    self.remote[g as usize * f_n + f] += x;
                                }
                            }
                            RemoteStart::Primary => {
                                let p = self.primary[e] as usize;
                                self.loads[p] += n;
                                self.remote[p * f_n + f] += n;
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
        }
        for (l, &x) in self.loads.iter_mut().zip(&self.local) {
            *l += x;
        }
        let total: f64 = self.loads.iter().sum();
        let target = total / d.max(1) as f64;
        let bound = (1.0 + epsilon) * target;
        let room_floor = 1e-9 * target;
        self.initial_max = self.loads.iter().copied().fold(0.0, f64::max);
        let max_transfers = d * f_n + d + 1;
        while self.transfers < max_transfers {
            let max = self.loads.iter().copied().fold(0.0, f64::max);
            if max <= bound || f_n == 0 {
                break;
            }
            if !self.transfer(target, room_floor) {
                break;
            }
            self.transfers += 1;
        }
        self.loads.iter().copied().fold(0.0, f64::max)
    }

    /// One transfer of Algorithm 2's loop body: the busiest source first,
    /// its hottest replicated expert first. False when nothing can move.
    fn transfer(&mut self, target: f64, room_floor: f64) -> bool {
        let f_n = self.flex.len();
        self.order.clear();
        self.order
            .extend((0..self.d as u32).filter(|&g| self.loads[g as usize] > target));
        let loads = &self.loads;
        self.order.sort_unstable_by(|&a, &b| {
            loads[b as usize]
                .total_cmp(&loads[a as usize])
                .then(a.cmp(&b))
        });
        for oi in 0..self.order.len() {
            let gs = self.order[oi] as usize;
            self.hot.clear();
            let row = &self.remote[gs * f_n..(gs + 1) * f_n];
            self.hot.extend(
                row.iter()
                    .enumerate()
                    .filter(|(_, r)| **r > 0.0)
                    .map(|(f, &r)| (r, f as u32)),
            );
            self.hot
                .sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            for hi in 0..self.hot.len() {
                let (r, f) = self.hot[hi];
                let f = f as usize;
                let gd = self.flex_gpu[self.flex_start[f]..self.flex_start[f + 1]]
                    .iter()
                    .map(|&g| g as usize)
                    .filter(|&g| g != gs)
                    .min_by(|&a, &b| self.loads[a].total_cmp(&self.loads[b]).then(a.cmp(&b)));
                let Some(gd) = gd else { continue };
                let room = target - self.loads[gd];
                if room > room_floor {
                    let moved = r.min(room);
                    self.remote[gs * f_n + f] -= moved;
                    self.remote[gd * f_n + f] += moved;
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
    pub fn local_loads(&self) -> &[f64] {
        &self.local
    }

    /// The busiest GPU's load before any transfer (every remote pair where
    /// [`RemoteStart`] put it) in the last solve.
    pub fn initial_max(&self) -> f64 {
        self.initial_max
    }

    /// Where the remote pairs were served in the last solve: (expert, GPU,
    /// pairs) for every expert with remote pairs, GPUs ascending.
    ///
    /// ```
    /// use moeplan::{judge::Rebalancer, LayerPlacement};
    /// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0], vec![1, 0], vec![2]] };
    /// let mut r = Rebalancer::new(&layer, 3)?;
    /// // GPU 2 sends 6 pairs to expert 0: they start 3 and 3 over its two
    /// // copies; with the primary start, GPU 1 takes 2 of them, up to the mean
    /// r.solve(&[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0], 0.0)?;
    /// assert_eq!(r.assignment(), vec![(0, 0, 3.0), (0, 1, 3.0)]);
    /// let mut p = Rebalancer::new(&layer, 3)?.with_start(moeplan::judge::RemoteStart::Primary);
    /// p.solve(&[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0], 0.0)?;
    /// assert_eq!(p.assignment(), vec![(0, 0, 4.0), (0, 1, 2.0)]);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn assignment(&self) -> Vec<(u32, u32, f64)> {
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
    pub fn transfers(&self) -> usize {
        self.transfers
    }

    /// Where expert `e`'s remote pairs went in the last solve: (GPU,
    /// pairs) for every GPU serving some, through `f`. An expert on one
    /// GPU only sends everything to its primary copy.
    pub(crate) fn remote_split(&self, e: usize, remote: f64, mut f: impl FnMut(usize, f64)) {
        let f_n = self.flex.len();
        match self.flex_index.get(e) {
            Some(&fi) if fi != NONE => {
                let fi = fi as usize;
                for &g in &self.flex_gpu[self.flex_start[fi]..self.flex_start[fi + 1]] {
                    let x = self.remote[g as usize * f_n + fi];
                    if x > 0.0 {
                        f(g as usize, x);
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

    /// Where source `s`'s `n` pairs of expert `e` go after the last
    /// [`Rebalancer::solve`] (whose `src[s · E + e]` they should be): all
    /// to `s` when it hosts the expert, else split over the GPUs serving
    /// the expert's remote pairs in proportion to what each serves. Calls
    /// `f(gpu, pairs)`; the pairs sum to `n`. Nothing for `n = 0` or `s`,
    /// `e` out of range.
    ///
    /// ```
    /// use moeplan::{judge::Rebalancer, LayerPlacement};
    /// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0], vec![1, 0], vec![2]] };
    /// let mut r = Rebalancer::new(&layer, 3)?.with_start(moeplan::judge::RemoteStart::Primary);
    /// let src = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0];
    /// r.solve(&src, 0.0)?;
    /// let mut to = Vec::new();
    /// r.route_one(2, 0, 6.0, |g, x| to.push((g, x)));
    /// assert_eq!(to, [(0, 4.0), (1, 2.0)]);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn route_one(&self, s: usize, e: usize, n: f64, mut f: impl FnMut(usize, f64)) {
        if n == 0.0 || s >= self.d || e >= self.e_n {
            return;
        }
        let f_n = self.flex.len();
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
                for &g in &self.flex_gpu[self.flex_start[fi]..self.flex_start[fi + 1]] {
                    let x = self.remote[g as usize * f_n + fi];
                    if x > 0.0 {
                        f(g as usize, n * (x / total));
                    }
                }
            }
        }
    }
}
