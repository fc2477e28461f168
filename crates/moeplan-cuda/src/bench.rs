//! `bench`: plans made by the core, run layer by layer on one GPU that
//! emulates every expert-parallel rank, and the predicted balancedness set
//! beside the measured one.
//!
//! For each chosen layer one routing is drawn (the same tokens for every
//! plan), then for each plan: replica selection and dispatch on the GPU
//! (checked against the CPU reference's offsets), then each simulated
//! rank's expert compute alone — its copies' rows through gate/up, SiLU·up,
//! down — timed with CUDA events, `warmup` untimed rounds then the median
//! of `repeats`. The layer's time is its slowest rank's. Each timed region
//! is queued behind a 1 ms spin kernel, so the events measure the kernels
//! back to back (as under a CUDA graph) rather than host launch gaps;
//! `launch_gaps` times without the spin.
//!
//! Three predictions sit beside the measurement: the core's [`evaluate`]
//! (even split over copies, mean over the trace's batches), the even split
//! of this batch's routed counts, and the integer rows each rank really
//! received under the dispatch rule. Measured balancedness is mean / max
//! of the per-rank times.

use moeplan::planners::{Craft, CraftOptions};
use moeplan::planners::{EplbConfig, ReplicaBudget, base, contiguous, eplb};
use moeplan::{LoadTrace, Plan, Topology, evaluate};

use crate::dispatch::{DispatchIndex, dispatch_cpu};
use crate::error::{Error, Result};
use crate::expert::ExpertShape;
use crate::gpu::{Gpu, LayerBuffers};
use crate::routing::{self, Routing};
use crate::select::{self, LayerSlots, Selector, plan_loads, select_cpu};
use moeplan::judge::Rule;
use moeplan::judge::cost::{Assumptions, TimeCost, copy_us};

/// A planner as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanAlgo {
    /// Experts in id order, no replicas.
    Contiguous,
    /// EPLB's placement, no replicas.
    Base,
    /// EPLB with this many redundant slots per layer (default: one per GPU).
    Eplb(Option<usize>),
    /// CRAFT with this budget.
    Craft(ReplicaBudget),
}

impl std::str::FromStr for PlanAlgo {
    type Err = Error;
    /// `contiguous`, `base`, `eplb`, `eplb:K`, `craft:R`, `craft:auto`.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::Argument(format!(
                "unknown plan {s:?}; use contiguous, base, eplb, eplb:K, craft:R or craft:auto"
            ))
        };
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        match (name, arg) {
            ("contiguous", None) => Ok(PlanAlgo::Contiguous),
            ("base", None) => Ok(PlanAlgo::Base),
            ("eplb", None) => Ok(PlanAlgo::Eplb(None)),
            ("eplb", Some(k)) => Ok(PlanAlgo::Eplb(Some(k.parse().map_err(|_| bad())?))),
            ("craft", Some("auto")) => Ok(PlanAlgo::Craft(ReplicaBudget::Auto)),
            ("craft", Some(r)) => Ok(PlanAlgo::Craft(ReplicaBudget::ReplicasPerGpu(
                r.parse().map_err(|_| bad())?,
            ))),
            _ => Err(bad()),
        }
    }
}

/// Makes every requested plan for `trace` on `topology` (EPLB uses
/// `groups` router groups), labelled.
///
/// ```
/// use moeplan::{synth::generator, data::model, Topology};
/// use moeplan_cuda::bench::{make_plans, PlanAlgo};
/// let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
/// let algos: Vec<PlanAlgo> = ["contiguous", "eplb", "craft:2"].iter().map(|s| s.parse()).collect::<Result<_, _>>()?;
/// let plans = make_plans(&trace, Topology::new(1, 8)?, &algos, 1)?;
/// assert_eq!(plans[1].0, "eplb:8");
/// # Ok::<(), moeplan_cuda::Error>(())
/// ```
pub fn make_plans(
    trace: &LoadTrace,
    topology: Topology,
    algos: &[PlanAlgo],
    groups: usize,
) -> Result<Vec<(String, Plan)>> {
    let mut craft: Option<Craft> = None;
    let mut out = Vec::with_capacity(algos.len());
    for &a in algos {
        let labelled = match a {
            PlanAlgo::Contiguous => ("contiguous".to_string(), contiguous(trace, topology)?),
            PlanAlgo::Base => ("base".to_string(), base(trace, topology, groups)?),
            PlanAlgo::Eplb(k) => {
                let k = k.unwrap_or(topology.num_gpus());
                let cfg = EplbConfig {
                    redundant_experts: k,
                    groups,
                };
                (format!("eplb:{k}"), eplb(trace, topology, cfg)?)
            }
            PlanAlgo::Craft(budget) => {
                if craft.is_none() {
                    craft = Some(Craft::prepare(trace, topology, &CraftOptions::default())?);
                }
                let Some(c) = craft.as_ref() else {
                    return Err(Error::Argument("CRAFT could not be prepared".into()));
                };
                let p = c.plan(budget)?;
                (format!("craft:{}", p.replicas_per_gpu), p.plan)
            }
        };
        out.push(labelled);
    }
    Ok(out)
}

/// Mean / max of non-negative values (1 when all are zero).
pub fn balancedness(v: &[f64]) -> f64 {
    let max = v.iter().copied().fold(0.0, f64::max);
    if max <= 0.0 {
        1.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64 / max
    }
}

/// Per-GPU load of one batch's expert counts split evenly over copies.
pub fn even_split_loads(slots: &LayerSlots, counts: &[u64]) -> Vec<f64> {
    (0..slots.num_gpus())
        .map(|g| {
            slots
                .gpu_slots(g)
                .map(|s| {
                    let e = slots.slot_expert[s] as usize;
                    counts[e] as f64 / slots.copies(e).len() as f64
                })
                .sum()
        })
        .collect()
}

/// The median of `v` (mean of the middle two for even lengths).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// What one bench run is.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Tokens per layer batch.
    pub tokens: usize,
    /// Experts per token.
    pub top_k: usize,
    /// Dispatch rule.
    pub rule: Rule,
    /// Expert sizes.
    pub shape: ExpertShape,
    /// Layer indices (into the trace) to run.
    pub layers: Vec<usize>,
    /// Timed repetitions per rank (the median is reported).
    pub repeats: usize,
    /// Untimed rounds first.
    pub warmup: usize,
    /// The trace batch tokens are drawn from (`None`: all batches summed).
    pub source_batch: Option<usize>,
    /// Routing seed (replica selection is seedless: SGLang's map uses its
    /// own fixed seed, as the core's port does).
    pub seed: u64,
    /// Distinct expert weight sets on the device.
    pub pool: usize,
    /// Time with host launch gaps included (no spin before each timed
    /// region): what an engine launching every kernel from the host sees.
    pub launch_gaps: bool,
}

/// What the planner's model says of one (layer, plan) before anything
/// runs: three predictions, the rows the dispatch rule gives each rank, and
/// the host's cost of selecting them. Needs no device.
#[derive(Debug, Clone)]
pub struct Prediction {
    /// Model layer id.
    pub layer: u32,
    /// Plan label.
    pub plan: String,
    /// The core's even-split balancedness of this layer (mean over batches).
    pub predicted_trace: f64,
    /// Even split of this batch's routed counts.
    pub predicted_batch: f64,
    /// Mean / max of the rows each rank received.
    pub predicted_dispatch: f64,
    /// Rows per rank.
    pub rows_per_rank: Vec<u32>,
    /// Slots (hosted copies) per rank in this layer: each costs a weight
    /// read when it receives rows.
    pub slots_per_rank: Vec<u32>,
    /// Whether the selection is made on the host (GRACE's, Libra's).
    pub select_on_host: bool,
    /// The CPU's selection of the batch's rows ([`select_cpu`], one
    /// thread), ms: the host-side cost of GRACE's and Libra's rules.
    pub host_select_ms: f64,
    /// The core's cost model on [`PREDICTED_ON`]: each rank's expert time
    /// from its copies' rows (weight read and GEMMs per copy, BF16 as the
    /// crate runs them), ms — what the measured rank times are held to.
    pub predicted_rank_ms: Vec<f64>,
}

/// The hardware preset the bench's time prediction uses: the GPU this
/// crate was measured on (docs/cuda.md).
pub const PREDICTED_ON: &str = "h100-ib-ndr";

impl Prediction {
    /// The predicted layer time: the slowest rank's, ms.
    pub fn predicted_layer_ms(&self) -> f64 {
        self.predicted_rank_ms.iter().copied().fold(0.0, f64::max)
    }
}

impl Prediction {
    /// As JSON fields.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "layer": self.layer,
            "plan": self.plan,
            "predicted_trace_even_split": self.predicted_trace,
            "predicted_batch_even_split": self.predicted_batch,
            "predicted_integer_dispatch": self.predicted_dispatch,
            "rows_per_rank": self.rows_per_rank,
            "slots_per_rank": self.slots_per_rank,
            "select_on_host": self.select_on_host,
            "host_select_ms": self.host_select_ms,
            "predicted_on": PREDICTED_ON,
            "predicted_rank_ms": self.predicted_rank_ms,
            "predicted_layer_ms": self.predicted_layer_ms(),
        })
    }

    /// The human-readable lines (plan, predictions, rows and slots).
    pub fn to_text(&self) -> String {
        let rows: Vec<f64> = self.rows_per_rank.iter().map(|&r| r as f64).collect();
        let (rmin, rmax) = rows
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        format!(
            "  {}\n    predicted balancedness: trace even-split {:.4} · this batch even-split {:.4} · integer dispatch {:.4} (max/mean {:.3})\n    rows per rank: min {} · mean {:.1} · max {} · slots per rank: min {} · max {}\n    predicted layer time on {PREDICTED_ON}: {:.4} ms (the cost model, docs/cost.md)",
            self.plan,
            self.predicted_trace,
            self.predicted_batch,
            self.predicted_dispatch,
            if self.predicted_dispatch > 0.0 {
                1.0 / self.predicted_dispatch
            } else {
                f64::INFINITY
            },
            rmin,
            rows.iter().sum::<f64>() / rows.len().max(1) as f64,
            rmax,
            self.slots_per_rank.iter().min().copied().unwrap_or(0),
            self.slots_per_rank.iter().max().copied().unwrap_or(0),
            self.predicted_layer_ms()
        )
    }
}

/// One (layer, plan) measurement.
#[derive(Debug, Clone)]
pub struct LayerResult {
    /// What the planner predicted.
    pub prediction: Prediction,
    /// Median expert time per rank, ms.
    pub rank_ms: Vec<f64>,
    /// Mean / max of `rank_ms`.
    pub measured: f64,
    /// The slowest rank's time, ms: the layer's time.
    pub layer_ms: f64,
    /// Which rank was slowest.
    pub slowest: usize,
    /// Replica selection on the device, ms: the selection kernel, or for
    /// a host-made selection ([`Selector::on_host`]) the copy into place.
    pub select_ms: f64,
    /// Dispatch index (counts, scan, stable scatter), ms.
    pub index_ms: f64,
    /// Row gather, ms.
    pub gather_ms: f64,
    /// Combine, ms.
    pub combine_ms: f64,
}

impl LayerResult {
    /// Max / mean of the per-rank times.
    pub fn measured_imbalance(&self) -> f64 {
        if self.measured > 0.0 {
            1.0 / self.measured
        } else {
            f64::INFINITY
        }
    }

    /// As a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        let mut j = self.prediction.to_json();
        let more = serde_json::json!({
            "rank_ms": self.rank_ms,
            "measured_balancedness": self.measured,
            "measured_max_over_mean": self.measured_imbalance(),
            "layer_ms": self.layer_ms,
            "slowest_rank": self.slowest,
            "select_ms": self.select_ms,
            "dispatch_index_ms": self.index_ms,
            "gather_ms": self.gather_ms,
            "combine_ms": self.combine_ms,
        });
        if let (Some(o), serde_json::Value::Object(m)) = (j.as_object_mut(), more) {
            o.extend(m);
        }
        j
    }

    /// The human-readable block.
    pub fn to_text(&self) -> String {
        let p = &self.prediction;
        let mut s = p.to_text();
        s.push_str("\n    rank time, ms:");
        for (g, ms) in self.rank_ms.iter().enumerate() {
            if g % 8 == 0 {
                s.push_str(&format!("\n      {g:>3}:"));
            }
            s.push_str(&format!(" {ms:8.4}"));
        }
        s.push_str(&format!(
            "\n    measured balancedness (mean/max time) {:.4} · max/mean {:.3} · layer time {:.4} ms (slowest rank {})\n    select {:.4} ms{} · dispatch index {:.4} ms · gather {:.4} ms · combine {:.4} ms",
            self.measured,
            self.measured_imbalance(),
            self.layer_ms,
            self.slowest,
            self.select_ms,
            if p.select_on_host {
                format!(
                    " (made on the host in {:.3} ms, copied into place)",
                    p.host_select_ms
                )
            } else {
                String::new()
            },
            self.index_ms,
            self.gather_ms,
            self.combine_ms
        ));
        s
    }
}

/// The routing of layer index `layer` for a bench (the same for every plan).
pub fn layer_routing(trace: &LoadTrace, cfg: &BenchConfig, layer: usize) -> Result<Routing> {
    let load = routing::layer_load(trace, layer, cfg.source_batch)?;
    let id = trace.layer_ids()[layer] as u64;
    routing::generate(
        &load,
        cfg.tokens,
        cfg.top_k,
        cfg.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15),
    )
}

/// Everything a bench of `plans` needs before the device: each plan's
/// [`evaluate`] report and one [`Selector`] per (plan, layer).
struct Prepared {
    reports: Vec<moeplan::EvalReport>,
    selectors: Vec<Vec<Selector>>,
}

fn prepare(trace: &LoadTrace, plans: &[(String, Plan)], cfg: &BenchConfig) -> Result<Prepared> {
    let reports = plans
        .iter()
        .map(|(_, p)| evaluate(trace, p))
        .collect::<moeplan::Result<Vec<_>>>()?;
    // One selection per (plan, layer): SGLang's tables come from the
    // core's port of its map, walked over the whole plan once; GRACE's
    // fractions from the trace's loads, as the simulator takes them.
    let selectors = plans
        .iter()
        .map(|(_, p)| {
            let loads = if select::needs_loads(cfg.rule) {
                plan_loads(p, trace)
            } else {
                Vec::new()
            };
            Selector::for_plan(cfg.rule, p, &loads)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Prepared { reports, selectors })
}

/// The prediction of layer index `li` of plan `pi`, the rows' slots and
/// their dispatch index (the reference the GPU's dispatch must equal).
#[allow(clippy::too_many_arguments)]
fn predict_one(
    trace: &LoadTrace,
    plans: &[(String, Plan)],
    prep: &Prepared,
    pi: usize,
    li: usize,
    routing: &Routing,
    counts: &[u64],
    shape: ExpertShape,
) -> Result<(Prediction, Vec<u32>, DispatchIndex)> {
    let (label, plan) = &plans[pi];
    let selector = prep.selectors[pi].get(li).ok_or_else(|| {
        Error::Argument(format!(
            "layer index {li} is outside plan {label}'s {} layers",
            prep.selectors[pi].len()
        ))
    })?;
    let predicted_trace = *prep.reports[pi]
        .per_layer
        .get(li)
        .ok_or_else(|| Error::Argument(format!("layer index {li} is outside plan {label}")))?;
    let slots = LayerSlots::from_plan(plan, li)?;
    let started = std::time::Instant::now();
    let selected = select_cpu(routing, &slots, selector)?;
    let host_select_ms = started.elapsed().as_secs_f64() * 1e3;
    let index = dispatch_cpu(&selected, slots.num_slots())?;
    let rows = index.rows_per_gpu(&slots);
    let rows_f: Vec<f64> = rows.iter().map(|&x| x as f64).collect();
    let time = time_cost(shape)?;
    let predicted_rank_ms = (0..slots.num_gpus())
        .map(|g| {
            slots
                .gpu_slots(g)
                .map(|s| copy_us(&time, f64::from(index.counts[s])))
                .sum::<f64>()
                / 1e3
        })
        .collect();
    let prediction = Prediction {
        layer: trace.layer_ids()[li],
        plan: label.clone(),
        predicted_trace,
        predicted_batch: balancedness(&even_split_loads(&slots, counts)),
        predicted_dispatch: balancedness(&rows_f),
        rows_per_rank: rows,
        slots_per_rank: (0..slots.num_gpus())
            .map(|g| slots.gpu_slots(g).len() as u32)
            .collect(),
        select_on_host: selector.on_host(),
        host_select_ms,
        predicted_rank_ms,
    };
    Ok((prediction, selected, index))
}

/// The cost model's constants for BF16 experts of `shape` on
/// [`PREDICTED_ON`].
pub(crate) fn time_cost(shape: ExpertShape) -> Result<TimeCost> {
    let h = moeplan::data::hardware::preset(PREDICTED_ON)?;
    let mut m = *moeplan::data::model::preset("deepseek-v3")?;
    m.hidden = shape.hidden;
    m.moe_intermediate = shape.inter;
    m.bytes_per_weight = 2;
    Ok(TimeCost::new(h, &m, &Assumptions::default()))
}

/// The planner's side of a bench without a device: for every (layer,
/// plan), the same routing, selection and predictions [`run`] sets beside
/// its measurements. `on_result` sees each as it is made.
///
/// ```
/// use moeplan::{synth::generator, data::model, Topology};
/// use moeplan_cuda::bench::{make_plans, predict, BenchConfig, PlanAlgo};
/// use moeplan_cuda::expert::ExpertShape;
/// let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
/// let algos: Vec<PlanAlgo> = ["contiguous", "eplb:8"].iter().map(|s| s.parse()).collect::<Result<_, _>>()?;
/// let plans = make_plans(&trace, Topology::new(1, 8)?, &algos, 1)?;
/// let cfg = BenchConfig {
///     tokens: 4096, top_k: 8, rule: moeplan_cuda::select::parse_rule("libra")?, shape: ExpertShape::new(64, 32)?,
///     layers: vec![0, 1], repeats: 1, warmup: 0, source_batch: None, seed: 1, pool: 1,
///     launch_gaps: false,
/// };
/// let p = predict(&trace, &plans, &cfg, &mut |_| {})?;
/// assert_eq!(p.len(), 4);
/// assert_eq!(p[1].rows_per_rank.iter().sum::<u32>(), 4096 * 8);
/// assert!(p[1].predicted_dispatch > p[0].predicted_dispatch); // replicas + Libra help
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn predict(
    trace: &LoadTrace,
    plans: &[(String, Plan)],
    cfg: &BenchConfig,
    on_result: &mut dyn FnMut(&Prediction),
) -> Result<Vec<Prediction>> {
    let prep = prepare(trace, plans, cfg)?;
    let mut out = Vec::new();
    for &li in &cfg.layers {
        let routing = layer_routing(trace, cfg, li)?;
        let counts = routing.expert_counts(trace.num_experts());
        for pi in 0..plans.len() {
            let (p, _, _) = predict_one(trace, plans, &prep, pi, li, &routing, &counts, cfg.shape)?;
            on_result(&p);
            out.push(p);
        }
    }
    Ok(out)
}

/// Runs every (layer, plan); `on_result` sees each result as it is measured.
pub fn run(
    gpu: &Gpu,
    trace: &LoadTrace,
    plans: &[(String, Plan)],
    cfg: &BenchConfig,
    on_result: &mut dyn FnMut(&LayerResult),
) -> Result<Vec<LayerResult>> {
    if cfg.repeats == 0 {
        return Err(Error::Argument(
            "at least one timed repeat is needed".into(),
        ));
    }
    let prep = prepare(trace, plans, cfg)?;
    let max_slots = plans
        .iter()
        .flat_map(|(_, p)| cfg.layers.iter().filter_map(|&l| p.layers().get(l)))
        .map(|l| l.total_slots())
        .max()
        .unwrap_or(1);
    let mut buf = gpu.buffers(cfg.tokens, cfg.top_k, cfg.shape, max_slots)?;
    gpu.fill_tokens(&mut buf)?;
    let weights = gpu.weights(cfg.shape, cfg.pool)?;
    let mut results = Vec::new();
    for &li in &cfg.layers {
        let routing = layer_routing(trace, cfg, li)?;
        gpu.upload_routing(&mut buf, &routing)?;
        let counts = routing.expert_counts(trace.num_experts());
        for (pi, (_, plan)) in plans.iter().enumerate() {
            let (prediction, selected, reference) =
                predict_one(trace, plans, &prep, pi, li, &routing, &counts, cfg.shape)?;
            let selector = &prep.selectors[pi][li];
            let picked = Picked {
                selector,
                rows: &selected,
                reference: &reference,
            };
            let r = run_one(gpu, &mut buf, &weights, plan, li, &picked, cfg)?;
            let (slowest, layer_ms) = r
                .rank_ms
                .iter()
                .copied()
                .enumerate()
                .fold((0, 0.0f64), |a, (g, t)| if t > a.1 { (g, t) } else { a });
            let res = LayerResult {
                prediction,
                measured: balancedness(&r.rank_ms),
                rank_ms: r.rank_ms,
                layer_ms,
                slowest,
                select_ms: r.select_ms,
                index_ms: r.index_ms,
                gather_ms: r.gather_ms,
                combine_ms: r.combine_ms,
            };
            on_result(&res);
            results.push(res);
        }
    }
    Ok(results)
}

/// A layer's selection as the CPU made it: what the GPU run uploads (for
/// host rules) and must reproduce.
struct Picked<'a> {
    selector: &'a Selector,
    rows: &'a [u32],
    reference: &'a DispatchIndex,
}

struct OneRun {
    rank_ms: Vec<f64>,
    select_ms: f64,
    index_ms: f64,
    gather_ms: f64,
    combine_ms: f64,
}

fn run_one(
    gpu: &Gpu,
    buf: &mut LayerBuffers,
    weights: &crate::gpu::DeviceWeights,
    plan: &Plan,
    li: usize,
    picked: &Picked<'_>,
    cfg: &BenchConfig,
) -> Result<OneRun> {
    let slots = LayerSlots::from_plan(plan, li)?;
    let tables = if picked.selector.on_host() {
        gpu.host_selection_tables(&slots, picked.rows)?
    } else {
        gpu.selection_tables(&slots, picked.selector)?
    };
    let time = |f: &mut dyn FnMut() -> Result<()>| {
        if cfg.launch_gaps {
            gpu.time(f)
        } else {
            gpu.time_queued(f)
        }
    };
    let select_ms = time(&mut || gpu.select(buf, &tables))?;
    let index_ms = time(&mut || gpu.dispatch_index(buf, tables.num_slots))?;
    let gather_ms = time(&mut || gpu.gather(buf))?;
    let offsets = gpu.read(&buf.offsets, slots.num_slots() + 1)?;
    // The CPU reference must agree before anything is timed on these rows.
    if offsets != picked.reference.offsets {
        return Err(Error::Cuda(format!(
            "the GPU dispatch of layer index {li} disagrees with the CPU reference; run `moeplan-cuda check`"
        )));
    }
    let d = slots.num_gpus();
    for _ in 0..cfg.warmup {
        for g in 0..d {
            gpu.experts_rank(buf, weights, &slots, &offsets, g)?;
        }
    }
    let mut times = vec![Vec::with_capacity(cfg.repeats); d];
    for _ in 0..cfg.repeats {
        for (g, t) in times.iter_mut().enumerate() {
            t.push(time(&mut || {
                gpu.experts_rank(buf, weights, &slots, &offsets, g)
            })?);
        }
    }
    let combine_ms = time(&mut || gpu.combine(buf))?;
    gpu.sync("the layer")?;
    Ok(OneRun {
        rank_ms: times.iter().map(|t| median(t)).collect(),
        select_ms,
        index_ms,
        gather_ms,
        combine_ms,
    })
}
