//! Expert-load traces: what the router did, as the planners see it.
//!
//! [`LoadTrace`] holds token counts per (batch, MoE layer, logical expert) in
//! one contiguous `B × L × E` array, so a replay walks memory in order.
//! [`TokenTrace`] keeps the per-token routing (top-k expert ids per layer and
//! the rank each token came from) that traffic- and affinity-aware planners
//! need; it folds into a `LoadTrace` by batching tokens.

use std::any::Any;
use std::sync::Arc;

use ndarray::{Array2, Array3, ArrayView2, Axis, s};
use serde::Serialize;

use crate::data::cache::Shared;
use crate::error::{Error, Result};

/// Most experts per layer accepted; real models have at most a few hundred.
pub(crate) const MAX_EXPERTS: usize = 1 << 16;
/// Most MoE layers accepted.
pub(crate) const MAX_LAYERS: usize = 1 << 12;

/// Token counts per batch, MoE layer and logical expert.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadTrace {
    /// Shared by clones: a workspace keeps its workload when the cluster
    /// changes, and copying 7.6 MB of counts (the page's default) was a
    /// tenth of such a change.
    counts: Arc<Array3<f64>>,
    layer_ids: Vec<u32>,
    /// Layers of the model in all, when a file or a preset said so; `None`
    /// when only the MoE layers are known (engines' per-layer files need
    /// the real count, see [`LoadTrace::known_model_layers`]).
    model_layers: Option<usize>,
    top_k: Option<usize>,
    model: Option<String>,
    /// What planners derive from the counts alone, kept with them and
    /// shared by the trace's clones (see [`Memo`]).
    memo: Memo,
}

/// Tables planners derive from a trace's counts alone, each kept under
/// the name of what made it (CRAFT's per-layer measurements at each GPU
/// count among them), so a cluster change back to one seen before, or one
/// measured ahead of time, does not measure again. Shared by a trace's
/// clones; a trace made from another (a slice, a sum, a join) starts
/// empty. Each kind bounds what it keeps.
type Memo = Shared<(&'static str, Arc<dyn Any + Send + Sync>)>;

impl LoadTrace {
    /// The table kept under `name` (made empty the first time).
    pub(crate) fn memo<T: Any + Send + Sync + Default>(&self, name: &'static str) -> Arc<T> {
        let mut kept = self.memo.lock();
        if let Some(t) = kept
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, t)| Arc::clone(t).downcast::<T>().ok())
        {
            return t;
        }
        let t = Arc::new(T::default());
        kept.retain(|(n, _)| *n != name);
        kept.push((name, Arc::clone(&t) as Arc<dyn Any + Send + Sync>));
        t
    }

    /// Builds a trace from `counts[b][l][e]` and the model's id of each MoE
    /// layer (dense layers are absent from `counts` but keep their ids free).
    ///
    /// ```
    /// use moeplan::LoadTrace;
    /// use ndarray::Array3;
    /// let t = LoadTrace::new(Array3::from_elem((2, 1, 4), 3.0), vec![5])?;
    /// assert_eq!((t.num_batches(), t.num_layers(), t.num_experts()), (2, 1, 4));
    /// assert_eq!(t.model_layers(), 6);
    /// assert!(LoadTrace::new(Array3::from_elem((1, 1, 4), -1.0), vec![0]).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(counts: Array3<f64>, layer_ids: Vec<u32>) -> Result<Self> {
        let (b, l, e) = counts.dim();
        if b == 0 {
            return Err(Error::Trace("no batches".into()));
        }
        if l == 0 {
            return Err(Error::Trace("no MoE layers (every layer is empty)".into()));
        }
        if e == 0 {
            return Err(Error::Trace("zero experts per layer".into()));
        }
        if e > MAX_EXPERTS {
            return Err(Error::Trace(format!(
                "{e} experts per layer is more than the {MAX_EXPERTS} supported"
            )));
        }
        if l > MAX_LAYERS {
            return Err(Error::Trace(format!(
                "{l} layers is more than the {MAX_LAYERS} supported"
            )));
        }
        if layer_ids.len() != l {
            return Err(Error::Trace(format!(
                "{} layer ids for {l} layers",
                layer_ids.len()
            )));
        }
        if layer_ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::Trace("layer ids must be strictly increasing".into()));
        }
        if let Some(((bi, li, ei), v)) = counts
            .indexed_iter()
            .find(|(_, v)| !v.is_finite() || **v < 0.0)
        {
            return Err(Error::Trace(format!(
                "count {v} at batch {bi}, layer {}, expert {ei}: counts must be finite and non-negative",
                layer_ids[li]
            )));
        }
        let total: f64 = counts.iter().sum();
        if !total.is_finite() {
            return Err(Error::Trace("total token count overflows".into()));
        }
        Ok(LoadTrace {
            counts: Arc::new(counts),
            layer_ids,
            model_layers: None,
            top_k: None,
            model: None,
            memo: Memo::default(),
        })
    }

    /// Records the routing top-k (tokens pick `k` distinct experts per layer).
    pub fn with_top_k(mut self, top_k: usize) -> Self {
        self.top_k = (top_k > 0).then_some(top_k);
        self
    }

    /// Records the model's name.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        let m = model.into();
        self.model = (!m.is_empty()).then_some(m);
        self
    }

    /// Records how many layers the model has in all, dense ones included
    /// (engines index per-layer maps by model layer), as the trace's own
    /// file says (a dump with a row per layer, a preset). Never fewer than
    /// the highest MoE layer id + 1.
    pub fn with_model_layers(mut self, model_layers: usize) -> Self {
        self.model_layers = Some(model_layers.max(self.moe_span()));
        self
    }

    /// The counts, `B × L × E`.
    pub fn counts(&self) -> &Array3<f64> {
        &self.counts
    }

    /// Counts of one batch, `L × E`.
    #[cfg(test)]
    pub(crate) fn batch(&self, b: usize) -> ArrayView2<'_, f64> {
        self.counts.index_axis(Axis(0), b)
    }

    /// Number of batches `B`.
    pub fn num_batches(&self) -> usize {
        self.counts.dim().0
    }

    /// Number of MoE layers `L`.
    pub fn num_layers(&self) -> usize {
        self.counts.dim().1
    }

    /// Logical experts per layer `E`.
    pub fn num_experts(&self) -> usize {
        self.counts.dim().2
    }

    /// The model's id of each MoE layer.
    ///
    /// ```
    /// use moeplan::TokenTrace;
    /// use ndarray::array;
    /// let t = TokenTrace::new(4, vec![3, 5], vec![array![[0, 1]], array![[2, 3]]], vec![0])?;
    /// assert_eq!((t.layer_ids(), t.num_layers(), t.num_experts()), (&[3, 5][..], 2, 4));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn layer_ids(&self) -> &[u32] {
        &self.layer_ids
    }

    /// Layers of the model in all, dense ones included — assumed to be the
    /// highest MoE layer id + 1 when the trace does not say
    /// ([`LoadTrace::known_model_layers`] tells the two apart). Fine for
    /// display; a file an engine indexes by model layer needs the known
    /// count.
    pub fn model_layers(&self) -> usize {
        self.model_layers.unwrap_or_else(|| self.moe_span())
    }

    /// Layers of the model in all when the trace's source said so (a dump
    /// with a row per model layer, dense ones included; a preset), `None`
    /// when only the MoE layers are known (a `.npy` of MoE rows, vLLM's load
    /// window, a CSV): then the MoE layer ids may be positions, not model
    /// layer ids, and the dense layers' count and place are unknown.
    ///
    /// ```
    /// use moeplan::LoadTrace;
    /// use ndarray::Array3;
    /// let t = LoadTrace::new(Array3::from_elem((1, 2, 4), 1.0), vec![0, 1])?;
    /// assert_eq!((t.model_layers(), t.known_model_layers()), (2, None));
    /// assert_eq!(t.with_model_layers(5).known_model_layers(), Some(5));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn known_model_layers(&self) -> Option<usize> {
        self.model_layers
    }

    /// Places the trace in a model of `model_layers` layers whose MoE layers
    /// start at `first_moe_layer` (known from a preset; `None` when only the
    /// layer count is). When the trace's MoE layers are numbered `0..L` with
    /// no dense-layer information and the model has more layers, the ids are
    /// MoE-layer positions: they are shifted to model ids when the preset
    /// says the model's MoE layers are exactly its last `L` (dense layers
    /// first, as DeepSeek-V3's 3); without that it is ambiguous (dense layers
    /// could come first, last or between) and refused. A trace that already
    /// knows its model must agree.
    ///
    /// ```
    /// use moeplan::LoadTrace;
    /// use ndarray::Array3;
    /// // 58 MoE rows of DeepSeek-V3 without its 3 dense layers
    /// let t = LoadTrace::new(Array3::from_elem((1, 58, 4), 1.0), (0..58).collect())?;
    /// let placed = t.clone().in_model(61, Some(3))?;
    /// assert_eq!((placed.layer_ids()[0], placed.known_model_layers()), (3, Some(61)));
    /// assert!(t.in_model(61, None).is_err()); // which 3 layers are dense?
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn in_model(mut self, model_layers: usize, first_moe_layer: Option<usize>) -> Result<Self> {
        let l = self.layer_ids.len();
        let span = self.moe_span();
        let ids = id_range(&self.layer_ids);
        let first_id = self.layer_ids.first().map_or(0, |&x| x as usize);
        if let Some(known) = self.model_layers {
            if known != model_layers {
                return Err(Error::Mismatch(format!(
                    "the trace is for a model of {known} layers, not {model_layers}"
                )));
            }
        } else if span > model_layers {
            return Err(Error::Mismatch(format!(
                "the trace has MoE layers {ids}, more than a model of {model_layers} layers holds"
            )));
        } else if first_id == 0 && span == l && l < model_layers {
            // ids 0..L: positions among the MoE layers, not model layer ids
            match first_moe_layer {
                Some(f) if f + l == model_layers => {
                    for id in &mut self.layer_ids {
                        *id += f as u32;
                    }
                }
                Some(f) => {
                    return Err(Error::Mismatch(format!(
                        "the trace has {l} MoE layers, the model {} (layers {f}..{model_layers})",
                        model_layers.saturating_sub(f)
                    )));
                }
                None => {
                    return Err(Error::Argument(format!(
                        "the trace's {l} MoE layers are numbered {ids} with no dense layers, but the model has {model_layers} layers: which of them are dense is unknown; name the model's preset (--model, e.g. deepseek-v3: 3 dense layers first) or use a trace that keeps the dense layers (an SGLang dump)"
                    )));
                }
            }
        }
        if let Some(f) = first_moe_layer {
            if self.layer_ids.first().is_some_and(|&x| (x as usize) < f) {
                return Err(Error::Mismatch(format!(
                    "the trace has MoE layer {}, which the model's preset says is dense (its MoE layers start at {f})",
                    self.layer_ids[0]
                )));
            }
        }
        self.model_layers = Some(model_layers);
        Ok(self)
    }

    /// Highest MoE layer id + 1: the fewest layers the model can have.
    fn moe_span(&self) -> usize {
        self.layer_ids.last().map_or(0, |&id| id as usize + 1)
    }

    /// Routing top-k, when known.
    pub fn top_k(&self) -> Option<usize> {
        self.top_k
    }

    /// Model name, when known.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// Load per layer and expert summed over all batches (`L × E`): the input
    /// of static planners such as EPLB.
    pub fn summed(&self) -> Array2<f64> {
        self.counts.sum_axis(Axis(0))
    }

    /// Every batch's counts averaged into one batch, the trace's model kept:
    /// what a plan is priced on when a budget changes (the page, CRAFT's
    /// fastest budget).
    ///
    /// ```
    /// use moeplan::LoadTrace;
    /// use ndarray::Array3;
    /// let mut c = Array3::from_elem((2, 1, 2), 1.0);
    /// c[[1, 0, 0]] = 3.0;
    /// let m = LoadTrace::new(c, vec![0])?.mean_batch();
    /// assert_eq!(m.num_batches(), 1);
    /// assert_eq!((m.counts()[[0, 0, 0]], m.counts()[[0, 0, 1]]), (2.0, 1.0));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn mean_batch(&self) -> LoadTrace {
        let b_n = self.num_batches().max(1) as f64;
        LoadTrace {
            counts: Arc::new(self.summed().mapv(|x| x / b_n).insert_axis(Axis(0))),
            layer_ids: self.layer_ids.clone(),
            model_layers: self.model_layers,
            top_k: self.top_k,
            model: self.model.clone(),
            memo: Memo::default(),
        }
    }

    /// Every batch's counts summed into one batch, the trace's model kept.
    pub(crate) fn summed_batch(&self) -> LoadTrace {
        LoadTrace {
            counts: Arc::new(self.summed().insert_axis(Axis(0))),
            layer_ids: self.layer_ids.clone(),
            model_layers: self.model_layers,
            top_k: self.top_k,
            model: self.model.clone(),
            memo: Memo::default(),
        }
    }

    /// The batches in `range` as a trace of their own.
    pub fn slice_batches(&self, range: std::ops::Range<usize>) -> Result<LoadTrace> {
        if range.start >= range.end || range.end > self.num_batches() {
            return Err(Error::Argument(format!(
                "batch range {}..{} is empty or outside 0..{}",
                range.start,
                range.end,
                self.num_batches()
            )));
        }
        Ok(LoadTrace {
            counts: Arc::new(self.counts.slice(s![range, .., ..]).to_owned()),
            layer_ids: self.layer_ids.clone(),
            model_layers: self.model_layers,
            top_k: self.top_k,
            model: self.model.clone(),
            memo: Memo::default(),
        })
    }

    /// This trace's batches followed by `next`'s: one workload turning into
    /// another, as a server sees it (HarMoEny's datasets back to back, ESFT's
    /// intent then summary). Both must have the same MoE layers and experts;
    /// a top-k or model the two disagree on is dropped.
    ///
    /// ```
    /// use moeplan::LoadTrace;
    /// use ndarray::Array3;
    /// let a = LoadTrace::new(Array3::from_elem((2, 1, 4), 1.0), vec![3])?;
    /// let b = LoadTrace::new(Array3::from_elem((3, 1, 4), 2.0), vec![3])?;
    /// let ab = a.then(&b)?;
    /// assert_eq!(ab.num_batches(), 5);
    /// assert_eq!(ab.counts()[[4, 0, 3]], 2.0);
    /// assert!(
    ///     a.then(&LoadTrace::new(Array3::from_elem((1, 1, 5), 1.0), vec![3])?)
    ///         .is_err()
    /// );
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn then(&self, next: &LoadTrace) -> Result<LoadTrace> {
        if next.layer_ids != self.layer_ids || next.num_experts() != self.num_experts() {
            return Err(Error::Trace(format!(
                "traces to serve one after another need the same MoE layers and experts: {} layers × {} experts, then {} × {}",
                self.num_layers(),
                self.num_experts(),
                next.num_layers(),
                next.num_experts()
            )));
        }
        let counts = ndarray::concatenate(Axis(0), &[self.counts.view(), next.counts.view()])
            .map_err(|e| Error::Trace(format!("joining traces: {e}")))?;
        let same = |a: &Option<String>, b: &Option<String>| (a == b).then(|| a.clone()).flatten();
        Ok(LoadTrace {
            counts: Arc::new(counts),
            layer_ids: self.layer_ids.clone(),
            model_layers: match (self.model_layers, next.model_layers) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
            top_k: (self.top_k == next.top_k).then_some(self.top_k).flatten(),
            model: same(&self.model, &next.model),
            memo: Memo::default(),
        })
    }

    /// Splits off the last `eval_fraction` of the batches for held-out
    /// evaluation: plan on the first part, evaluate on the rest, as the CRAFT
    /// paper keeps its profiling sequences out of its evaluation. Both parts
    /// get at least one batch.
    ///
    /// ```
    /// use moeplan::LoadTrace;
    /// use ndarray::Array3;
    /// let t = LoadTrace::new(Array3::from_elem((10, 1, 4), 1.0), vec![0])?;
    /// let split = t.holdout_split(0.2)?;
    /// assert_eq!((split.plan.num_batches(), split.eval.num_batches()), (8, 2));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn holdout_split(&self, eval_fraction: f64) -> Result<HoldoutSplit> {
        let b = self.num_batches();
        if !(eval_fraction > 0.0 && eval_fraction < 1.0) {
            return Err(Error::Argument(format!(
                "held-out fraction must be strictly between 0 and 1, got {eval_fraction}"
            )));
        }
        if b < 2 {
            return Err(Error::Argument(
                "held-out evaluation needs a trace with at least 2 batches".into(),
            ));
        }
        let eval = ((b as f64 * eval_fraction).round() as usize).clamp(1, b - 1);
        let cut = b - eval;
        Ok(HoldoutSplit {
            plan: self.slice_batches(0..cut)?,
            eval: self.slice_batches(cut..b)?,
        })
    }

    /// Shape, totals and per-layer skew.
    ///
    /// ```
    /// use moeplan::LoadTrace;
    /// use ndarray::Array3;
    /// let mut c = Array3::from_elem((1, 1, 4), 1.0);
    /// c[[0, 0, 2]] = 5.0;
    /// let s = LoadTrace::new(c, vec![0])?.stats();
    /// assert_eq!(s.layers[0].hottest[0].0, 2);
    /// assert!((s.layers[0].max_over_mean - 2.5).abs() < 1e-12);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn stats(&self) -> TraceStats {
        let summed = self.summed();
        let e = self.num_experts() as f64;
        let layers = summed
            .outer_iter()
            .zip(&self.layer_ids)
            .enumerate()
            .map(|(li, (row, &id))| {
                let total: f64 = row.sum();
                let mut order: Vec<usize> = (0..row.len()).collect();
                crate::sort::sort_by(&mut order, |&a, &b| {
                    row[b].total_cmp(&row[a]).then(a.cmp(&b))
                });
                let share = |x: f64| if total > 0.0 { x / total } else { 0.0 };
                let max = row[order[0]];
                let per_batch: f64 = self
                    .counts
                    .index_axis(Axis(1), li)
                    .outer_iter()
                    .map(|r| max_over_mean(r.iter().copied(), e))
                    .sum::<f64>()
                    / self.num_batches() as f64;
                LayerStats {
                    layer: id,
                    total,
                    max_over_mean: if total > 0.0 { max * e / total } else { 0.0 },
                    batch_max_over_mean: per_batch,
                    top2_share: order.iter().take(2).map(|&i| share(row[i])).sum(),
                    hottest: order
                        .iter()
                        .take(3)
                        .map(|&i| (i as u32, share(row[i])))
                        .collect(),
                }
            })
            .collect();
        TraceStats {
            model: self.model.clone(),
            batches: self.num_batches(),
            layers_total: self.model_layers(),
            experts: self.num_experts(),
            top_k: self.top_k,
            total_tokens: self.counts.sum(),
            layers,
        }
    }
}

/// `first..last` (or the one id) for messages.
fn id_range(ids: &[u32]) -> String {
    match ids {
        [] => "none".into(),
        [one] => one.to_string(),
        [first, .., last] => format!("{first}..{last}"),
    }
}

fn max_over_mean(values: impl Iterator<Item = f64>, n: f64) -> f64 {
    let (max, sum) = values.fold((0.0f64, 0.0f64), |(m, s), v| (m.max(v), s + v));
    if sum > 0.0 { max * n / sum } else { 0.0 }
}

/// A trace cut in two for held-out evaluation.
#[derive(Debug, Clone)]
pub struct HoldoutSplit {
    /// The first batches: what a planner may see.
    pub plan: LoadTrace,
    /// The remaining batches: what the plan is judged on.
    pub eval: LoadTrace,
}

/// Summary of a trace, as `moeplan inspect` prints it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct TraceStats {
    /// Model name, when known.
    pub model: Option<String>,
    /// Batches `B`.
    pub batches: usize,
    /// Layers of the model in all (dense ones included).
    pub layers_total: usize,
    /// Experts per MoE layer `E`.
    pub experts: usize,
    /// Routing top-k, when known.
    pub top_k: Option<usize>,
    /// Sum of all counts (token × expert assignments).
    pub total_tokens: f64,
    /// One entry per MoE layer.
    pub layers: Vec<LayerStats>,
}

/// Skew of one MoE layer.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct LayerStats {
    /// The model's layer id.
    pub layer: u32,
    /// Assignments in this layer over all batches.
    pub total: f64,
    /// Hottest expert's load over the mean expert load, all batches summed.
    pub max_over_mean: f64,
    /// The same ratio per batch, averaged over batches.
    pub batch_max_over_mean: f64,
    /// Share of the layer's load taken by its two hottest experts.
    pub top2_share: f64,
    /// The three hottest experts with their share of the load.
    pub hottest: Vec<(u32, f64)>,
}

/// Per-token routing: for every MoE layer, the `top_k` experts each token
/// was sent to, and the rank (data-parallel source) each token came from.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenTrace {
    num_experts: usize,
    layer_ids: Vec<u32>,
    /// `routes[l]` is `tokens × top_k`. Shared by clones (60 MB on the
    /// page's route default; a cluster change clones the workload).
    routes: Arc<[Array2<u32>]>,
    source_rank: Vec<u32>,
}

impl TokenTrace {
    /// Builds a token trace; every layer must route the same tokens with the
    /// same `top_k`, and every expert id must be below `num_experts`.
    ///
    /// ```
    /// use moeplan::TokenTrace;
    /// use ndarray::array;
    /// let t = TokenTrace::new(4, vec![1], vec![array![[0, 1], [1, 2], [1, 3]]], vec![0, 0, 1])?;
    /// let load = t.to_load_trace(2)?;
    /// assert_eq!(load.num_batches(), 2);
    /// assert_eq!(load.counts()[[0, 0, 1]], 2.0);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(
        num_experts: usize,
        layer_ids: Vec<u32>,
        routes: Vec<Array2<u32>>,
        source_rank: Vec<u32>,
    ) -> Result<Self> {
        if routes.is_empty() || routes.len() != layer_ids.len() {
            return Err(Error::Trace(format!(
                "{} routing layers for {} layer ids",
                routes.len(),
                layer_ids.len()
            )));
        }
        if num_experts == 0 || num_experts > MAX_EXPERTS {
            return Err(Error::Trace(format!(
                "{num_experts} experts is out of range"
            )));
        }
        let shape = routes[0].dim();
        if shape.0 == 0 || shape.1 == 0 {
            return Err(Error::Trace("no tokens or top-k of zero".into()));
        }
        if let Some(i) = routes.iter().position(|r| r.dim() != shape) {
            return Err(Error::Trace(format!(
                "layer {} routes {:?} tokens × top-k, layer {} routes {:?}",
                layer_ids[i],
                routes[i].dim(),
                layer_ids[0],
                shape
            )));
        }
        if source_rank.len() != shape.0 {
            return Err(Error::Trace(format!(
                "{} source ranks for {} tokens",
                source_rank.len(),
                shape.0
            )));
        }
        for (r, &id) in routes.iter().zip(&layer_ids) {
            if let Some(bad) = r.iter().find(|&&x| x as usize >= num_experts) {
                return Err(Error::Trace(format!(
                    "layer {id} routes to expert {bad}, but there are {num_experts} experts"
                )));
            }
        }
        if layer_ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::Trace("layer ids must be strictly increasing".into()));
        }
        Ok(TokenTrace {
            num_experts,
            layer_ids,
            routes: routes.into(),
            source_rank,
        })
    }

    /// Routed experts per layer.
    pub fn num_experts(&self) -> usize {
        self.num_experts
    }

    /// MoE layers.
    pub fn num_layers(&self) -> usize {
        self.layer_ids.len()
    }

    /// The model's id of each MoE layer.
    ///
    /// ```
    /// use moeplan::TokenTrace;
    /// use ndarray::array;
    /// let t = TokenTrace::new(4, vec![3, 5], vec![array![[0, 1]], array![[2, 3]]], vec![0])?;
    /// assert_eq!((t.layer_ids(), t.num_layers(), t.num_experts()), (&[3, 5][..], 2, 4));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn layer_ids(&self) -> &[u32] {
        &self.layer_ids
    }

    /// Tokens in the trace.
    pub fn num_tokens(&self) -> usize {
        self.source_rank.len()
    }

    /// Experts each token picks per layer.
    pub fn top_k(&self) -> usize {
        self.routes[0].dim().1
    }

    /// Routing of layer index `l`, `tokens × top_k`.
    pub fn routes(&self, l: usize) -> ArrayView2<'_, u32> {
        self.routes[l].view()
    }

    /// Source rank of each token.
    pub fn source_rank(&self) -> &[u32] {
        &self.source_rank
    }

    /// Deals whole sequences to `ranks` data-parallel ranks round-robin:
    /// sequence `i` (the token's recorded source, e.g. an ESFT line) goes to
    /// rank `i mod ranks`. A serving engine's scheduler places whole requests
    /// on one rank, and with no record of which, round-robin is the stated,
    /// reproducible rule; it keeps a long sequence's tokens together, which
    /// is what gives SGLang's per-rank dispatch its uneven splits.
    ///
    /// ```
    /// use moeplan::TokenTrace;
    /// use ndarray::array;
    /// let t = TokenTrace::new(4, vec![1], vec![array![[0], [1], [2], [3]]], vec![0, 0, 1, 5])?;
    /// assert_eq!(t.with_sequences_on_ranks(4)?.source_rank(), &[0, 0, 1, 1]);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn with_sequences_on_ranks(mut self, ranks: usize) -> Result<Self> {
        if ranks == 0 || ranks > u32::MAX as usize {
            return Err(Error::Argument(format!("{ranks} ranks: need at least one")));
        }
        for r in &mut self.source_rank {
            *r %= ranks as u32;
        }
        Ok(self)
    }

    /// Deals each batch's tokens to `ranks` data-parallel ranks in equal
    /// shares: the tokens of a batch of `batch_tokens` (in file order; the
    /// last batch may be shorter) are cut into `ranks` contiguous slices,
    /// slice `r` on rank `r`, so every rank holds within one token of the
    /// batch's mean. This is what a scheduler that balances tokens over
    /// data-parallel ranks gives (SGLang's DP attention with chunked
    /// prefill fills each rank to its token budget): a sequence may span two
    /// ranks, and one rank's tokens come from one or a few consecutive
    /// sequences. [`TokenTrace::with_sequences_on_ranks`] is the other
    /// rule, whole sequences round-robin.
    ///
    /// ```
    /// use moeplan::TokenTrace;
    /// use ndarray::array;
    /// // 5 tokens of sequences 0, 0, 0, 0, 1 in batches of 4 on 2 ranks
    /// let t = TokenTrace::new(4, vec![1], vec![array![[0], [1], [2], [3], [0]]], vec![0, 0, 0, 0, 1])?;
    /// assert_eq!(t.with_tokens_dealt_evenly(2, 4)?.source_rank(), &[0, 0, 1, 1, 0]);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn with_tokens_dealt_evenly(mut self, ranks: usize, batch_tokens: usize) -> Result<Self> {
        if ranks == 0 || ranks > u32::MAX as usize {
            return Err(Error::Argument(format!("{ranks} ranks: need at least one")));
        }
        if batch_tokens == 0 {
            return Err(Error::Argument(
                "batch size must be at least one token".into(),
            ));
        }
        for chunk in self.source_rank.chunks_mut(batch_tokens) {
            let len = chunk.len();
            for (i, r) in chunk.iter_mut().enumerate() {
                // floor(i · ranks / len): slices differ by at most one token.
                *r = ((i as u128 * ranks as u128) / len as u128) as u32;
            }
        }
        Ok(self)
    }

    /// Deals tokens to `ranks` ranks by `deal` (batches of
    /// `batch_tokens`): [`Deal::Even`] is
    /// [`TokenTrace::with_tokens_dealt_evenly`], [`Deal::Sequences`]
    /// [`TokenTrace::with_sequences_on_ranks`].
    pub fn dealt(self, deal: Deal, ranks: usize, batch_tokens: usize) -> Result<Self> {
        match deal {
            Deal::Even => self.with_tokens_dealt_evenly(ranks, batch_tokens),
            Deal::Sequences => self.with_sequences_on_ranks(ranks),
        }
    }

    /// Groups consecutive tokens into batches of `batch_tokens` (the last
    /// batch may be shorter) and counts expert assignments.
    pub fn to_load_trace(&self, batch_tokens: usize) -> Result<LoadTrace> {
        self.to_load_trace_within(
            batch_tokens,
            &mut crate::Meter::new(crate::ReadLimits::default()),
        )
    }

    /// [`TokenTrace::to_load_trace`], charging the `batches × layers ×
    /// experts` counts to `meter` first (small batches of a long trace make
    /// a large array).
    pub(crate) fn to_load_trace_within(
        &self,
        batch_tokens: usize,
        meter: &mut crate::Meter,
    ) -> Result<LoadTrace> {
        if batch_tokens == 0 {
            return Err(Error::Argument(
                "batch size must be at least one token".into(),
            ));
        }
        let t = self.num_tokens();
        let batches = t.div_ceil(batch_tokens);
        meter.values(
            (batches as u64)
                .saturating_mul(self.layer_ids.len() as u64)
                .saturating_mul(self.num_experts as u64),
            8,
            "the batches × layers × experts counts",
        )?;
        let mut counts = Array3::zeros((batches, self.layer_ids.len(), self.num_experts));
        for (l, r) in self.routes.iter().enumerate() {
            for (tok, row) in r.outer_iter().enumerate() {
                for &e in row {
                    counts[[tok / batch_tokens, l, e as usize]] += 1.0;
                }
            }
        }
        Ok(LoadTrace::new(counts, self.layer_ids.clone())?.with_top_k(self.top_k()))
    }
}

/// How a trace without recorded ranks (an ESFT folder: one line per
/// sequence) gives its tokens to data-parallel ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Deal {
    /// Each batch's tokens in equal contiguous shares, one per rank
    /// ([`TokenTrace::with_tokens_dealt_evenly`]): what a scheduler that
    /// balances tokens over ranks gives. The default.
    #[default]
    Even,
    /// Whole sequences round-robin, sequence `i` on rank `i mod ranks`
    /// ([`TokenTrace::with_sequences_on_ranks`]): a rank holding a long
    /// sequence holds several times the mean.
    Sequences,
}

impl Deal {
    /// Both rules, the default first.
    pub const ALL: [Deal; 2] = [Deal::Even, Deal::Sequences];

    /// Its name in flags and reports: `even`, `sequences`.
    ///
    /// ```
    /// use moeplan::Deal;
    /// assert_eq!(Deal::default().name(), "even");
    /// assert_eq!(Deal::from_name("sequences")?, Deal::Sequences);
    /// assert!(Deal::from_name("random").is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Deal::Even => "even",
            Deal::Sequences => "sequences",
        }
    }

    /// The rule named `name`.
    pub fn from_name(name: &str) -> Result<Deal> {
        Deal::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| {
                Error::Argument(format!(
                    "unknown dealing {name:?}: even (each rank an equal share of every batch) or sequences (whole sequences round-robin)"
                ))
            })
    }

    /// One phrase for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Deal::Even => "each batch's tokens dealt to ranks in equal contiguous shares",
            Deal::Sequences => "whole sequences dealt to ranks round-robin",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Meter, ReadLimits};
    use ndarray::array;

    /// The counts array is charged to the meter before it is built.
    #[test]
    fn to_load_trace_within_charges_the_counts_first() {
        let t =
            TokenTrace::new(4096, vec![1], vec![array![[0], [1], [1], [1]]], vec![0; 4]).unwrap();
        let mut tiny = Meter::new(ReadLimits {
            max_bytes: 64,
            ..ReadLimits::default()
        });
        assert!(t.to_load_trace_within(1, &mut tiny).is_err()); // 4 × 1 × 4096 counts
    }
}
