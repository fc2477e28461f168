//! Predictors of the next layer's routing, for Libra's prefetcher (Libra
//! paper §3.2 "Predictor Design", §5 Table 1), each with its accuracy
//! measured by Table 1's metric: the fraction of a token's true top-k
//! experts found in its predicted top-k set, averaged over tokens and
//! layers ([`accuracy`]).
//!
//! - [`Predictor::Oracle`]: the true routing — an upper bound, no
//!   predictor reaches it.
//! - [`Predictor::PathTable`]: moeplan's own path table, after Lina's
//!   expert-selection-path table, learnt from a token trace
//!   ([`PathTable::build`] on a build split, or grown online as Libra
//!   serves: each batch predicted from the batches before it, then
//!   learnt). It never predicts a token it learnt. Lina keys a
//!   table on a token's exact path of experts over the previous few layers;
//!   with top-k routing (6 of 64 experts per layer on DeepSeek-V2-Lite) an
//!   exact path of sets almost never repeats between build and evaluation,
//!   so the table here is factored per layer distance: for each of the
//!   previous `depth` layers, how often expert `x` there was followed by
//!   `y` at this layer; a token's score for `y` sums those frequencies over
//!   the experts of its path, and its predicted set is the `k` best
//!   (ties: the layer's build marginal, then the lower id). A layer with
//!   no previous layer predicts the build marginal's top `k`. Factored
//!   and two layers deep, it is stronger than Lina's exact-path table as
//!   Libra's Table 1 reports it (0.54–0.63 on ESFT against 11–47 %), so
//!   its figures are moeplan's, not a reproduction of Lina's.
//! - [`Predictor::PreviousBatch`]: what a count-only trace allows — the
//!   previous batch's counts of this layer; per token, the previous batch's
//!   `k` hottest experts. The first batch has no previous one: its counts
//!   are predicted uniform over experts (and it is left out of accuracy).
//! - [`Predictor::Noisy`]: a calibrated stand-in for Libra's own predictor
//!   (the next layer's gate run on the current hidden states, which no
//!   trace holds) — labelled *simulated*: each true expert is kept with
//!   probability `p`, each dropped one replaced by a draw from the layer's
//!   marginal over the experts the token did not pick, so the measured
//!   accuracy is `p` in expectation. Seeded per (layer, token). On counts
//!   without token routes it predicts the expectation, `p · true + (1 −
//!   p) · marginal`.
//!
//! What the prefetcher receives from any of them is [`PredictedCounts`]:
//! per (source GPU, expert), the pairs predicted for one batch and layer.
//!
//! Cost: learning T tokens O(T · L · depth · k²) time plus O(E) per row
//! they touched (its fractions refreshed), O(L · depth · E²) memory (the
//! counts and their fractions); a prediction O(T_b · (depth · k² + E log E))
//! per batch and layer for `T_b` tokens, O(S · E) for the count-level
//! predictors.

use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;

use crate::data::Workload;
use crate::data::trace::TokenTrace;
use crate::error::{Error, Result};
use crate::judge::Sources;

const NAME: &str = "libra";

/// Predicted pairs of one batch and layer per (source GPU, expert),
/// `sources × experts` row-major.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PredictedCounts {
    sources: usize,
    experts: usize,
    /// The first `held` sources' rows, `held × experts` row-major (every
    /// source past them sends nothing), or one row every source sends.
    counts: Vec<f64>,
    /// Rows held in `counts` (not uniform): a workload's ranks, which may
    /// be fewer than the GPUs (8 ranks on 64 GPUs: an eighth of the zeros
    /// to write and read for every batch and layer of a schedule).
    held: usize,
    /// One row of zeros: the row of a source past `held`.
    zeros: Vec<f64>,
    /// Every source sends the same row (even arrival): `counts` is it.
    uniform: bool,
}

impl PredictedCounts {
    /// Counts `counts[s · experts + e]`; each finite and non-negative.
    ///
    /// ```
    /// use moeplan::planners::libra::PredictedCounts;
    /// let p = PredictedCounts::new(2, 3, vec![1.0, 0.0, 2.0, 0.0, 4.0, 0.0])?;
    /// assert_eq!((p.get(1, 1), p.sources(), p.experts()), (4.0, 2, 3));
    /// assert!(PredictedCounts::new(2, 3, vec![1.0; 5]).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(sources: usize, experts: usize, counts: Vec<f64>) -> Result<Self> {
        if counts.len() != sources.saturating_mul(experts) {
            return Err(Error::Argument(format!(
                "{} predicted counts for {sources} sources × {experts} experts",
                counts.len()
            )));
        }
        if let Some(v) = counts.iter().find(|v| !v.is_finite() || **v < 0.0) {
            return Err(Error::Argument(format!(
                "predicted count {v}: counts must be finite and non-negative"
            )));
        }
        Ok(PredictedCounts {
            sources,
            experts,
            counts,
            held: sources,
            zeros: vec![0.0; experts],
            uniform: false,
        })
    }

    /// Every one of `sources` sends `row[e]` pairs to expert `e` (even
    /// arrival), held as one row: the prefetcher then reads `E` values,
    /// not `sources × E`.
    ///
    /// ```
    /// use moeplan::planners::libra::PredictedCounts;
    /// let p = PredictedCounts::uniform(3, vec![2.0, 0.5])?;
    /// assert_eq!((p.get(2, 0), p.sources()), (2.0, 3));
    /// assert_eq!(p.to_dense(), PredictedCounts::new(3, 2, vec![2.0, 0.5, 2.0, 0.5, 2.0, 0.5])?.to_dense());
    /// assert!(PredictedCounts::uniform(3, vec![-1.0]).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn uniform(sources: usize, row: Vec<f64>) -> Result<Self> {
        let mut p = PredictedCounts::new(1, row.len(), row)?;
        p.sources = sources;
        p.uniform = true;
        Ok(p)
    }

    fn zeros(sources: usize, experts: usize) -> Self {
        let mut p = PredictedCounts::default();
        p.reset(sources, experts, false);
        p
    }

    /// Refills `self` as `sources × experts` zeros, dense, keeping its
    /// allocation.
    fn reset(&mut self, sources: usize, experts: usize, uniform: bool) {
        self.reset_held(sources, sources, experts, uniform);
    }

    /// [`PredictedCounts::reset`] with only the first `held` sources'
    /// rows kept (at most `sources`): the others send nothing.
    fn reset_held(&mut self, sources: usize, held: usize, experts: usize, uniform: bool) {
        self.sources = sources;
        self.experts = experts;
        self.uniform = uniform;
        self.held = held.min(sources);
        self.counts.clear();
        let rows = if uniform { 1 } else { self.held };
        self.counts.resize(rows * experts, 0.0);
        if self.zeros.len() != experts {
            self.zeros.clear();
            self.zeros.resize(experts, 0.0);
        }
    }

    /// Sources whose rows may send something: all of them, or the first
    /// ranks of a workload with fewer ranks than GPUs.
    pub(crate) fn held_rows(&self) -> usize {
        if self.uniform {
            self.sources
        } else {
            self.held
        }
    }

    /// Source GPUs (rows).
    pub fn sources(&self) -> usize {
        self.sources
    }

    /// Experts (columns).
    pub fn experts(&self) -> usize {
        self.experts
    }

    /// Pairs source `s` is predicted to send expert `e` (0 outside the
    /// table).
    pub fn get(&self, s: usize, e: usize) -> f64 {
        if e >= self.experts || s >= self.sources {
            return 0.0;
        }
        self.row(s).get(e).copied().unwrap_or(0.0)
    }

    /// Source `s`'s row of `experts` counts (empty outside the table).
    pub fn row(&self, s: usize) -> &[f64] {
        let r = if self.uniform { 0 } else { s };
        if s >= self.sources {
            return &[];
        }
        if r >= self.held_rows() {
            return &self.zeros;
        }
        self.counts
            .get(r * self.experts..(r + 1) * self.experts)
            .unwrap_or(&[])
    }

    /// The one row every source sends, when the prediction is uniform
    /// ([`PredictedCounts::uniform`]).
    pub fn uniform_row(&self) -> Option<&[f64]> {
        self.uniform.then_some(self.counts.as_slice())
    }

    /// The counts, `sources × experts` row-major.
    pub fn to_dense(&self) -> Vec<f64> {
        (0..self.sources)
            .flat_map(|s| self.row(s).to_vec())
            .collect()
    }

    fn add(&mut self, s: usize, e: usize, x: f64) {
        // An expert past the row would land in the next source's row.
        let s = if self.uniform { 0 } else { s };
        let at = (e < self.experts).then(|| s * self.experts + e);
        if let Some(c) = at.and_then(|i| self.counts.get_mut(i)) {
            *c += x;
        }
    }
}

/// Lina's expert-selection-path table, factored per layer distance (see
/// the module documentation). It predicts only tokens outside what it was
/// built on: [`PathTable::build`] gives it a build split, and Libra's
/// schedule and [`accuracy`] grow it online, each batch learnt after it is
/// predicted.
#[derive(Debug, Clone, PartialEq)]
pub struct PathTable {
    depth: usize,
    experts: usize,
    layers: usize,
    top_k: usize,
    /// `counts[((l · depth) + j − 1) · E² + x · E + y]`: of the tokens
    /// learnt, those with `x` at layer `l − j` and `y` at layer `l`.
    counts: Vec<u32>,
    /// `row_sums[((l · depth) + j − 1) · E + x]`: the sum of that row.
    row_sums: Vec<u64>,
    /// `counts` as fractions of their row's sum, refreshed for the rows a
    /// [`PathTable::learn`] touched: what every prediction reads.
    freq: Vec<f32>,
    /// `marginal[l · E + y]`: learnt pairs of `y` at layer `l`.
    marginal: Vec<f64>,
    /// The tokens learnt, one contiguous range (`0..0` when none).
    learnt: Range<usize>,
}

/// What a path table's predictions are kept under ([`Workload::derived`]).
fn memo_name(depth: usize) -> String {
    format!("libra path table, depth {depth}")
}

/// `n` zeros, or `None` when the allocator cannot give them.
fn try_zeros<T: Clone + Default>(n: usize) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize(n, T::default());
    Some(v)
}

/// The path table's depth when none is given: the two previous layers.
pub const DEFAULT_DEPTH: usize = 2;

impl PathTable {
    /// A table of `depth` (1 to 4) layers for `tokens`' experts and layers
    /// that has learnt nothing yet: it predicts nothing until it
    /// [`PathTable::learn`]s (Libra's schedule then predicts uniform).
    ///
    /// ```
    /// use moeplan::{planners::libra::PathTable, TokenTrace};
    /// use ndarray::array;
    /// let t = TokenTrace::new(4, vec![0], vec![array![[0], [1]]], vec![0; 2])?;
    /// assert!(PathTable::empty(&t, 2)?.learnt().is_empty());
    /// assert!(PathTable::empty(&t, 5).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn empty(tokens: &TokenTrace, depth: usize) -> Result<Self> {
        let (e_n, l_n) = (tokens.num_experts(), tokens.num_layers());
        Self::try_empty(tokens, depth)?.ok_or_else(|| {
            Error::planner(
                NAME,
                format!(
                    "not enough memory for a path table of {} cells",
                    l_n * depth * e_n * e_n
                ),
            )
        })
    }

    /// [`PathTable::empty`], or `None` when the memory for it cannot be had
    /// (work done ahead of time then skips it instead of aborting).
    fn try_empty(tokens: &TokenTrace, depth: usize) -> Result<Option<Self>> {
        if !(1..=4).contains(&depth) {
            return Err(Error::planner(
                NAME,
                format!("path depth {depth} is outside 1..=4"),
            ));
        }
        let (e_n, l_n) = (tokens.num_experts(), tokens.num_layers());
        let cells = l_n * depth * e_n * e_n;
        let (Some(counts), Some(row_sums), Some(freq), Some(marginal)) = (
            try_zeros(cells),
            try_zeros(l_n * depth * e_n),
            try_zeros(cells),
            try_zeros(l_n * e_n),
        ) else {
            return Ok(None);
        };
        Ok(Some(PathTable {
            depth,
            experts: e_n,
            layers: l_n,
            top_k: tokens.top_k(),
            counts,
            row_sums,
            freq,
            marginal,
            learnt: 0..0,
        }))
    }

    /// Counts, on tokens `build` of `tokens`, which experts follow which
    /// over up to `depth` (1 to 4) layers; it then predicts only tokens
    /// outside `build`.
    ///
    /// ```
    /// use moeplan::{planners::libra::PathTable, TokenTrace};
    /// use ndarray::array;
    /// // expert 0 is followed by 2, expert 1 by 3 (tokens 0 and 1)
    /// let t = TokenTrace::new(4, vec![0, 1], vec![array![[0], [1], [0]], array![[2], [3], [2]]], vec![0; 3])?;
    /// let table = PathTable::build(&t, 0..2, 1)?;
    /// assert_eq!(table.predict(&t, 2, 1)?, vec![2]);
    /// assert!(table.predict(&t, 1, 1).is_err()); // token 1 was learnt
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn build(tokens: &TokenTrace, build: Range<usize>, depth: usize) -> Result<Self> {
        let mut table = PathTable::empty(tokens, depth)?;
        table.learn(tokens, build)?;
        Ok(table)
    }

    /// Learns tokens `range` of `tokens` (non-empty, inside the trace, and
    /// right after what it learnt before, if anything).
    pub fn learn(&mut self, tokens: &TokenTrace, range: Range<usize>) -> Result<()> {
        self.check(tokens)?;
        let n = tokens.num_tokens();
        if range.start >= range.end || range.end > n {
            return Err(Error::planner(
                NAME,
                format!(
                    "build tokens {}..{} are not a non-empty part of the trace's {n}",
                    range.start, range.end
                ),
            ));
        }
        if !self.learnt.is_empty() && range.start != self.learnt.end {
            return Err(Error::planner(
                NAME,
                format!(
                    "the path table learnt tokens {}..{}; it grows only from token {}",
                    self.learnt.start, self.learnt.end, self.learnt.end
                ),
            ));
        }
        let (e_n, depth) = (self.experts, self.depth);
        let e2 = e_n * e_n;
        let mut touched = vec![false; self.row_sums.len()];
        for l in 0..self.layers {
            let now = tokens.routes(l);
            for t in range.clone() {
                for &y in now.row(t) {
                    self.marginal[l * e_n + y as usize] += 1.0;
                }
                for j in 1..=depth.min(l) {
                    let before = tokens.routes(l - j);
                    let row = (l * depth) + j - 1;
                    for &x in before.row(t) {
                        for &y in now.row(t) {
                            let c = &mut self.counts[row * e2 + x as usize * e_n + y as usize];
                            *c = c.saturating_add(1);
                        }
                        self.row_sums[row * e_n + x as usize] += now.row(t).len() as u64;
                        touched[row * e_n + x as usize] = true;
                    }
                }
            }
        }
        for (r, _) in touched.iter().enumerate().filter(|(_, t)| **t) {
            let sum = self.row_sums[r] as f32;
            let (c, f) = (
                &self.counts[r * e_n..(r + 1) * e_n],
                &mut self.freq[r * e_n..(r + 1) * e_n],
            );
            for (fi, &ci) in f.iter_mut().zip(c) {
                *fi = ci as f32 / sum;
            }
        }
        self.learnt = if self.learnt.is_empty() {
            range
        } else {
            self.learnt.start..range.end
        };
        Ok(())
    }

    /// The tokens it has learnt (`0..0`: none).
    pub fn learnt(&self) -> Range<usize> {
        self.learnt.clone()
    }

    /// Whether any of `range`'s tokens were learnt: the table must not
    /// predict them.
    fn overlaps(&self, range: &Range<usize>) -> bool {
        range.start < self.learnt.end && self.learnt.start < range.end
    }

    /// The `k` experts predicted for token `t` at layer index `l` of
    /// `tokens` (which must have the build trace's experts and layers);
    /// refused for a token it learnt.
    ///
    /// ```
    /// use moeplan::{planners::libra::PathTable, TokenTrace};
    /// use ndarray::array;
    /// let t = TokenTrace::new(4, vec![0, 1], vec![array![[0], [1]], array![[2], [2]]], vec![0; 2])?;
    /// let table = PathTable::build(&t, 0..1, 2)?;
    /// assert_eq!(table.predict(&t, 1, 0)?, vec![0]); // layer 0: the learnt marginal
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn predict(&self, tokens: &TokenTrace, t: usize, l: usize) -> Result<Vec<u32>> {
        self.check(tokens)?;
        if t >= tokens.num_tokens() || l >= self.layers {
            return Err(Error::Argument(format!(
                "token {t} of layer index {l} is outside the trace"
            )));
        }
        self.check_outside(&(t..t + 1))?;
        let mut scores = Vec::new();
        let mut out = Vec::new();
        self.predict_into(tokens, t, l, &mut scores, &mut out);
        Ok(out)
    }

    fn check_outside(&self, range: &Range<usize>) -> Result<()> {
        if self.overlaps(range) {
            return Err(Error::planner(
                NAME,
                format!(
                    "the path table learnt tokens {}..{}, which include tokens of {}..{}: it predicts only tokens outside what it learnt",
                    self.learnt.start, self.learnt.end, range.start, range.end
                ),
            ));
        }
        Ok(())
    }

    fn check(&self, tokens: &TokenTrace) -> Result<()> {
        if tokens.num_experts() != self.experts || tokens.num_layers() != self.layers {
            return Err(Error::Mismatch(format!(
                "the path table was built for {} experts × {} layers, the trace has {} × {}",
                self.experts,
                self.layers,
                tokens.num_experts(),
                tokens.num_layers()
            )));
        }
        Ok(())
    }

    fn predict_into(
        &self,
        tokens: &TokenTrace,
        t: usize,
        l: usize,
        scores: &mut Vec<f64>,
        out: &mut Vec<u32>,
    ) {
        let e_n = self.experts;
        let e2 = e_n * e_n;
        scores.clear();
        scores.resize(e_n, 0.0);
        for j in 1..=self.depth.min(l) {
            let row = (l * self.depth) + j - 1;
            for &x in tokens.routes(l - j).row(t) {
                let start = row * e2 + x as usize * e_n;
                if let Some(f) = self.freq.get(start..start + e_n) {
                    for (s, &p) in scores.iter_mut().zip(f) {
                        *s += f64::from(p);
                    }
                }
            }
        }
        let marginal = self.marginal.get(l * e_n..(l + 1) * e_n).unwrap_or(&[]);
        top_k_by(scores, marginal, self.top_k.min(tokens.top_k()).max(1), out);
    }
}

/// The `k` indices with the highest `primary`, ties by `secondary`, then
/// the lower index.
fn top_k_by(primary: &[f64], secondary: &[f64], k: usize, out: &mut Vec<u32>) {
    out.clear();
    out.extend(0..primary.len() as u32);
    let key = |i: u32| {
        let i = i as usize;
        (
            primary.get(i).copied().unwrap_or(0.0),
            secondary.get(i).copied().unwrap_or(0.0),
        )
    };
    let cmp = |a: &u32, b: &u32| {
        let (ka, kb) = (key(*a), key(*b));
        kb.0.total_cmp(&ka.0)
            .then(kb.1.total_cmp(&ka.1))
            .then(a.cmp(b))
    };
    if k >= out.len() {
        out.sort_unstable_by(cmp);
        return;
    }
    // The best k in one pass, kept sorted (k is a model's top-k, 1 to 8 or
    // so, against a few hundred experts): most experts lose to the k-th at
    // once. The order is total, so this is the select-and-sort's result.
    // The path table calls this for every token of every layer.
    let n = out.len() as u32;
    out.clear();
    // The k-th best's primary: an expert strictly below it cannot enter
    // (one comparison instead of the whole key's).
    let mut floor = f64::NEG_INFINITY;
    for i in 0..n {
        if out.len() == k {
            if primary.get(i as usize).is_some_and(|&p| p < floor) {
                continue;
            }
            match out.last() {
                Some(last) if cmp(&i, last).is_lt() => {
                    out.pop();
                }
                _ => continue,
            }
        }
        let at = out.partition_point(|x| cmp(x, &i).is_lt());
        out.insert(at, i);
        if out.len() == k {
            floor = out
                .last()
                .and_then(|&w| primary.get(w as usize).copied())
                .unwrap_or(f64::NEG_INFINITY);
        }
    }
}

/// Libra's predictor stood in for by calibrated noise (see the module
/// documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Noisy {
    accuracy: f64,
    seed: u64,
    experts: usize,
    /// Per layer, the cumulative marginal over experts (`L × E`).
    cdf: Vec<f64>,
    marginal: Vec<f64>,
}

impl Noisy {
    /// A predictor of accuracy `p` (0 to 1) on `work`, its marginals the
    /// workload's counts summed over batches, its draws seeded by `seed`.
    ///
    /// ```
    /// use moeplan::{planners::libra::Noisy, data::Workload, LoadTrace};
    /// use ndarray::Array3;
    /// let w = Workload::new(LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0])?);
    /// assert!(Noisy::new(&w, 0.8, 7).is_ok());
    /// assert!(Noisy::new(&w, 1.5, 7).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(work: &Workload, p: f64, seed: u64) -> Result<Self> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::planner(
                NAME,
                format!("predictor accuracy {p} is outside 0..=1"),
            ));
        }
        let counts = work.trace().counts();
        let (_, l_n, e_n) = counts.dim();
        let summed = counts.sum_axis(ndarray::Axis(0));
        let marginal: Vec<f64> = summed.iter().copied().collect();
        let mut cdf = Vec::with_capacity(l_n * e_n);
        for l in 0..l_n {
            let mut acc = 0.0;
            for e in 0..e_n {
                acc += marginal[l * e_n + e];
                cdf.push(acc);
            }
        }
        Ok(Noisy {
            accuracy: p,
            seed,
            experts: e_n,
            cdf,
            marginal,
        })
    }

    /// The accuracy it is calibrated to.
    pub fn accuracy(&self) -> f64 {
        self.accuracy
    }

    /// Token `t`'s predicted set at layer index `l` given its true set.
    fn draw(&self, l: usize, t: usize, truth: &[u32], out: &mut Vec<u32>) {
        let e_n = self.experts;
        let mut rng = SplitMix(
            self.seed ^ (l as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (t as u64).rotate_left(32),
        );
        out.clear();
        let mut dropped = 0usize;
        for &e in truth {
            if rng.unit() < self.accuracy {
                out.push(e);
            } else {
                dropped += 1;
            }
        }
        let cdf = self.cdf.get(l * e_n..(l + 1) * e_n).unwrap_or(&[]);
        let weights = self.marginal.get(l * e_n..(l + 1) * e_n).unwrap_or(&[]);
        let total = cdf.last().copied().unwrap_or(0.0);
        let banned = |e: u32, out: &[u32]| truth.contains(&e) || out.contains(&e);
        for _ in 0..dropped {
            let mut pick = None;
            if total > 0.0 {
                // Rejection keeps the draw proportional to the marginal
                // over the allowed experts; the scan below is the fallback
                // when the banned ones hold nearly all the mass.
                for _ in 0..64 {
                    let u = rng.unit() * total;
                    let e = cdf.partition_point(|&c| c <= u).min(e_n.saturating_sub(1)) as u32;
                    if !banned(e, out) && weights.get(e as usize).copied().unwrap_or(0.0) > 0.0 {
                        pick = Some(e);
                        break;
                    }
                }
            }
            if pick.is_none() {
                let allowed: f64 = (0..e_n as u32)
                    .filter(|&e| !banned(e, out))
                    .map(|e| weights.get(e as usize).copied().unwrap_or(0.0))
                    .sum();
                let free = (0..e_n as u32).filter(|&e| !banned(e, out)).count();
                if free == 0 {
                    break;
                }
                if allowed > 0.0 {
                    let mut u = rng.unit() * allowed;
                    for e in (0..e_n as u32).filter(|&e| !banned(e, out)) {
                        u -= weights.get(e as usize).copied().unwrap_or(0.0);
                        if u < 0.0 {
                            pick = Some(e);
                            break;
                        }
                    }
                }
                if pick.is_none() {
                    let i = ((rng.unit() * free as f64) as usize).min(free - 1);
                    pick = (0..e_n as u32).filter(|&e| !banned(e, out)).nth(i);
                }
            }
            if let Some(e) = pick {
                out.push(e);
            }
        }
    }
}

/// SplitMix64: a tiny, fast generator; seeded per (layer, token) so a
/// token's draws do not depend on the order predictions are asked in.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A predictor of the next layer's routing.
#[derive(Debug, Clone, PartialEq)]
pub enum Predictor {
    /// The true routing: an upper bound.
    Oracle,
    /// Lina's expert-selection-path table (needs token routes).
    PathTable(PathTable),
    /// The previous batch's counts.
    PreviousBatch,
    /// Calibrated noise of a given accuracy: simulated.
    Noisy(Noisy),
}

impl Predictor {
    /// Its name: `oracle`, `path-table`, `previous-batch`, `noisy`.
    ///
    /// ```
    /// assert_eq!(moeplan::planners::libra::Predictor::Oracle.name(), "oracle");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Predictor::Oracle => "oracle",
            Predictor::PathTable(_) => "path-table",
            Predictor::PreviousBatch => "previous-batch",
            Predictor::Noisy(_) => "noisy",
        }
    }

    /// What its figures are: `upper bound` (oracle), `measured` (path
    /// table, previous batch), `simulated` (noisy).
    ///
    /// ```
    /// use moeplan::planners::libra::Predictor;
    /// assert_eq!(Predictor::Oracle.label(), "upper bound");
    /// assert_eq!(Predictor::PreviousBatch.label(), "measured");
    /// ```
    pub fn label(&self) -> &'static str {
        match self {
            Predictor::Oracle => "upper bound",
            Predictor::PathTable(_) | Predictor::PreviousBatch => "measured",
            Predictor::Noisy(_) => "simulated",
        }
    }

    /// Predicted pairs of batch `b`, layer index `l` per (source GPU,
    /// expert), for `gpus` GPUs (the workload's sources, or all `gpus`
    /// sending `1 / gpus` of every expert under even arrival, then held as
    /// one [`PredictedCounts::uniform`] row).
    ///
    /// ```
    /// use moeplan::{planners::libra::Predictor, data::Workload, LoadTrace};
    /// use ndarray::Array3;
    /// let mut c = Array3::from_elem((2, 1, 2), 2.0);
    /// c[[1, 0, 0]] = 6.0;
    /// let w = Workload::new(LoadTrace::new(c, vec![0])?);
    /// let p = Predictor::PreviousBatch.predict(&w, 1, 0, 2)?;
    /// assert_eq!(p.to_dense(), vec![1.0, 1.0, 1.0, 1.0]); // batch 0's counts, halved over 2 GPUs
    /// assert_eq!(Predictor::Oracle.predict(&w, 1, 0, 2)?.get(0, 0), 3.0);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn predict(
        &self,
        work: &Workload,
        b: usize,
        l: usize,
        gpus: usize,
    ) -> Result<PredictedCounts> {
        let mut out = PredictedCounts::zeros(0, 0);
        self.predict_into(work, b, l, gpus, &mut out)?;
        Ok(out)
    }

    /// [`Predictor::predict`] into `out`, keeping its allocation (a
    /// schedule predicts every layer of every batch).
    pub fn predict_into(
        &self,
        work: &Workload,
        b: usize,
        l: usize,
        gpus: usize,
        out: &mut PredictedCounts,
    ) -> Result<()> {
        let trace = work.trace();
        let (b_n, l_n, e_n) = trace.counts().dim();
        if b >= b_n || l >= l_n {
            return Err(Error::Argument(format!(
                "batch {b}, layer index {l} is outside the workload's {b_n} × {l_n}"
            )));
        }
        if work.num_sources().is_some_and(|s| s > gpus) || gpus == 0 {
            return Err(Error::Mismatch(format!(
                "the workload has {} source ranks, the cluster {gpus} GPUs: each rank sends from a GPU of its own, so choose at least as many GPUs as ranks",
                work.num_sources().unwrap_or(0)
            )));
        }
        let even = matches!(work.source_kind(), Sources::Even);
        // Ranks past the workload's send nothing: only theirs are held.
        let held = work.num_sources().unwrap_or(gpus);
        let counts = trace.counts();
        match self {
            Predictor::Oracle => {
                out.reset_held(gpus, held, e_n, even);
                fill_true(work, b, l, gpus, out);
            }
            Predictor::PreviousBatch => {
                out.reset_held(gpus, held, e_n, even);
                if b == 0 {
                    // Each source's pairs of this batch, spread uniformly.
                    if even {
                        let sent: f64 = (0..e_n).map(|e| counts[[b, l, e]] / gpus as f64).sum();
                        out.counts.fill(sent / e_n as f64);
                    } else {
                        let mut now = PredictedCounts::zeros(gpus, e_n);
                        fill_true(work, b, l, gpus, &mut now);
                        for s in 0..gpus {
                            let sent: f64 = now.row(s).iter().sum();
                            for e in 0..e_n {
                                out.add(s, e, sent / e_n as f64);
                            }
                        }
                    }
                } else {
                    fill_true(work, b - 1, l, gpus, out);
                }
            }
            Predictor::PathTable(table) => {
                out.reset_held(gpus, held, e_n, false);
                let (tokens, batch_tokens) = need_tokens(work)?;
                table.check(tokens)?;
                let batch = work.batch_range(b, batch_tokens);
                table.check_outside(&batch)?;
                let rank = tokens.source_rank();
                if table.learnt().is_empty() {
                    // Nothing learnt yet: each token's k pairs spread
                    // uniformly, as the previous batch predicts batch 0.
                    let k = tokens.top_k() as f64;
                    for t in batch {
                        let s = rank.get(t).copied().unwrap_or(0) as usize;
                        for e in 0..e_n {
                            out.add(s, e, k / e_n as f64);
                        }
                    }
                } else {
                    let (mut scores, mut set) = (Vec::new(), Vec::new());
                    for t in batch {
                        table.predict_into(tokens, t, l, &mut scores, &mut set);
                        let s = rank.get(t).copied().unwrap_or(0) as usize;
                        for &e in &set {
                            out.add(s, e as usize, 1.0);
                        }
                    }
                }
            }
            Predictor::Noisy(noisy) => match work.tokens() {
                Some(tokens) => {
                    out.reset_held(gpus, held, e_n, false);
                    let (_, batch_tokens) = need_tokens(work)?;
                    let rank = tokens.source_rank();
                    let routes = tokens.routes(l);
                    let mut set = Vec::new();
                    for t in work.batch_range(b, batch_tokens) {
                        noisy.draw(l, t, routes.row(t).as_slice().unwrap_or(&[]), &mut set);
                        let s = rank.get(t).copied().unwrap_or(0) as usize;
                        for &e in &set {
                            out.add(s, e as usize, 1.0);
                        }
                    }
                }
                None => {
                    out.reset_held(gpus, held, e_n, even);
                    let mut now = PredictedCounts::zeros(0, 0);
                    now.reset_held(gpus, held, e_n, even);
                    fill_true(work, b, l, gpus, &mut now);
                    let weights = noisy.marginal.get(l * e_n..(l + 1) * e_n).unwrap_or(&[]);
                    let total: f64 = weights.iter().sum();
                    let p = noisy.accuracy;
                    let rows = if even { 1 } else { gpus };
                    for s in 0..rows {
                        let sent: f64 = now.row(s).iter().sum();
                        for e in 0..e_n {
                            let share = if total > 0.0 {
                                weights.get(e).copied().unwrap_or(0.0) / total
                            } else {
                                1.0 / e_n as f64
                            };
                            out.add(s, e, p * now.get(s, e) + (1.0 - p) * sent * share);
                        }
                    }
                }
            },
        }
        Ok(())
    }

    /// A path table that has learnt nothing grows online from token 0, so
    /// its predictions depend on the routes and its depth only: made once
    /// per workload and kept with it (`Workload::derived`), every batch
    /// after the first, per (source rank, expert), `u16` — a Libra change
    /// that is not the predictor's (its N, a cluster) then costs what the
    /// previous batch's does, not seconds. `None` for other predictors, a
    /// table built on a split, counts without routes, or more than 2²⁵
    /// cells (64 MiB).
    pub(crate) fn path_memo(&self, work: &Workload) -> Result<Option<Arc<Vec<u16>>>> {
        let Predictor::PathTable(table) = self else {
            return Ok(None);
        };
        if !table.learnt().is_empty() || !matches!(work.source_kind(), Sources::Tokens { .. }) {
            return Ok(None);
        }
        // The table is cloned only when its predictions are not kept yet.
        work.derived(&memo_name(table.depth), || {
            let mut build = PathMemoBuild::of(self.clone(), work)
                .ok_or_else(|| Error::planner(NAME, "no path-table predictions to make"))?;
            while !build.advance(work)? {}
            Ok(std::mem::take(&mut build.all))
        })
    }

    /// Batch `b` (≥ 1), layer index `l`'s prediction from a
    /// [`Predictor::path_memo`], into `out` for `gpus` GPUs: what
    /// [`Predictor::predict_into`] gives the table grown online.
    pub(crate) fn fill_from_memo(
        memo: &[u16],
        work: &Workload,
        (b, l): (usize, usize),
        gpus: usize,
        out: &mut PredictedCounts,
    ) {
        let trace = work.trace();
        let e_n = trace.num_experts();
        let ranks = work.num_sources().unwrap_or(0);
        let cells = ranks * e_n;
        out.reset_held(gpus, ranks, e_n, false);
        let at = (b * trace.num_layers() + l) * cells;
        // Ranks at or past `gpus` are dropped, as `PredictedCounts::add` drops them.
        let rows = ranks.min(gpus) * e_n;
        for (x, &c) in out.counts.iter_mut().zip(memo.iter().skip(at).take(rows)) {
            *x += f64::from(c);
        }
    }

    /// After batch `b` was served: the path table learns every token served
    /// up to its end that it has not learnt (it grows online; from token 0
    /// when it has learnt nothing); the other predictors keep nothing.
    pub(crate) fn learn_batch(&mut self, work: &Workload, b: usize) -> Result<()> {
        if let Predictor::PathTable(table) = self {
            let (tokens, batch_tokens) = need_tokens(work)?;
            let end = work.batch_range(b, batch_tokens).end;
            let start = if table.learnt().is_empty() {
                0
            } else {
                table.learnt().end
            };
            if start < end {
                table.learn(tokens, start..end)?;
            }
        }
        Ok(())
    }

    /// Token `t`'s predicted set at layer `l` of batch `b`; `None` when
    /// this predictor has none for it (previous batch on batch 0, a path
    /// table that has learnt nothing).
    fn token_set(
        &self,
        work: &Workload,
        tokens: &TokenTrace,
        b: usize,
        (t, l): (usize, usize),
        (scratch, out): (&mut Vec<f64>, &mut Vec<u32>),
    ) -> bool {
        let truth = tokens.routes(l);
        match self {
            Predictor::Oracle => {
                out.clear();
                out.extend(truth.row(t).iter().copied());
                true
            }
            Predictor::PathTable(table) => {
                if table.learnt().is_empty() {
                    return false;
                }
                table.predict_into(tokens, t, l, scratch, out);
                true
            }
            Predictor::PreviousBatch => {
                if b == 0 {
                    return false;
                }
                let counts = work.trace().counts();
                let row: Vec<f64> = counts.slice(ndarray::s![b - 1, l, ..]).to_vec();
                top_k_by(&row, &[], tokens.top_k(), out);
                true
            }
            Predictor::Noisy(noisy) => {
                noisy.draw(l, t, truth.row(t).as_slice().unwrap_or(&[]), out);
                true
            }
        }
    }
}

/// [`Predictor::path_memo`]'s table made a step at a time: the page's
/// worker makes it between requests (one batch and layer, or one batch's
/// learning, per [`PathMemoBuild::step`], a few milliseconds each on the
/// default), so a person's first switch to the path table finds its
/// predictions kept instead of waiting seconds for them.
#[derive(Debug, Clone)]
pub struct PathMemoBuild {
    /// The path table, grown online as it goes.
    online: Predictor,
    /// Batches, layers, source ranks and experts of the workload it is for.
    shape: [usize; 4],
    /// The predictions so far, as [`Predictor::path_memo`] keeps them.
    all: Vec<u16>,
    /// The next (batch, layer) to predict; layer = layers: learn the batch.
    next: (usize, usize),
    /// What [`Workload::derived`] keeps it under.
    name: String,
    out: PredictedCounts,
}

impl PathMemoBuild {
    /// The build of the depth-`depth` path table's predictions for `work`;
    /// `None` when there is nothing to make: counts without routes, a table
    /// too large to keep, or one kept already.
    ///
    /// ```
    /// use moeplan::planners::libra::{PathMemoBuild, DEFAULT_DEPTH};
    /// use moeplan::{data::{model, Workload}, synth::token_generator::{TokenGenConfig, generate_tokens}};
    /// let t = generate_tokens(&TokenGenConfig::new(model::preset("olmoe")?, 256))?;
    /// let work = Workload::from_tokens(t, 128)?;
    /// let mut build = PathMemoBuild::new(&work, DEFAULT_DEPTH)?.expect("token routes");
    /// while !build.step(&work)? {}
    /// assert!(PathMemoBuild::new(&work, DEFAULT_DEPTH)?.is_none()); // kept now
    /// assert!(PathMemoBuild::new(&Workload::new(work.trace().clone()), DEFAULT_DEPTH)?.is_none());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(work: &Workload, depth: usize) -> Result<Option<PathMemoBuild>> {
        let Some(tokens) = work.tokens() else {
            return Ok(None);
        };
        // Kept already, or too large to keep: nothing to make.
        if !matches!(work.derived_slot(&memo_name(depth)), Some(None)) {
            return Ok(None);
        }
        // Work ahead of time must not take the memory a request needs:
        // without room for the table, none is made (a request that asks
        // for the path table then makes it as ever).
        let Some(table) = PathTable::try_empty(tokens, depth)? else {
            return Ok(None);
        };
        Ok(PathMemoBuild::of(Predictor::PathTable(table), work))
    }

    /// The build for `predictor` (a path table that has learnt nothing)
    /// on `work` (token routes).
    fn of(predictor: Predictor, work: &Workload) -> Option<PathMemoBuild> {
        let Predictor::PathTable(table) = &predictor else {
            return None;
        };
        let Sources::Tokens { ranks, .. } = work.source_kind() else {
            return None;
        };
        if !table.learnt().is_empty() {
            return None;
        }
        let t = work.trace();
        let shape = [t.num_batches(), t.num_layers(), *ranks, t.num_experts()];
        let name = memo_name(table.depth);
        let build = PathMemoBuild {
            online: predictor,
            shape,
            all: Vec::new(),
            // Batch 0 is predicted from nothing learnt (uniform):
            // `fill_from_memo`'s caller asks the table itself.
            next: (0, shape[1]),
            name,
            out: PredictedCounts::default(),
        };
        Some(build)
    }

    /// One step; `true` once every batch is done, the table then kept with
    /// `work` (which must be the workload it was started for, or a clone).
    pub fn step(&mut self, work: &Workload) -> Result<bool> {
        if !self.advance(work)? {
            return Ok(false);
        }
        work.keep_derived(&self.name, std::mem::take(&mut self.all));
        Ok(true)
    }

    /// The steps left, done now: what a request that needs the table does
    /// when the build has not finished between requests.
    pub fn finish(mut self, work: &Workload) -> Result<()> {
        while !self.step(work)? {}
        Ok(())
    }

    /// The fraction done, 0 to 1.
    pub fn progress(&self) -> f64 {
        let [b_n, l_n, ..] = self.shape;
        let done = self.next.0 * (l_n + 1) + self.next.1;
        done as f64 / (b_n * (l_n + 1)).max(1) as f64
    }

    /// One step of the table without keeping it; `true` when done.
    fn advance(&mut self, work: &Workload) -> Result<bool> {
        let [b_n, l_n, ranks, e_n] = self.shape;
        let t = work.trace();
        if [
            t.num_batches(),
            t.num_layers(),
            work.num_sources().unwrap_or(0),
            t.num_experts(),
        ] != self.shape
        {
            return Err(Error::Mismatch(
                "the path table's predictions were started for another workload".into(),
            ));
        }
        let (b, l) = self.next;
        if b >= b_n {
            return Ok(true);
        }
        let cells = ranks * e_n;
        if self.all.is_empty() {
            self.all = try_zeros(b_n * l_n * cells).ok_or_else(|| {
                Error::planner(NAME, "not enough memory for the path table's predictions")
            })?;
        }
        if l < l_n {
            self.online.predict_into(work, b, l, ranks, &mut self.out)?;
            let at = (b * l_n + l) * cells;
            for (x, &c) in self
                .all
                .iter_mut()
                .skip(at)
                .take(cells)
                .zip(&self.out.counts)
            {
                // Whole tokens (one per predicted expert), at most the
                // batch's: exact in u16.
                if c.fract() != 0.0 || c > f64::from(u16::MAX) {
                    return Err(Error::planner(
                        NAME,
                        format!("path-table count {c} at batch {b}: not a whole count"),
                    ));
                }
                *x = c as u16;
            }
            self.next.1 += 1;
        } else {
            self.online.learn_batch(work, b)?;
            self.next = (b + 1, 0);
        }
        Ok(self.next.0 >= b_n)
    }
}

fn fill_true(work: &Workload, b: usize, l: usize, gpus: usize, out: &mut PredictedCounts) {
    let e_n = out.experts;
    if matches!(work.source_kind(), Sources::Even) {
        // Every source sends `n_e / D`: one row, however `out` holds it.
        let counts = work.trace().counts();
        let rows = if out.uniform { 1 } else { gpus };
        for s in 0..rows {
            for e in 0..e_n {
                out.add(s, e, counts[[b, l, e]] / gpus as f64);
            }
        }
    } else {
        // Straight into the rows, source `s`'s row its counts: a prediction
        // is uniform only under even arrival (the branch above).
        work.add_source_counts(b, l, &mut out.counts);
    }
}

fn need_tokens(work: &Workload) -> Result<(&TokenTrace, usize)> {
    match work.source_kind() {
        Sources::Tokens {
            tokens,
            batch_tokens,
            ..
        } => Ok((tokens, *batch_tokens)),
        _ => Err(Error::planner(
            NAME,
            "this predictor needs token routes (a workload built from a token trace)",
        )),
    }
}

/// A predictor's accuracy by the Libra paper's Table 1 metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Accuracy {
    /// Mean over (token, layer) of `|predicted ∩ true| / k`.
    pub accuracy: f64,
    /// (Token, layer) predictions averaged.
    pub predictions: usize,
    /// What a uniform random set of `k` scores: `k / E`.
    pub chance: f64,
}

/// Measures `predictor` on the token routes of `work`'s batches `batches`,
/// layers 1 onwards (layer 0 has no previous layer to predict from, for
/// any predictor), by Table 1's metric. Batch 0 is skipped for the
/// previous-batch predictor, and so is every batch a path table predicts
/// before it has learnt anything. A path table is measured as Libra's
/// schedule uses it: each batch must lie outside what it has learnt, and
/// it learns the batch once measured (it grows online).
///
/// ```
/// use moeplan::planners::libra::{accuracy, Predictor};
/// use moeplan::{data::Workload, TokenTrace};
/// use ndarray::array;
/// let t = TokenTrace::new(4, vec![0, 1], vec![array![[0, 1], [2, 3]], array![[1, 2], [0, 3]]], vec![0, 1])?;
/// let w = Workload::from_tokens(t, 1)?;
/// assert_eq!(accuracy(&Predictor::Oracle, &w, 0..2)?.accuracy, 1.0);
/// // batch 1 (token 1) predicted by batch 0's top-2 at layer 1 {1, 2}: none of {0, 3}
/// assert_eq!(accuracy(&Predictor::PreviousBatch, &w, 0..2)?.accuracy, 0.0);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn accuracy(predictor: &Predictor, work: &Workload, batches: Range<usize>) -> Result<Accuracy> {
    let (tokens, batch_tokens) = need_tokens(work)?;
    let mut predictor = predictor.clone();
    if let Predictor::PathTable(table) = &predictor {
        table.check(tokens)?;
    }
    let k = tokens.top_k();
    let e_n = tokens.num_experts();
    let b_n = work.trace().num_batches();
    let (mut sum, mut n) = (0.0, 0usize);
    let (mut scratch, mut set) = (Vec::new(), Vec::new());
    for b in batches.start..batches.end.min(b_n) {
        if let Predictor::PathTable(table) = &predictor {
            table.check_outside(&work.batch_range(b, batch_tokens))?;
        }
        for t in work.batch_range(b, batch_tokens) {
            for l in 1..tokens.num_layers() {
                if !predictor.token_set(work, tokens, b, (t, l), (&mut scratch, &mut set)) {
                    continue;
                }
                let truth = tokens.routes(l);
                let truth = truth.row(t);
                let hit = truth.iter().filter(|e| set.contains(e)).count();
                sum += hit as f64 / k as f64;
                n += 1;
            }
        }
        predictor.learn_batch(work, b)?;
    }
    if n == 0 {
        return Err(Error::planner(
            NAME,
            "no (token, layer) to measure accuracy on: need batches past the first and two layers",
        ));
    }
    Ok(Accuracy {
        accuracy: sum / n as f64,
        predictions: n,
        chance: k as f64 / e_n as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::{PathMemoBuild, PathTable, PredictedCounts, Predictor, top_k_by};
    use crate::data::{Workload, model};
    use crate::synth::token_generator::{TokenGenConfig, generate_tokens};

    /// The path table's kept predictions are what the table grown online
    /// predicts, batch by batch and layer by layer, for as many GPUs as
    /// ranks, more, and fewer (ranks past the GPUs dropped alike); a second
    /// call finds them kept.
    #[test]
    fn path_memo_is_the_online_table() {
        let t =
            generate_tokens(&TokenGenConfig::new(model::preset("olmoe").unwrap(), 640)).unwrap();
        let work = Workload::from_tokens(t.clone(), 128).unwrap();
        let (b_n, l_n) = (work.trace().num_batches(), work.trace().num_layers());
        let predictor = Predictor::PathTable(PathTable::empty(&t, 2).unwrap());
        let memo = predictor.path_memo(&work).unwrap().expect("token routes");
        let again = predictor.path_memo(&work).unwrap().expect("kept");
        assert!(std::sync::Arc::ptr_eq(&memo, &again));
        let mut checked = 0;
        for gpus in [8, 16, 4] {
            let mut online = predictor.clone();
            let (mut direct, mut kept) = (PredictedCounts::default(), PredictedCounts::default());
            for b in 0..b_n {
                for l in 0..l_n {
                    online.predict_into(&work, b, l, gpus, &mut direct).unwrap();
                    if b > 0 {
                        Predictor::fill_from_memo(&memo, &work, (b, l), gpus, &mut kept);
                        assert_eq!(kept, direct, "{gpus} GPUs, batch {b}, layer {l}");
                        checked += 1;
                    }
                }
                online.learn_batch(&work, b).unwrap();
            }
        }
        assert_eq!(checked, 3 * (b_n - 1) * l_n);
        assert!(b_n >= 5);
        // Made a step at a time on a workload of its own (clones share
        // what is kept): the same table, after one step per batch and
        // layer past the first batch and one per batch learnt.
        let fresh = Workload::from_tokens(t.clone(), 128).unwrap();
        let mut build = PathMemoBuild::new(&fresh, 2)
            .unwrap()
            .expect("nothing kept yet");
        let mut steps = 1;
        while !build.step(&fresh).unwrap() {
            assert!(build.progress() < 1.0);
            steps += 1;
        }
        assert_eq!((steps, build.progress()), ((b_n - 1) * l_n + b_n, 1.0));
        let stepped = predictor.path_memo(&fresh).unwrap().expect("kept");
        assert_eq!(stepped, memo);
        assert!(
            PathMemoBuild::new(&fresh, 2).unwrap().is_none(),
            "kept: nothing to make"
        );
        // A half-made build finished on a request's demand: the same table.
        let other = Workload::from_tokens(t.clone(), 128).unwrap();
        let mut half = PathMemoBuild::new(&other, 2).unwrap().unwrap();
        for _ in 0..steps / 2 {
            assert!(!half.step(&other).unwrap());
        }
        half.finish(&other).unwrap();
        assert_eq!(predictor.path_memo(&other).unwrap().expect("kept"), memo);
        // Another workload's steps are refused, not mixed in.
        let shorter = Workload::from_tokens(t.clone(), 256).unwrap();
        let mut wrong = PathMemoBuild::new(&work.clone(), 2).unwrap();
        assert!(wrong.is_none(), "kept with `work`");
        wrong = PathMemoBuild::new(&Workload::from_tokens(t.clone(), 128).unwrap(), 2).unwrap();
        assert!(wrong.unwrap().step(&shorter).is_err());
        // Other predictors, and counts without routes: none.
        assert!(Predictor::Oracle.path_memo(&work).unwrap().is_none());
        let counts = Workload::new(work.trace().clone());
        assert!(predictor.path_memo(&counts).unwrap().is_none());
    }

    /// The one-pass top k is the full sort's first k, ties (in the primary
    /// and the secondary, drawn from few values) broken by the lower index:
    /// every k from 0 past the length, on many seeded inputs.
    #[test]
    fn top_k_is_the_sorts_first_k() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m) as f64
        };
        let mut checked = 0;
        for n in [0usize, 1, 2, 7, 33, 256] {
            for _ in 0..20 {
                let primary: Vec<f64> = (0..n).map(|_| next(5)).collect();
                let secondary: Vec<f64> = (0..n).map(|_| next(3)).collect();
                let mut all: Vec<u32> = (0..n as u32).collect();
                all.sort_by(|&a, &b| {
                    let (a, b) = (a as usize, b as usize);
                    primary[b]
                        .total_cmp(&primary[a])
                        .then(secondary[b].total_cmp(&secondary[a]))
                        .then(a.cmp(&b))
                });
                for k in [0, 1, 2, 8, n, n + 1] {
                    let mut out = vec![99];
                    top_k_by(&primary, &secondary, k, &mut out);
                    assert_eq!(out, all[..k.min(n)], "n {n}, k {k}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 6 * 20 * 6);
    }
}
