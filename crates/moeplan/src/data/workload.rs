//! What the simulator replays: per-batch expert counts, and where the
//! tokens come from.
//!
//! In expert-parallel serving every GPU is also a data-parallel rank that
//! routes its own tokens, so a (token, expert) pair has a source GPU as well
//! as a destination. A [`Workload`] knows the counts `B × L × E` (a
//! [`LoadTrace`]) and, at one of three levels, the sources: none (tokens
//! are assumed to arrive evenly from every rank), counts per source rank
//! `B × L × S × E`, or token routes (a [`TokenTrace`] cut into batches of
//! consecutive tokens, each token with its rank) — the only level at which
//! vLLM's position-based rule is exact. Apart from the sources, a workload
//! may carry every layer's expert affinity as recorded by the engine
//! (TensorRT-LLM's co-occurrence counts): what GRACE-MoE groups by when
//! there are no token routes to count it from.
//!
//! Source: moeplan's own design (one input for every planner and rule;
//! ARCHITECTURE.md, "The one-way flow"). Cost: O(B · L · S · E) to check per-source counts; reading one
//! (batch, layer) of them O(S · E), of token routes O(tokens · top-k + S · E);
//! checking affinity matrices O(L · E²).

use std::sync::Arc;

use ndarray::{Array2, Array4, Axis, s};

use crate::data::cache::Shared;
use crate::data::trace::{LoadTrace, TokenTrace};
use crate::error::{Error, Result};

/// Most experts an affinity (co-activation) matrix is built for: `E × E`
/// doubles, 128 MiB at this size, far beyond any model's few hundred routed
/// experts.
pub(crate) const MAX_AFFINITY_EXPERTS: usize = 4096;

/// Tokens to replay and where they come from.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    trace: LoadTrace,
    sources: Sources,
    /// Per layer index, `E × E` pair counts with a zero diagonal; shared,
    /// as clones of a workload are frequent and the matrices `L · E²`.
    affinity: Option<Arc<[Array2<f64>]>>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Sources {
    Even,
    Counts(Array4<f64>),
    Tokens {
        tokens: TokenTrace,
        batch_tokens: usize,
        ranks: usize,
        /// Tables derived from the routes alone, kept by name
        /// ([`Workload::derived`]): the per-source counts among them.
        derived: Derived,
    },
}

/// Tables a planner derives from token routes alone, `u16` per cell,
/// each kept under the name of what made it; shared by a workload's
/// clones, equal whatever they hold (a cache, not data).
pub(crate) type Derived = Shared<Named>;

/// A derived table and the name it is kept under.
type Named = (String, Arc<Vec<u16>>);

/// Most cells (`B · L · S · E`) a table derived from token routes may
/// have: 64 MiB of `u16`. The page's default (64 batches × 58 layers × 8
/// ranks × 256 experts) is 7.6 M cells, 15 MB per table.
const MAX_DERIVED_CELLS: usize = 1 << 25;

impl Workload {
    /// Counts only: every rank is assumed to send `1 / D` of each expert's
    /// tokens ("even arrival"), and reports say so.
    ///
    /// ```
    /// use moeplan::{data::Workload, LoadTrace};
    /// use ndarray::Array3;
    /// let w = Workload::new(LoadTrace::new(Array3::from_elem((2, 1, 4), 1.0), vec![0])?);
    /// assert_eq!(w.sources(), "even arrival (assumed)");
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(trace: LoadTrace) -> Self {
        Workload {
            trace,
            sources: Sources::Even,
            affinity: None,
        }
    }

    /// Adds counts per source rank, `by_source[b][l][s][e]`, which must sum
    /// over `s` to the trace's counts (within 1e-9 relative). Ranks beyond
    /// `S` send nothing; `S` may not exceed the GPUs simulated.
    pub(crate) fn with_sources(self, by_source: Array4<f64>) -> Result<Self> {
        let (b, l, s_n, e) = by_source.dim();
        let want = self.trace.counts().dim();
        if (b, l, e) != want || s_n == 0 {
            return Err(Error::Mismatch(format!(
                "per-source counts are {:?} (batches, layers, sources, experts), the trace {want:?} (batches, layers, experts) with at least one source",
                by_source.dim()
            )));
        }
        if let Some(((bi, li, si, ei), v)) = by_source
            .indexed_iter()
            .find(|(_, v)| !v.is_finite() || **v < 0.0)
        {
            return Err(Error::Trace(format!(
                "per-source count {v} at batch {bi}, layer index {li}, source {si}, expert {ei}: counts must be finite and non-negative"
            )));
        }
        let summed = by_source.sum_axis(Axis(2));
        if let Some(((bi, li, ei), (x, y))) = summed
            .indexed_iter()
            .zip(self.trace.counts().iter())
            .map(|((i, x), y)| (i, (*x, *y)))
            .find(|(_, (x, y))| (x - y).abs() > 1e-9 * y.abs().max(1.0))
        {
            return Err(Error::Mismatch(format!(
                "per-source counts sum to {x} at batch {bi}, layer index {li}, expert {ei}; the trace has {y}"
            )));
        }
        Ok(Workload {
            trace: self.trace,
            sources: Sources::Counts(by_source),
            affinity: self.affinity,
        })
    }

    /// Token routes cut into batches of `batch_tokens` consecutive tokens
    /// (the last may be shorter), each token from its recorded rank.
    ///
    /// ```
    /// use moeplan::{data::Workload, TokenTrace};
    /// use ndarray::array;
    /// let t = TokenTrace::new(4, vec![0], vec![array![[0, 1], [2, 3], [1, 2]]], vec![0, 1, 1])?;
    /// let w = Workload::from_tokens(t, 2)?;
    /// assert_eq!((w.trace().num_batches(), w.num_sources()), (2, Some(2)));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn from_tokens(tokens: TokenTrace, batch_tokens: usize) -> Result<Self> {
        let trace = tokens.to_load_trace(batch_tokens)?;
        let ranks = ranks_of(&tokens);
        Ok(Workload {
            trace,
            sources: Sources::Tokens {
                tokens,
                batch_tokens,
                ranks,
                derived: Derived::default(),
            },
            affinity: None,
        })
    }

    /// The counts `B × L × E`.
    ///
    /// ```
    /// use moeplan::{data::Workload, LoadTrace};
    /// use ndarray::Array3;
    /// let w = Workload::new(LoadTrace::new(Array3::from_elem((3, 1, 4), 1.0), vec![0])?);
    /// assert_eq!(w.trace().num_batches(), 3);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn trace(&self) -> &LoadTrace {
        &self.trace
    }

    /// Source ranks known (`S`), `None` under even arrival.
    ///
    /// ```
    /// use moeplan::{data::Workload, LoadTrace};
    /// use ndarray::Array3;
    /// let w = Workload::new(LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0])?);
    /// assert_eq!(w.num_sources(), None);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn num_sources(&self) -> Option<usize> {
        match &self.sources {
            Sources::Even => None,
            Sources::Counts(a) => Some(a.dim().2),
            Sources::Tokens { ranks, .. } => Some(*ranks),
        }
    }

    /// Where the tokens come from, in words reports carry.
    ///
    /// ```
    /// use moeplan::{data::Workload, TokenTrace};
    /// use ndarray::array;
    /// let t = TokenTrace::new(2, vec![0], vec![array![[0], [1]]], vec![0, 1])?;
    /// assert_eq!(Workload::from_tokens(t, 2)?.sources(), "token routes");
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn sources(&self) -> &'static str {
        match self.sources {
            Sources::Even => "even arrival (assumed)",
            Sources::Counts(_) => "per-source counts",
            Sources::Tokens { .. } => "token routes",
        }
    }

    /// The token routes, when the workload was built from them
    /// ([`Workload::from_tokens`]); `None` for counts.
    ///
    /// ```
    /// use moeplan::{data::Workload, TokenTrace};
    /// use ndarray::array;
    /// let t = TokenTrace::new(2, vec![0], vec![array![[0], [1]]], vec![0, 1])?;
    /// let w = Workload::from_tokens(t, 2)?;
    /// assert_eq!(w.tokens().map(|t| t.num_tokens()), Some(2));
    /// assert!(Workload::new(w.trace().clone()).tokens().is_none());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn tokens(&self) -> Option<&TokenTrace> {
        match &self.sources {
            Sources::Tokens { tokens, .. } => Some(tokens),
            _ => None,
        }
    }

    /// Adds every layer's expert affinity, `affinity[l][[i, j]]`: tokens of
    /// layer index `l` that chose both `i` and `j` — as an engine recorded
    /// it (TensorRT-LLM's co-occurrence counts,
    /// [`crate::formats::read_cooccurrence`]), for planners that
    /// group by affinity when the workload has no token routes (routes,
    /// where present, take precedence). One `E × E` matrix per layer of the
    /// trace, symmetric, finite and non-negative; the diagonal (an expert
    /// with itself, which engines count) is cleared. The sources are kept.
    pub(crate) fn with_affinity(self, affinity: Vec<Array2<f64>>) -> Result<Self> {
        let (layers, experts) = (self.trace.num_layers(), self.trace.num_experts());
        if affinity.len() != layers {
            return Err(Error::Mismatch(format!(
                "{} affinity matrices for a trace of {layers} layers",
                affinity.len()
            )));
        }
        if experts > MAX_AFFINITY_EXPERTS {
            return Err(Error::Limit(format!(
                "an affinity matrix of {experts} × {experts} experts (at most {})",
                MAX_AFFINITY_EXPERTS
            )));
        }
        let mut checked = Vec::with_capacity(layers);
        for (l, mut m) in affinity.into_iter().enumerate() {
            if m.dim() != (experts, experts) {
                return Err(Error::Mismatch(format!(
                    "the affinity of layer index {l} is {:?}, the trace has {experts} experts",
                    m.dim()
                )));
            }
            if let Some(((i, j), v)) = m.indexed_iter().find(|(_, v)| !v.is_finite() || **v < 0.0) {
                return Err(Error::Trace(format!(
                    "affinity {v} of experts {i} and {j} in layer index {l}: pair counts must be finite and non-negative"
                )));
            }
            if let Some(((i, j), v)) = m.indexed_iter().find(|((i, j), v)| {
                m.get((*j, *i))
                    .is_none_or(|w| (*v - w).abs() > 1e-9 * v.abs().max(1.0))
            }) {
                return Err(Error::Trace(format!(
                    "affinity of experts {i} and {j} in layer index {l} is {v} one way and {} the other: it must be symmetric",
                    m.get((j, i)).copied().unwrap_or(f64::NAN)
                )));
            }
            m.diag_mut().fill(0.0);
            checked.push(m);
        }
        Ok(Workload {
            affinity: Some(checked.into()),
            ..self
        })
    }

    /// Every layer's affinity as added by [`Workload::with_affinity`]
    /// (`None` otherwise, token routes included: GRACE counts those).
    pub(crate) fn affinity(&self) -> Option<&[Array2<f64>]> {
        self.affinity.as_deref()
    }

    pub(crate) fn source_kind(&self) -> &Sources {
        &self.sources
    }

    /// The same workload with at most `gpus` source ranks: rank `r` sends
    /// from GPU `r mod gpus` (several data-parallel ranks on one GPU), the
    /// counts unchanged. What a front end does when a trace recorded on
    /// more ranks than the cluster it plans for has GPUs (the simulator
    /// refuses more sources than GPUs); a workload within `gpus` comes back
    /// as it is.
    ///
    /// ```
    /// use moeplan::{data::Workload, TokenTrace};
    /// use ndarray::array;
    /// let t = TokenTrace::new(4, vec![0], vec![array![[0, 1], [2, 3], [1, 2]]], vec![0, 3, 2])?;
    /// let w = Workload::from_tokens(t, 2)?;
    /// let two = w.with_sources_on(2)?;
    /// assert_eq!((w.num_sources(), two.num_sources()), (Some(4), Some(2)));
    /// assert_eq!(two.tokens().unwrap().source_rank(), &[0, 1, 0]);
    /// assert_eq!(two.trace(), w.trace());
    /// assert_eq!(w.with_sources_on(8)?, w);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn with_sources_on(&self, gpus: usize) -> Result<Workload> {
        if gpus == 0 {
            return Err(Error::Argument("sources need at least one GPU".into()));
        }
        if self.num_sources().is_none_or(|s| s <= gpus) {
            return Ok(self.clone());
        }
        let sources = match &self.sources {
            Sources::Even => Sources::Even,
            Sources::Counts(a) => {
                let (b, l, s_n, e) = a.dim();
                let mut folded = Array4::zeros((b, l, gpus, e));
                for s in 0..s_n {
                    let mut to = folded.slice_mut(s![.., .., s % gpus, ..]);
                    to += &a.slice(s![.., .., s, ..]);
                }
                Sources::Counts(folded)
            }
            Sources::Tokens {
                tokens,
                batch_tokens,
                ..
            } => {
                let tokens = tokens.clone().with_sequences_on_ranks(gpus)?;
                let ranks = ranks_of(&tokens);
                Sources::Tokens {
                    tokens,
                    batch_tokens: *batch_tokens,
                    ranks,
                    derived: Derived::default(),
                }
            }
        };
        Ok(Workload {
            trace: self.trace.clone(),
            sources,
            affinity: self.affinity.clone(),
        })
    }

    /// Every batch as one: the counts summed over batches, and so the
    /// per-source counts (token routes become per-source counts; even
    /// arrival stays even). Under a rule whose split of an expert's pairs
    /// does not depend on the batch (`even`), the pair traffic of this one
    /// batch is the sum of the batches', at `1 / B` of a replay's cost.
    pub(crate) fn one_batch(&self) -> Result<Workload> {
        let trace = self.trace.summed_batch();
        let by_source = self.source_counts(0..self.trace.num_batches(), true);
        let one = Workload {
            trace,
            sources: Sources::Even,
            affinity: self.affinity.clone(),
        };
        match by_source {
            None => Ok(one),
            Some(a) => one.with_sources(a),
        }
    }

    /// Counts of batch `b`, layer index `l` per (source, expert), `S × E`
    /// row-major, in `scratch` (reused; no allocation once it is large
    /// enough).
    pub(crate) fn fill_source_counts(&self, b: usize, l: usize, scratch: &mut Vec<f64>) {
        let rows = match &self.sources {
            Sources::Even => 0,
            Sources::Counts(a) => a.dim().2,
            Sources::Tokens { ranks, .. } => *ranks,
        };
        scratch.clear();
        scratch.resize(rows * self.trace.num_experts(), 0.0);
        self.add_source_counts(b, l, scratch);
    }

    /// Adds the counts of [`Workload::fill_source_counts`] to `into`'s
    /// first `S × E` entries (those past its end are left out).
    pub(crate) fn add_source_counts(&self, b: usize, l: usize, into: &mut [f64]) {
        let e_n = self.trace.num_experts();
        match &self.sources {
            Sources::Even => {}
            Sources::Counts(a) => {
                for (x, &c) in into.iter_mut().zip(a.slice(s![b, l, .., ..])) {
                    *x += c;
                }
            }
            Sources::Tokens {
                tokens,
                batch_tokens,
                ranks,
                ..
            } => {
                // Counted once per workload: every Libra change reads them
                // three times (prediction, copy timing, replay), each time
                // 30 M scattered increments on the page's default without.
                let cells = ranks * e_n;
                let kept = self
                    .derived("per-source counts", || Ok(self.count_all(cells)))
                    .ok()
                    .flatten();
                if let Some(all) = kept {
                    let at = (b * self.trace.num_layers() + l) * cells;
                    for (x, &c) in into.iter_mut().zip(all.get(at..at + cells).unwrap_or(&[])) {
                        *x += f64::from(c);
                    }
                    return;
                }
                let routes = tokens.routes(l);
                // Borrowed as it is (routes are kept row-major): the
                // batch's rows read at once, no per-token view.
                let routes = routes.as_standard_layout();
                let flat = routes.as_slice().unwrap_or(&[]);
                let range = self.batch_range(b, *batch_tokens);
                let k = tokens.top_k().max(1);
                let rows = flat
                    .get(range.start * k..range.end * k)
                    .unwrap_or(&[])
                    .chunks_exact(k);
                for (&s, row) in tokens.source_rank()[range].iter().zip(rows) {
                    let at = s as usize * e_n;
                    for &e in row {
                        if let Some(x) = into.get_mut(at + e as usize) {
                            *x += 1.0;
                        }
                    }
                }
            }
        }
    }

    /// Every (batch, layer)'s per-source counts of token routes, batch-major
    /// then layer, `cells` (`S · E`) each; empty for other sources.
    fn count_all(&self, cells: usize) -> Vec<u16> {
        let Sources::Tokens {
            tokens,
            batch_tokens,
            ..
        } = &self.sources
        else {
            return Vec::new();
        };
        let (b_n, l_n, e_n) = (
            self.trace.num_batches(),
            self.trace.num_layers(),
            self.trace.num_experts(),
        );
        let mut all = vec![0u16; b_n * l_n * cells];
        let k = tokens.top_k().max(1);
        for l in 0..l_n {
            let routes = tokens.routes(l);
            let routes = routes.as_standard_layout();
            let flat = routes.as_slice().unwrap_or(&[]);
            for b in 0..b_n {
                let range = self.batch_range(b, *batch_tokens);
                let at = (b * l_n + l) * cells;
                let Some(out) = all.get_mut(at..at + cells) else {
                    continue;
                };
                let rows = flat
                    .get(range.start * k..range.end * k)
                    .unwrap_or(&[])
                    .chunks_exact(k);
                for (&s, row) in tokens.source_rank()[range].iter().zip(rows) {
                    let at = s as usize * e_n;
                    for &e in row {
                        if let Some(x) = out.get_mut(at + e as usize) {
                            // At most the batch's tokens (checked ≤ u16::MAX).
                            *x = x.saturating_add(1);
                        }
                    }
                }
            }
        }
        all
    }

    /// The table named `name` derived from this workload's token routes,
    /// one `u16` per (batch, layer, source rank, expert) — a count of the
    /// batch's tokens at most: `make()` the first time, kept for this
    /// workload and its clones after. `None` without token routes, above
    /// 2²⁵ cells, or with batches of more tokens than a `u16` counts (the
    /// caller then works without it). `make` must depend on the routes and
    /// the name only (the per-source counts; a planner's predictions made
    /// online from them), not on a cluster or options outside the name.
    pub(crate) fn derived(
        &self,
        name: &str,
        make: impl FnOnce() -> Result<Vec<u16>>,
    ) -> Result<Option<Arc<Vec<u16>>>> {
        match self.derived_slot(name) {
            None => Ok(None),
            Some(Some(kept)) => Ok(Some(kept)),
            // Made without the lock held: two threads may both make it, once.
            Some(None) => Ok(self.keep_derived(name, make()?)),
        }
    }

    /// Whether a table named `name` can be kept for this workload (`None`:
    /// no token routes, or over [`Workload::derived`]'s limits), and the
    /// one kept, if made.
    pub(crate) fn derived_slot(&self, name: &str) -> Option<Option<Arc<Vec<u16>>>> {
        let Sources::Tokens {
            derived,
            batch_tokens,
            ranks,
            ..
        } = &self.sources
        else {
            return None;
        };
        let t = &self.trace;
        let cells = [t.num_batches(), t.num_layers(), *ranks, t.num_experts()]
            .into_iter()
            .fold(1usize, usize::saturating_mul);
        if *batch_tokens > u16::MAX as usize || cells > MAX_DERIVED_CELLS {
            return None;
        }
        Some(
            derived
                .lock()
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| Arc::clone(t)),
        )
    }

    /// Keeps `table` under `name` (made as [`Workload::derived`] says),
    /// unless one is kept already; returns the one kept. `None` where no
    /// table can be kept ([`Workload::derived_slot`]).
    pub(crate) fn keep_derived(&self, name: &str, table: Vec<u16>) -> Option<Arc<Vec<u16>>> {
        let Sources::Tokens { derived, .. } = &self.sources else {
            return None;
        };
        match self.derived_slot(name) {
            None => return None,
            Some(Some(kept)) => return Some(kept),
            Some(None) => {}
        }
        let table = Arc::new(table);
        derived.lock().push((name.to_string(), Arc::clone(&table)));
        Some(table)
    }

    /// Batches `range` of this workload, with their sources: per-source
    /// counts kept, token routes counted per rank (a planner that reads
    /// routes needs the whole workload), even arrival staying even.
    pub(crate) fn slice_batches(&self, range: std::ops::Range<usize>) -> Result<Workload> {
        let trace = self.trace.slice_batches(range.clone())?;
        let sliced = Workload {
            trace,
            sources: Sources::Even,
            affinity: None,
        };
        match self.source_counts(range, false) {
            Some(a) => sliced.with_sources(a),
            None => Ok(sliced),
        }
    }

    /// This workload's batches followed by `next`'s ([`LoadTrace::then`]):
    /// per-source counts (token routes counted per rank) where both have
    /// them from as many sources, else even arrival.
    pub fn then(&self, next: &Workload) -> Result<Workload> {
        let trace = self.trace.then(&next.trace)?;
        let joined = Workload {
            trace,
            sources: Sources::Even,
            affinity: None,
        };
        let a = self.source_counts(0..self.trace.num_batches(), false);
        let b = next.source_counts(0..next.trace.num_batches(), false);
        match (a, b) {
            (Some(a), Some(b)) if a.dim().2 == b.dim().2 => {
                let both = ndarray::concatenate(Axis(0), &[a.view(), b.view()])
                    .map_err(|e| Error::Trace(format!("joining sources: {e}")))?;
                joined.with_sources(both)
            }
            _ => Ok(joined),
        }
    }

    /// Per-source counts of batches `range`, `B × L × S × E` (token routes
    /// counted per rank), or summed into one batch (`1 × L × S × E`) when
    /// `summed`; `None` under even arrival.
    fn source_counts(&self, range: std::ops::Range<usize>, summed: bool) -> Option<Array4<f64>> {
        let (l_n, e_n) = (self.trace.num_layers(), self.trace.num_experts());
        let out_batches = if summed { 1 } else { range.len() };
        match &self.sources {
            Sources::Even => None,
            Sources::Counts(a) => {
                let part = a.slice(s![range, .., .., ..]);
                Some(if summed {
                    part.sum_axis(Axis(0)).insert_axis(Axis(0))
                } else {
                    part.to_owned()
                })
            }
            Sources::Tokens {
                tokens,
                ranks,
                batch_tokens,
                ..
            } => {
                let mut a = Array4::zeros((out_batches, l_n, *ranks, e_n));
                let rank = tokens.source_rank();
                for (i, b) in range.enumerate() {
                    let span = self.batch_range(b, *batch_tokens);
                    let into = if summed { 0 } else { i };
                    for l in 0..l_n {
                        let routes = tokens.routes(l);
                        let mut layer = a.slice_mut(s![into, l, .., ..]);
                        for t in span.clone() {
                            for &e in routes.row(t) {
                                layer[[rank[t] as usize, e as usize]] += 1.0;
                            }
                        }
                    }
                }
                Some(a)
            }
        }
    }

    /// Token indices of batch `b`.
    pub(crate) fn batch_range(&self, b: usize, batch_tokens: usize) -> std::ops::Range<usize> {
        let n = match &self.sources {
            Sources::Tokens { tokens, .. } => tokens.num_tokens(),
            _ => 0,
        };
        (b * batch_tokens).min(n)..((b + 1) * batch_tokens).min(n)
    }
}

/// Source ranks of token routes: the highest rank recorded, plus one.
fn ranks_of(tokens: &TokenTrace) -> usize {
    tokens
        .source_rank()
        .iter()
        .copied()
        .max()
        .map_or(1, |r| r as usize + 1)
}

#[cfg(test)]
mod tests {
    use ndarray::{Array3, Array4};

    use super::Workload;
    use crate::data::trace::LoadTrace;

    /// Token routes' per-source counts, kept after the first read, are
    /// each token counted once at its rank and expert: against a count by
    /// hand of every token, on a workload whose last batch is short.
    #[test]
    fn kept_source_counts_are_the_tokens() {
        use crate::data::model;
        use crate::synth::token_generator::{TokenGenConfig, generate_tokens};
        let t =
            generate_tokens(&TokenGenConfig::new(model::preset("olmoe").unwrap(), 300)).unwrap();
        let w = Workload::from_tokens(t.clone(), 128).unwrap();
        let (b_n, l_n, e_n) = (3, t.num_layers(), t.num_experts());
        assert_eq!(w.trace().num_batches(), b_n);
        let s_n = w.num_sources().unwrap();
        let mut checked = 0;
        for pass in 0..2 {
            for b in 0..b_n {
                for l in 0..l_n {
                    let mut by_hand = vec![0.0; s_n * e_n];
                    let routes = t.routes(l);
                    for i in b * 128..((b + 1) * 128).min(300) {
                        let s = t.source_rank()[i] as usize;
                        for &e in routes.row(i) {
                            by_hand[s * e_n + e as usize] += 1.0;
                        }
                    }
                    let mut got = vec![0.5; s_n * e_n];
                    w.add_source_counts(b, l, &mut got);
                    let got: Vec<f64> = got.iter().map(|x| x - 0.5).collect();
                    assert_eq!(got, by_hand, "pass {pass}, batch {b}, layer {l}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 2 * b_n * l_n);
        let kept = w
            .derived("per-source counts", || panic!("counted already"))
            .unwrap();
        assert_eq!(kept.map(|t| t.len()), Some(b_n * l_n * s_n * e_n));
    }

    /// Per-source counts of 5 ranks on 2 GPUs: ranks 0, 2, 4 on GPU 0,
    /// 1 and 3 on GPU 1, every (batch, layer, expert) summed.
    #[test]
    fn per_source_counts_fold_onto_fewer_gpus() {
        let (b, l, s, e) = (2, 3, 5, 4);
        let by = Array4::from_shape_fn((b, l, s, e), |(bi, li, si, ei)| {
            (bi + 2 * li + 3 * si + ei) as f64
        });
        let trace = LoadTrace::new(by.sum_axis(ndarray::Axis(2)), vec![0, 1, 2]).unwrap();
        let w = Workload::new(trace).with_sources(by.clone()).unwrap();
        let two = w.with_sources_on(2).unwrap();
        assert_eq!((two.num_sources(), two.trace()), (Some(2), w.trace()));
        let mut row = Vec::new();
        let mut checked = 0;
        for bi in 0..b {
            for li in 0..l {
                two.fill_source_counts(bi, li, &mut row);
                let want = Array3::from_shape_fn((1, 2, e), |(_, g, ei)| {
                    (0..s)
                        .filter(|si| si % 2 == g)
                        .map(|si| by[[bi, li, si, ei]])
                        .sum::<f64>()
                });
                assert_eq!(
                    row,
                    want.iter().copied().collect::<Vec<_>>(),
                    "batch {bi}, layer {li}"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, b * l);
        assert!(w.with_sources_on(0).is_err());
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn one_batch() -> Result<(), Box<dyn std::error::Error>> {
        use crate::judge::{CostModel, Rule, Strategy, simulate};
        use crate::synth::token_generator::{TokenGenConfig, generate_tokens};
        use crate::{
            Workload, data::model::preset, data::topology::Topology,
            planners::contiguous::contiguous,
        };
        let tokens = generate_tokens(&TokenGenConfig::new(preset("deepseek-v2-lite")?, 512))?;
        let work = Workload::from_tokens(tokens, 128)?;
        let one = work.one_batch()?;
        assert_eq!(
            (one.trace().num_batches(), one.num_sources()),
            (1, work.num_sources())
        );
        let s = Strategy::fixed(contiguous(work.trace(), Topology::new(2, 4)?)?, Rule::Even);
        let (all, summed) = (
            simulate(&work, &s, &CostModel::default())?,
            simulate(&one, &s, &CostModel::default())?,
        );
        assert!(
            (all.traffic.cross_node - summed.traffic.cross_node).abs() < 1e-9 * all.traffic.pairs
        );
        assert_eq!(all.traffic.pairs, summed.traffic.pairs);
        Ok(())
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {
    #[test]
    fn workload_with_sources_example() {
        let run = || {
            use moeplan::{LoadTrace, data::Workload};
            use ndarray::{Array3, Array4};
            let trace = LoadTrace::new(Array3::from_elem((1, 1, 2), 4.0), vec![0])?;
            let w =
                Workload::new(trace.clone()).with_sources(Array4::from_elem((1, 1, 2, 2), 2.0))?;
            assert_eq!(w.num_sources(), Some(2));
            assert!(
                Workload::new(trace)
                    .with_sources(Array4::from_elem((1, 1, 2, 2), 1.0))
                    .is_err()
            );
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn workload_with_affinity_example() {
        let run = || {
            use moeplan::{Error, LoadTrace, data::Workload};
            use ndarray::{Array3, array};
            let trace = LoadTrace::new(Array3::from_elem((1, 1, 2), 3.0), vec![0])?;
            let w =
                Workload::new(trace.clone()).with_affinity(vec![array![[3.0, 2.0], [2.0, 3.0]]])?;
            assert_eq!(
                w.affinity().map(|a| a[0].clone()),
                Some(array![[0.0, 2.0], [2.0, 0.0]])
            );
            let wrong = Workload::new(trace).with_affinity(vec![array![[0.0, 1.0], [2.0, 0.0]]]);
            assert!(matches!(wrong, Err(Error::Trace(_))));
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn workload_affinity_example() {
        let run = || {
            use moeplan::{LoadTrace, data::Workload};
            use ndarray::Array3;
            let w = Workload::new(LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0])?);
            assert!(w.affinity().is_none());
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod more_examples {
    #[test]
    fn workload_then_example() {
        let run = || {
            use moeplan::{LoadTrace, data::Workload};
            use ndarray::{Array3, Array4};
            let t = LoadTrace::new(Array3::from_elem((1, 1, 2), 4.0), vec![0])?;
            let w = Workload::new(t.clone()).with_sources(Array4::from_elem((1, 1, 2, 2), 2.0))?;
            let ww = w.then(&w)?;
            assert_eq!((ww.trace().num_batches(), ww.num_sources()), (2, Some(2)));
            assert_eq!(w.then(&Workload::new(t))?.num_sources(), None); // one side even
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
