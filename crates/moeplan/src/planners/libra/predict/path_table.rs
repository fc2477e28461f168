//! The path table (see the module above): learnt from token routes,
//! predicting each token's next experts from its path; and its predictions
//! for a whole workload made a step at a time ([`PathMemoBuild`], the
//! page's work ahead of time).

use super::*;

/// Lina's expert-selection-path table, factored per layer distance (see
/// the module documentation). It predicts only tokens outside what it was
/// built on: [`PathTable::build`] gives it a build split, and Libra's
/// schedule and [`accuracy`] grow it online, each batch learnt after it is
/// predicted.
#[derive(Debug, Clone, PartialEq)]
pub struct PathTable {
    pub(super) depth: usize,
    pub(super) experts: usize,
    pub(super) layers: usize,
    pub(super) top_k: usize,
    /// `counts[((l · depth) + j − 1) · E² + x · E + y]`: of the tokens
    /// learnt, those with `x` at layer `l − j` and `y` at layer `l`.
    pub(super) counts: Vec<u32>,
    /// `row_sums[((l · depth) + j − 1) · E + x]`: the sum of that row.
    pub(super) row_sums: Vec<u64>,
    /// `counts` as fractions of their row's sum, refreshed for the rows a
    /// [`PathTable::learn`] touched: what every prediction reads.
    pub(super) freq: Vec<f32>,
    /// `marginal[l · E + y]`: learnt pairs of `y` at layer `l`.
    pub(super) marginal: Vec<f64>,
    /// The tokens learnt, one contiguous range (`0..0` when none).
    pub(super) learnt: Range<usize>,
}

/// What a path table's predictions are kept under ([`Workload::derived`]).
pub(super) fn memo_name(depth: usize) -> String {
    format!("libra path table, depth {depth}")
}

/// `n` zeros, or `None` when the allocator cannot give them.
pub(super) fn try_zeros<T: Clone + Default>(n: usize) -> Option<Vec<T>> {
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
    /// `PathTable::learn`s (Libra's schedule then predicts uniform).
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
    pub(super) fn try_empty(tokens: &TokenTrace, depth: usize) -> Result<Option<Self>> {
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
    pub fn build(tokens: &TokenTrace, build: Range<usize>, depth: usize) -> Result<Self> {
        let mut table = PathTable::empty(tokens, depth)?;
        table.learn(tokens, build)?;
        Ok(table)
    }

    /// Learns tokens `range` of `tokens` (non-empty, inside the trace, and
    /// right after what it learnt before, if anything).
    pub(crate) fn learn(&mut self, tokens: &TokenTrace, range: Range<usize>) -> Result<()> {
        self.learn_layers(tokens, range, 0..self.layers)
    }

    /// [`PathTable::learn`] at `layers` only, so work ahead of time can
    /// learn a batch in parts a request waits behind at most one of. What
    /// it has learnt moves on with the part that ends at the last layer;
    /// until then the table must not predict (its layers disagree).
    pub(crate) fn learn_layers(
        &mut self,
        tokens: &TokenTrace,
        range: Range<usize>,
        layers: Range<usize>,
    ) -> Result<()> {
        self.check(tokens)?;
        if layers.start >= layers.end || layers.end > self.layers {
            return Err(Error::planner(
                NAME,
                format!(
                    "layers {}..{} are not a non-empty part of the table's {}",
                    layers.start, layers.end, self.layers
                ),
            ));
        }
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
        for l in layers.clone() {
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
        if layers.end == self.layers {
            self.learnt = if self.learnt.is_empty() {
                range
            } else {
                self.learnt.start..range.end
            };
        }
        Ok(())
    }

    /// The tokens it has learnt (`0..0`: none).
    pub(crate) fn learnt(&self) -> Range<usize> {
        self.learnt.clone()
    }

    /// Whether any of `range`'s tokens were learnt: the table must not
    /// predict them.
    pub(super) fn overlaps(&self, range: &Range<usize>) -> bool {
        range.start < self.learnt.end && self.learnt.start < range.end
    }

    /// The `k` experts predicted for token `t` at layer index `l` of
    /// `tokens` (which must have the build trace's experts and layers);
    /// refused for a token it learnt.
    #[cfg(test)]
    pub(crate) fn predict(&self, tokens: &TokenTrace, t: usize, l: usize) -> Result<Vec<u32>> {
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

    pub(super) fn check_outside(&self, range: &Range<usize>) -> Result<()> {
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

    pub(super) fn check(&self, tokens: &TokenTrace) -> Result<()> {
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

    pub(super) fn predict_into(
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
pub(super) fn top_k_by(primary: &[f64], secondary: &[f64], k: usize, out: &mut Vec<u32>) {
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

/// The path table's predictions for a whole workload (what Libra's
/// schedule reads, kept with the workload) made a step at a time: the page's
/// worker makes it between requests (one batch and layer, or one batch's
/// learning, per [`PathMemoBuild::step`], a few milliseconds each on the
/// default), so a person's first switch to the path table finds its
/// predictions kept instead of waiting seconds for them.
#[derive(Debug, Clone)]
pub struct PathMemoBuild {
    /// The path table, grown online as it goes.
    pub(super) online: Predictor,
    /// Batches, layers, source ranks and experts of the workload it is for.
    pub(super) shape: [usize; 4],
    /// The predictions so far, as [`Predictor::path_memo`] keeps them.
    pub(super) all: Vec<u16>,
    /// The next (batch, layer) to predict; layer = layers: learn the batch.
    pub(super) next: (usize, usize),
    /// What [`Workload::derived`] keeps it under.
    pub(super) name: String,
    pub(super) out: PredictedCounts,
}

/// Layers a step of [`PathMemoBuild`] learns a batch at: a part costs about
/// what one layer's predictions do (2 ms natively on the route default; the
/// whole batch at once was 16–24 ms, the longest step a request waited
/// behind, issue 52).
pub(super) const LEARN_LAYERS: usize = 8;

/// The steps learning one batch of `layers` layers takes.
fn learn_parts(layers: usize) -> usize {
    layers.div_ceil(LEARN_LAYERS).max(1)
}

impl PathMemoBuild {
    /// The build of the depth-`depth` path table's predictions for `work`;
    /// `None` when there is nothing to make: counts without routes, a table
    /// too large to keep, or one kept already.
    ///
    /// ```
    /// use moeplan::planners::{PathMemoBuild, DEFAULT_DEPTH};
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
    pub(super) fn of(predictor: Predictor, work: &Workload) -> Option<PathMemoBuild> {
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
        let [b_n, l_n, ranks, e_n] = self.shape;
        // (One batch: nothing predicted, all zeros.)
        self.all.resize(b_n * l_n * ranks * e_n, 0);
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
        let per_batch = l_n + learn_parts(l_n);
        // Batch 0 is learnt, never predicted: its layers' steps are none.
        let done = (self.next.0 * per_batch + self.next.1).saturating_sub(l_n);
        done as f64 / (b_n * per_batch).saturating_sub(l_n).max(1) as f64
    }

    /// One step of the table without keeping it; `true` when done.
    pub(super) fn advance(&mut self, work: &Workload) -> Result<bool> {
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
        // Reserved whole at the first step, written in order: zeroing the
        // route default's 15 MB at once was the longest step (issue 52).
        if self.all.capacity() == 0 {
            self.all.try_reserve_exact(b_n * l_n * cells).map_err(|_| {
                Error::planner(NAME, "not enough memory for the path table's predictions")
            })?;
        }
        if l < l_n {
            self.online.predict_into(work, b, l, ranks, &mut self.out)?;
            let at = (b * l_n + l) * cells;
            // Batch 0, never predicted (nothing learnt before it): zeros.
            self.all.resize(at, 0);
            for &c in self.out.counts.iter().take(cells) {
                // Whole tokens (one per predicted expert), at most the
                // batch's: exact in u16.
                if c.fract() != 0.0 || c > f64::from(u16::MAX) {
                    return Err(Error::planner(
                        NAME,
                        format!("path-table count {c} at batch {b}: not a whole count"),
                    ));
                }
                self.all.push(c as u16);
            }
            self.all.resize(at + cells, 0);
            self.next.1 += 1;
        } else {
            let part = l - l_n;
            let layers = part * LEARN_LAYERS..((part + 1) * LEARN_LAYERS).min(l_n);
            let last = layers.end == l_n;
            self.online.learn_batch_layers(work, b, layers)?;
            self.next = if last { (b + 1, 0) } else { (b, l + 1) };
        }
        Ok(self.next.0 >= b_n)
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn predict() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{TokenTrace, planners::libra::PathTable};
        use ndarray::array;
        let t = TokenTrace::new(
            4,
            vec![0, 1],
            vec![array![[0], [1]], array![[2], [2]]],
            vec![0; 2],
        )?;
        let table = PathTable::build(&t, 0..1, 2)?;
        assert_eq!(table.predict(&t, 1, 0)?, vec![0]); // layer 0: the learnt marginal
        Ok(())
    }
    #[test]
    fn empty_example0() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{TokenTrace, planners::libra::PathTable};
        use ndarray::array;
        let t = TokenTrace::new(4, vec![0], vec![array![[0], [1]]], vec![0; 2])?;
        assert!(PathTable::empty(&t, 2)?.learnt().is_empty());
        assert!(PathTable::empty(&t, 5).is_err());
        Ok(())
    }
    #[test]
    fn build_example1() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{TokenTrace, planners::libra::PathTable};
        use ndarray::array;
        // expert 0 is followed by 2, expert 1 by 3 (tokens 0 and 1)
        let t = TokenTrace::new(
            4,
            vec![0, 1],
            vec![array![[0], [1], [0]], array![[2], [3], [2]]],
            vec![0; 3],
        )?;
        let table = PathTable::build(&t, 0..2, 1)?;
        assert_eq!(table.predict(&t, 2, 1)?, vec![2]);
        assert!(table.predict(&t, 1, 1).is_err()); // token 1 was learnt
        Ok(())
    }
}
