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

use path_table::{memo_name, top_k_by};

const NAME: &str = "libra";

mod accuracy;
mod noisy;
mod path_table;

pub use accuracy::{Accuracy, accuracy};
pub use noisy::Noisy;
pub use path_table::{DEFAULT_DEPTH, PathMemoBuild, PathTable};

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
    #[cfg(test)]
    pub(crate) fn uniform(sources: usize, row: Vec<f64>) -> Result<Self> {
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
    pub(crate) fn sources(&self) -> usize {
        self.sources
    }

    /// Experts (columns).
    pub(crate) fn experts(&self) -> usize {
        self.experts
    }

    /// Pairs source `s` is predicted to send expert `e` (0 outside the
    /// table).
    pub(crate) fn get(&self, s: usize, e: usize) -> f64 {
        if e >= self.experts || s >= self.sources {
            return 0.0;
        }
        self.row(s).get(e).copied().unwrap_or(0.0)
    }

    /// Source `s`'s row of `experts` counts (empty outside the table).
    pub(crate) fn row(&self, s: usize) -> &[f64] {
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
    pub(crate) fn uniform_row(&self) -> Option<&[f64]> {
        self.uniform.then_some(self.counts.as_slice())
    }

    /// The counts, `sources × experts` row-major.
    #[cfg(test)]
    pub(crate) fn to_dense(&self) -> Vec<f64> {
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
    /// assert_eq!(moeplan::planners::Predictor::Oracle.name(), "oracle");
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
    /// use moeplan::planners::Predictor;
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
    #[cfg(test)]
    pub(crate) fn predict(
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
    pub(crate) fn predict_into(
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

    /// The path table's predictions if [`Predictor::path_memo`] has made
    /// them for `work` already (never making them: seconds on the page's
    /// default); `None` otherwise and for other predictors.
    pub(crate) fn path_memo_kept(&self, work: &Workload) -> Option<Arc<Vec<u16>>> {
        match self {
            Predictor::PathTable(table) if table.learnt().is_empty() => {
                work.derived_slot(&memo_name(table.depth)).flatten()
            }
            _ => None,
        }
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
        let layers = work.trace().num_layers();
        self.learn_batch_layers(work, b, 0..layers)
    }

    /// [`Predictor::learn_batch`] at `layers` only (`PathTable::learn_layers`):
    /// the build ahead of time learns a batch in parts.
    pub(crate) fn learn_batch_layers(
        &mut self,
        work: &Workload,
        b: usize,
        layers: std::ops::Range<usize>,
    ) -> Result<()> {
        if let Predictor::PathTable(table) = self {
            let (tokens, batch_tokens) = need_tokens(work)?;
            let end = work.batch_range(b, batch_tokens).end;
            let start = if table.learnt().is_empty() {
                0
            } else {
                table.learnt().end
            };
            if start < end {
                table.learn_layers(tokens, start..end, layers)?;
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

#[cfg(test)]
mod tests;

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn predict() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{LoadTrace, data::Workload, planners::libra::Predictor};
        use ndarray::Array3;
        let mut c = Array3::from_elem((2, 1, 2), 2.0);
        c[[1, 0, 0]] = 6.0;
        let w = Workload::new(LoadTrace::new(c, vec![0])?);
        let p = Predictor::PreviousBatch.predict(&w, 1, 0, 2)?;
        assert_eq!(p.to_dense(), vec![1.0, 1.0, 1.0, 1.0]); // batch 0's counts, halved over 2 GPUs
        assert_eq!(Predictor::Oracle.predict(&w, 1, 0, 2)?.get(0, 0), 3.0);
        Ok(())
    }
    #[test]
    fn new_example0() -> Result<(), Box<dyn std::error::Error>> {
        use crate::planners::libra::PredictedCounts;
        let p = PredictedCounts::new(2, 3, vec![1.0, 0.0, 2.0, 0.0, 4.0, 0.0])?;
        assert_eq!((p.get(1, 1), p.sources(), p.experts()), (4.0, 2, 3));
        assert!(PredictedCounts::new(2, 3, vec![1.0; 5]).is_err());
        Ok(())
    }
    #[test]
    fn uniform_example1() -> Result<(), Box<dyn std::error::Error>> {
        use crate::planners::libra::PredictedCounts;
        let p = PredictedCounts::uniform(3, vec![2.0, 0.5])?;
        assert_eq!((p.get(2, 0), p.sources()), (2.0, 3));
        assert_eq!(
            p.to_dense(),
            PredictedCounts::new(3, 2, vec![2.0, 0.5, 2.0, 0.5, 2.0, 0.5])?.to_dense()
        );
        assert!(PredictedCounts::uniform(3, vec![-1.0]).is_err());
        Ok(())
    }
}
