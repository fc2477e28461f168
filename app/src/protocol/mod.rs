//! Messages between the page (main thread) and the planning worker.
//!
//! Each message is a two-element JS array: a JSON string, and either `null`
//! or numbers. Page → worker, the numbers are the bytes of a trace file (a
//! transferred `Uint8Array`). Worker → page, they are every numeric series
//! of the answer (per-layer balancedness, replicas per layer, the load map,
//! the layer's placement) in one transferred `Float64Array`
//! ([`encode`] / [`decode`]): the JSON carries the structure and the few
//! scalars, readable in the browser's console, and no series is printed to
//! text and parsed back. Measured in Chromium 156 on the default view (a
//! budget change's answer: 4,700 numbers, mostly the load map), encode +
//! structured clone + decode: typed array 0.2 ms, the same as JSON (28 KB)
//! 0.95 ms, serde-wasm-bindgen objects 1.4 ms.
//!
//! A view answer is a diff ([`Update`]): the worker remembers what it last
//! sent and sends only what changed. A budget change alters CRAFT's figures,
//! the load map and the layer's placement, never the trace's frame (layers,
//! BASE, EPLB, the curve), so that is all it carries (CRAFT's traffic is
//! part of CRAFT's figures); a layer change carries only the placement. A
//! dispatch-rule change re-sends every plan's figures (each names its rule)
//! and their traffic. A new trace or cluster carries everything. Answers
//! arrive in the order they were sent (`postMessage`), so the page applies
//! every one in turn.

use moeplan::TraceStats;
use moeplan_view::{Cluster, PlannerNote, ServingAsk, ServingView};
use serde::{Deserialize, Serialize};

/// Where the trace comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// The built-in generator.
    Generate {
        /// Model preset name.
        preset: String,
        /// Batches.
        batches: usize,
        /// Seed.
        seed: u32,
        /// Token by token ([`TOKENS_PER_BATCH`] per batch, each with its
        /// rank and top-k experts), not counts: GRACE then groups by
        /// affinity.
        #[serde(default)]
        routes: bool,
    },
    /// A file from the user's disk; its bytes travel beside the JSON.
    File {
        /// File name, for messages.
        name: String,
    },
}

impl Source {
    /// The generator's trace `settings` name.
    ///
    /// ```
    /// use moeplan_app::{protocol::Source, settings::Settings};
    /// let s = Settings::from_hash("#routes=0");
    /// assert!(matches!(Source::generated(&s), Source::Generate { routes: false, .. }));
    /// ```
    pub fn generated(settings: &crate::settings::Settings) -> Source {
        Source::Generate {
            preset: settings.preset.clone(),
            batches: settings.batches,
            seed: settings.seed,
            routes: settings.routes,
        }
    }
}

/// Tokens in each batch of a generated trace with token routes. At 128 a
/// batch put 16 (token, expert) pairs on each of the default's 64 GPUs and
/// the previous batch predicted the next one no better than chance (Libra
/// 0.36 against the base's 0.55 on 8 × 8); at 512 it comes close (0.430
/// against 0.435: its 8 ranks on 64 GPUs keep pairs local on 8 of them,
/// docs/libra.md) and the default's routes are 61 MB. The per-batch
/// work does not grow with tokens (each source's counts are summed first);
/// generating and GRACE's affinity do (0.6 s natively for 64 batches).
pub const TOKENS_PER_BATCH: usize = 512;

/// What the page asks for. Fields left `None` keep the worker's current
/// value, so a budget change carries only the budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Sequence number, echoed in the answer.
    pub id: u64,
    /// A new trace (re-plans everything).
    pub source: Option<Source>,
    /// A new cluster (re-plans everything).
    pub cluster: Option<Cluster>,
    /// CRAFT's budget: `Some(R)` or `None` for automatic.
    pub replicas_per_gpu: Option<usize>,
    /// Layer index whose placement to show.
    pub layer: usize,
    /// The dispatch rule the plans are measured under (a name of
    /// `moeplan_view::dispatch_rules`: `even`, `vllm`,
    /// `sglang-static`, `local-first`, `grace-weighted`, `grace-topology`,
    /// `optimal`; empty: `even`).
    #[serde(default)]
    pub rule: String,
    /// Export CRAFT's plan in this format (`moeplan` or `sglang`) instead of
    /// answering with a view.
    pub export: Option<String>,
    /// Price every plan on this hardware preset
    /// (`moeplan::data::hardware`'s name); empty: balance only.
    #[serde(default)]
    pub hardware: String,
    /// A hardware file's JSON (the page's loaded file): priced on it, and
    /// `hardware` is its name. `None`: `hardware` names a preset.
    #[serde(default)]
    pub hardware_json: Option<String>,
    /// The model whose sizes the traffic's bytes, the copies and the
    /// prices use (the page's "Expert size of"); empty: the trace's, else
    /// DeepSeek-V3 (`moeplan::judge::ModelChoice`). Another model than the
    /// workspace's plans the cluster again on it.
    #[serde(default)]
    pub model: String,
    /// Options of the per-batch planners (Libra's
    /// `extra_experts_per_gpu`, `predictor`), registry names and values:
    /// when they differ from the last ones asked for, only those planners
    /// are planned again. `None`: as they are.
    #[serde(default)]
    pub per_batch: Option<Vec<(String, String)>>,
    /// Options of the static planners the page sets (GRACE's
    /// `nonuniformity`), registry names and values: when they differ from
    /// the workspace's, only the planners that read them are planned
    /// again; a cluster change keeps them. `None`: as they are.
    #[serde(default)]
    pub static_options: Option<Vec<(String, String)>>,
    /// Also every plan's imbalance per batch (the timeline): the budgeted
    /// plan's takes a replay, so a budget change leaves it out and the page
    /// asks again once the slider rests.
    #[serde(default)]
    pub batches: bool,
    /// Plans across workloads: the matrix of every plan made on each of
    /// several traces judged on every other, at this request's cluster and
    /// budget. Answered with [`Response::Cross`]; the main trace and its
    /// plans are untouched.
    #[serde(default)]
    pub cross: Option<CrossAsk>,
    /// Serving the main trace with EPLB re-planned every K batches on the
    /// last W, at this request's cluster, rule and hardware. Answered with
    /// [`Response::Serving`]; the plans shown are untouched.
    #[serde(default)]
    pub serving: Option<ServingAsk>,
    /// Where the reader worker's script is, for a request that carries
    /// files (an embed served from another folder); empty:
    /// `reader_loader.js` beside the planning worker's own script
    /// ([`crate::reader`]).
    #[serde(default)]
    pub reader: String,
    /// The reader worker's whole script, for a request that carries files
    /// on a page whose `blob:` URLs no worker may start (a `file://` page:
    /// its origin is opaque, so the planning worker makes the reader's
    /// `blob:` URL itself): the one-file page, the `file://` embed.
    #[serde(default)]
    pub reader_script: String,
}

impl Request {
    /// The request the page sends with settings `s`: a new trace (`source`),
    /// a new cluster, an export, or (neither) a change of what `s` holds;
    /// `batches` for the timeline's follow-up. No study, no files: the page
    /// adds those ([`crate::ui`]'s client), and `examples/change_work.rs`
    /// sends these natively to count a change's work.
    ///
    /// ```
    /// use moeplan_app::{protocol::Request, settings::Settings};
    /// let s = Settings::from_hash("#n=4&r=8");
    /// let r = Request::from_settings(3, &s, None, Some(s.cluster()), None, false);
    /// assert_eq!((r.id, r.replicas_per_gpu, r.cluster.map(|c| c.nodes)), (3, Some(8), Some(8)));
    /// assert!(r.per_batch.unwrap().contains(&("extra_experts_per_gpu".into(), "4".into())));
    /// ```
    pub fn from_settings(
        id: u64,
        s: &crate::settings::Settings,
        source: Option<Source>,
        cluster: Option<Cluster>,
        export: Option<String>,
        batches: bool,
    ) -> Request {
        // Priced on the loaded file: its name, and its JSON for the worker.
        let on_file = s.hardware == crate::settings::FILE_HARDWARE;
        let file = s.hardware_file.as_ref().filter(|_| on_file);
        Request {
            id,
            source,
            cluster,
            replicas_per_gpu: s.replicas_per_gpu,
            layer: s.layer,
            rule: s.rule.clone(),
            export,
            hardware: match file {
                Some(f) => f.name.clone(),
                None if on_file => String::new(),
                None => s.hardware.clone(),
            },
            hardware_json: file.map(|f| f.json.clone()),
            model: s.memory_model.clone(),
            // The worker re-plans only when these differ from the last
            // ones asked for: a budget change costs nothing more.
            per_batch: Some(s.per_batch()),
            static_options: Some(s.static_options()),
            batches,
            cross: None,
            serving: None,
            reader: String::new(),
            reader_script: String::new(),
        }
    }
}

/// Which traces to judge plans across.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossAsk {
    /// The files' names, in order; their bytes travel beside the JSON one
    /// after another, `sizes` long each. Empty: the traces the worker
    /// already holds, judged again (after a cluster change).
    pub names: Vec<String>,
    /// Bytes of each file.
    pub sizes: Vec<usize>,
}

/// The cross-workload matrix: rows are plans (made on one trace, or on
/// all), columns the traces they are judged on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossTable {
    /// The traces' names (columns), in the order loaded.
    pub traces: Vec<String>,
    /// Batches in each trace.
    pub batches: Vec<usize>,
    /// The cluster it was planned on (`1 node(s) × 64 GPU(s)`).
    pub cluster: String,
    /// The rows, in `moeplan::studies::across::cross_table`'s order.
    pub rows: Vec<CrossLine>,
}

/// One plan of the [`CrossTable`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossLine {
    /// Its name in reports (`CRAFT (R = 8) robust`).
    pub name: String,
    /// Registry id of its planner (`craft-robust` for the robust variant).
    pub planner: String,
    /// Index of the trace it was made on; `None`: all of them.
    pub made_on: Option<usize>,
    /// Replicas it holds.
    pub replicas: usize,
    /// Balancedness on each trace.
    pub balancedness: Vec<f64>,
    /// Whether each figure is in-sample (judged on data it was made on).
    pub in_sample: Vec<bool>,
}

/// What the worker answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    /// The worker's wasm is running and listening: messages sent before this
    /// would be lost, so the page queues them until it arrives.
    Ready,
    /// A long step started.
    Progress {
        /// Request it belongs to.
        id: u64,
        /// What is being done.
        phase: String,
    },
    /// What changed in the figures to draw.
    View {
        /// Request it answers.
        id: u64,
        /// The trace's statistics (sent when the trace changed).
        stats: Option<TraceStatsLite>,
        /// The figures that changed since the worker's previous answer.
        update: Box<Update>,
        /// Milliseconds the worker spent planning.
        worker_ms: f64,
        /// When the worker took the request and when it posted this answer,
        /// in milliseconds since the epoch (`performance.timeOrigin +
        /// now()`, comparable across threads): where a budget change's time
        /// goes.
        #[serde(default)]
        span: (f64, f64),
        /// The long phases of this answer (a new trace or cluster: each
        /// planner's preparation) and their milliseconds, in order.
        #[serde(default)]
        phase_ms: Vec<(String, f64)>,
    },
    /// An exported plan.
    Export {
        /// Request it answers.
        id: u64,
        /// File name to save as.
        file_name: String,
        /// The file's text.
        text: String,
        /// What had to change to fit the format.
        note: Option<String>,
    },
    /// Plans across the workloads of a [`CrossAsk`].
    Cross {
        /// Request it answers.
        id: u64,
        /// The matrix.
        table: CrossTable,
        /// Milliseconds the worker spent.
        worker_ms: f64,
    },
    /// Serving with re-planning, for a [`Request::serving`].
    Serving {
        /// Request it answers.
        id: u64,
        /// The replay (and the sweep when asked for).
        view: Box<ServingView>,
        /// Milliseconds the worker spent.
        worker_ms: f64,
    },
    /// Between requests the worker did GRACE's clusterings for the clusters
    /// a person is likely to pick next ([`crate::worker::neighbours`]), so
    /// changing to one of them re-plans GRACE from kept clusterings.
    Warmed {
        /// Those clusters, as `N × G`.
        clusters: Vec<String>,
        /// Milliseconds of work it took, in steps between requests.
        worker_ms: f64,
    },
    /// Between requests the worker made Libra's path-table predictions for
    /// the trace held (after GRACE's clusterings), so switching Libra's
    /// predictor to the path table re-places Libra from them.
    PathTableMade {
        /// Milliseconds of work it took, in steps between requests.
        worker_ms: f64,
    },
    /// Something was wrong with the input; the previous state is kept.
    Error {
        /// Request it answers.
        id: u64,
        /// One clear line.
        message: String,
    },
    /// The worker panicked (a bug): sent by its panic hook just before the
    /// wasm traps, so the page can say what happened and restart it.
    Crashed {
        /// The panic's message and place.
        message: String,
    },
}

/// The parts of [`TraceStats`] the page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceStatsLite {
    /// Where it came from (file name or generator settings).
    pub source: String,
    /// Model name, when known.
    pub model: Option<String>,
    /// Batches.
    pub batches: usize,
    /// MoE layers.
    pub layers: usize,
    /// Experts per layer.
    pub experts: usize,
    /// Top-k, when known.
    pub top_k: Option<usize>,
    /// Hottest expert / mean per layer.
    pub max_over_mean: Vec<f64>,
}

impl TraceStatsLite {
    /// Summarises full statistics.
    pub fn from_stats(source: String, s: &TraceStats) -> Self {
        TraceStatsLite {
            source,
            model: s.model.clone(),
            batches: s.batches,
            layers: s.layers.len(),
            experts: s.experts,
            top_k: s.top_k,
            max_over_mean: s.layers.iter().map(|l| l.max_over_mean).collect(),
        }
    }
}

/// What changed in the figures since the worker's previous answer; a part
/// left `None` (or a plan not listed) is as it was. With a `frame`, every
/// part is present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Update {
    /// What only a new trace or cluster changes.
    pub frame: Option<Frame>,
    /// The plans whose figures changed (all of them with a `frame`).
    pub plans: Vec<Figures>,
    /// CRAFT's replication factor used.
    pub replicas_per_gpu: usize,
    /// The dispatch rule the plans' figures are measured under.
    #[serde(default)]
    pub rule: String,
    /// CRAFT's load map, when it changed.
    pub heat: Option<Heat>,
    /// The chosen layer under CRAFT, when it changed.
    pub placement: Option<Placement>,
    /// The chosen layer as GRACE grouped it by affinity, when it changed;
    /// with a `frame`, `None` means the trace has no token routes.
    #[serde(default)]
    pub grouping: Option<Grouping>,
}

/// One layer as GRACE grouped it: its `(S(r), U(r))` curve with the chosen
/// `r`, and its affinity matrix with the experts in group order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Grouping {
    /// The model's layer id.
    pub layer: u32,
    /// The `r` chosen (`None`: grouped by load only).
    pub ratio: Option<f64>,
    /// `(r, S(r), U(r))`, ascending `r`.
    pub curve: Vec<(f64, f64, f64)>,
    /// The experts in drawing order: GPU 0's group, then GPU 1's, ….
    pub order: Vec<u32>,
    /// Each GPU's group size, in that order.
    pub sizes: Vec<usize>,
    /// `A[order[i]][order[j]]` row-major, relative to the largest entry
    /// (travels as numbers).
    #[serde(skip)]
    pub affinity: Vec<f64>,
}

/// The figures that only a new trace or cluster changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    /// The cluster, in words (`8 node(s) × 8 GPU(s)`).
    pub topology: String,
    /// The MoE layers' model ids.
    pub layer_ids: Vec<u32>,
    /// Batches replayed.
    pub batches: usize,
    /// The plans shown, by name, in order (`base`, `eplb`, `craft`).
    pub plans: Vec<String>,
    /// Why a planner is missing.
    pub notes: Vec<String>,
    /// What the planners shown say beside their plans (GRACE with counts
    /// only: grouped by load), in their order.
    #[serde(default)]
    pub planner_notes: Vec<PlannerNote>,
    /// The plan the budget moves and the curve, load map and layer view
    /// are of, by name (`craft`: the workspace's focus).
    #[serde(default)]
    pub focus: String,
    /// CRAFT's automatic choice of R.
    pub auto_replicas_per_gpu: usize,
    /// The model every figure is judged on (the page's ask, else the
    /// trace's, else DeepSeek-V3): its experts price replica memory.
    #[serde(default)]
    pub model: String,
    /// CRAFT's balancedness-vs-R curve.
    pub curve: Vec<CurvePoint>,
}

/// One point of CRAFT's curve.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Replicas per GPU, summed over layers (`R`).
    pub replicas_per_gpu: usize,
    /// Replicas the allocation spends.
    pub replicas: usize,
    /// Mean balancedness predicted from the benefit table.
    pub predicted_balancedness: f64,
    /// Upper bound on any plan's balancedness with these replicas.
    pub bound: f64,
}

/// One plan's summary row and per-layer series.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// The planner's id: `base`, `eplb`, `craft`, ….
    pub name: String,
    /// Its title with its budget, from the registry: `BASE`, `EPLB +64`,
    /// `CRAFT R = 8`.
    #[serde(default)]
    pub label: String,
    /// Mean over batches, then layers, of mean / max GPU load.
    pub balancedness: f64,
    /// Mean of max / mean GPU load.
    pub imbalance_ratio: f64,
    /// Replicas in all.
    pub replicas: usize,
    /// Replica slots on the fullest GPU (its replica memory in experts).
    pub replica_slots_per_gpu: usize,
    /// Upper bound for these replica counts.
    pub bound: f64,
    /// The dispatch rule these figures are measured under.
    #[serde(default)]
    pub rule: String,
    /// Shares of the (token, expert) pairs served on their source GPU, on
    /// another GPU of its node, and on another node (they sum to 1).
    #[serde(default)]
    pub traffic: [f64; 3],
    /// Cross-node dispatch bytes over all batches, in GB (10⁹ bytes).
    #[serde(default)]
    pub cross_node_gb: f64,
    /// Per-layer balancedness (travels as numbers).
    #[serde(skip)]
    pub per_layer: Vec<f64>,
    /// Replicas in each layer (travels as numbers).
    #[serde(skip)]
    pub replicas_per_layer: Vec<usize>,
    /// Imbalance ratio of each batch (travels as numbers).
    #[serde(skip)]
    pub per_batch_imbalance: Vec<f64>,
    /// Expert bytes a per-batch planner copies in each batch; empty for a
    /// static plan (travels as numbers).
    #[serde(skip)]
    pub per_batch_bytes: Vec<f64>,
    /// How a per-batch planner serves (`per batch, libra-rebalance, …`);
    /// `None` for a static plan.
    #[serde(default)]
    pub schedule: Option<String>,
    /// Time and memory on the request's hardware; `None` unpriced.
    #[serde(default)]
    pub predicted: Option<Predicted>,
}

/// What the page shows of a plan's prediction
/// (`moeplan::judge::cost::Prediction`, its few scalars).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    /// The hardware preset.
    pub hardware: String,
    /// One step, ms.
    pub step_ms: f64,
    /// Served tokens per second.
    pub tokens_per_s: f64,
    /// Throughput over BASE's.
    pub speedup: Option<f64>,
    /// Mean MoE layer time and its terms, µs.
    pub moe_layer_us: f64,
    /// Expert compute per MoE layer, µs.
    pub compute_us: f64,
    /// Dispatch per MoE layer, µs.
    pub dispatch_us: f64,
    /// Combine per MoE layer, µs.
    pub combine_us: f64,
    /// The dense part of a step, µs.
    pub dense_us: f64,
    /// Copies not hidden, per step, µs.
    pub copy_exposed_us: f64,
    /// MoE layers in a step.
    pub moe_layers: usize,
    /// KV cache per GPU, GiB.
    pub kv_cache_gib_per_gpu: f64,
    /// How far to trust it, one sentence (the hardware's calibration, or
    /// the model's error where an uncalibrated preset was checked).
    pub error_band: String,
}

/// CRAFT's load per GPU and layer, relative to the layer's mean GPU load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Heat {
    /// Layers (rows).
    pub layers: usize,
    /// GPUs (columns).
    pub gpus: usize,
    /// `values[layer * gpus + gpu]` (travels as numbers).
    #[serde(skip)]
    pub values: Vec<f64>,
}

impl Heat {
    /// From `rows[layer][gpu]`; `None` if the rows differ in length.
    ///
    /// ```
    /// use moeplan_app::protocol::Heat;
    /// let h = Heat::from_rows(&[vec![1.0, 2.0], vec![3.0, 4.0]]).unwrap();
    /// assert_eq!((h.layers, h.gpus, h.get(1, 0)), (2, 2, Some(3.0)));
    /// assert!(Heat::from_rows(&[vec![1.0], vec![]]).is_none());
    /// ```
    pub fn from_rows(rows: &[Vec<f64>]) -> Option<Heat> {
        let gpus = rows.first().map_or(0, Vec::len);
        rows.iter().all(|r| r.len() == gpus).then(|| Heat {
            layers: rows.len(),
            gpus,
            values: rows.concat(),
        })
    }

    /// The value of one cell.
    pub fn get(&self, layer: usize, gpu: usize) -> Option<f64> {
        if gpu >= self.gpus {
            return None;
        }
        self.values.get(layer * self.gpus + gpu).copied()
    }
}

/// One hosted expert in a placement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    /// The expert.
    pub expert: u32,
    /// Copies of that expert in the layer.
    pub copies: u32,
    /// Share of the layer's tokens this copy receives.
    pub share: f64,
}

/// One layer under CRAFT: every GPU's experts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// The model's layer id.
    pub layer: u32,
    /// Per GPU, its slots (travels as numbers).
    #[serde(skip)]
    pub gpus: Vec<Vec<Slot>>,
}

/// A message's JSON and, for a view, its numbers (the page posts them as a
/// transferred `Float64Array`).
///
/// ```
/// use moeplan_app::protocol::{Figures, Response, Update, decode, encode};
/// let r = Response::View {
///     id: 3,
///     stats: None,
///     update: Box::new(Update {
///         plans: vec![Figures { name: "craft".into(), per_layer: vec![0.5, 0.75], ..Figures::default() }],
///         replicas_per_gpu: 8,
///         ..Update::default()
///     }),
///     worker_ms: 1.5,
///     span: (0.0, 0.0),
///     phase_ms: vec![],
/// };
/// let (json, numbers) = encode(&r).unwrap();
/// assert_eq!(numbers.as_deref(), Some(&[2.0, 0.5, 0.75, 0.0, 0.0, 0.0][..]));
/// assert_eq!(decode(&json, numbers.as_deref()).unwrap(), r);
/// ```
pub fn encode(r: &Response) -> Result<(String, Option<Vec<f64>>), String> {
    let json = serde_json::to_string(r).map_err(|e| e.to_string())?;
    Ok((json, numbers(r)))
}

/// Why a worker stopped, from its `error` event's message: a wasm abort
/// with no panic message before it (`unreachable`) is a failed allocation.
///
/// ```
/// use moeplan_app::protocol::why_stopped;
/// assert_eq!(why_stopped("Uncaught RuntimeError: unreachable"), "out of memory?");
/// assert_eq!(why_stopped(""), "an uncaught error");
/// assert_eq!(why_stopped("boom"), "boom");
/// ```
pub fn why_stopped(message: &str) -> String {
    if message.contains("unreachable") || message.to_ascii_lowercase().contains("memory") {
        "out of memory?".into()
    } else if message.is_empty() {
        "an uncaught error".into()
    } else {
        message.to_string()
    }
}

/// Posts `[json, numbers | null]` from a worker, the numbers in one
/// `Float64Array` whose buffer is transferred, not copied.
pub fn post_with_numbers(
    scope: &web_sys::DedicatedWorkerGlobalScope,
    json: &str,
    numbers: Option<&[f64]>,
) {
    use wasm_bindgen::JsValue;
    let json = JsValue::from_str(json);
    let _ = match numbers {
        Some(xs) => {
            let array = js_sys::Float64Array::new_with_length(xs.len() as u32);
            array.copy_from(xs);
            let buffer = array.buffer();
            scope.post_message_with_transfer(
                &js_sys::Array::of2(&json, &array),
                &js_sys::Array::of1(&buffer),
            )
        }
        None => scope.post_message(&js_sys::Array::of2(&json, &JsValue::NULL)),
    };
}

/// Reads a message [`encode`] wrote (a view's numbers are required).
pub fn decode(json: &str, numbers: Option<&[f64]>) -> Result<Response, String> {
    let r: Response = serde_json::from_str(json).map_err(|e| e.to_string())?;
    attach(r, numbers)
}

/// The numbers of a message: a view's series, in a fixed order.
fn numbers(r: &Response) -> Option<Vec<f64>> {
    match r {
        Response::View { update, .. } => {
            let mut w = Vec::new();
            update.put(&mut w);
            Some(w)
        }
        _ => None,
    }
}

/// Puts a view's [`numbers`] back into the message read without them.
fn attach(mut r: Response, numbers: Option<&[f64]>) -> Result<Response, String> {
    if let Response::View { update, .. } = &mut r {
        let mut reader = Numbers(numbers.ok_or("a view arrived without its numbers")?);
        update.take(&mut reader)?;
        if !reader.0.is_empty() {
            return Err(format!("{} numbers left over in a view", reader.0.len()));
        }
    }
    Ok(r)
}

/// Reads the numbers of a message in the order they were written.
struct Numbers<'a>(&'a [f64]);

impl<'a> Numbers<'a> {
    fn next(&mut self) -> Result<f64, String> {
        let (&x, rest) = self.0.split_first().ok_or("a view's numbers end early")?;
        self.0 = rest;
        Ok(x)
    }

    fn count(&mut self) -> Result<usize, String> {
        let x = self.next()?;
        if x.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&x) {
            Ok(x as usize)
        } else {
            Err(format!("{x} is not a count"))
        }
    }

    /// A length-prefixed run.
    fn run(&mut self) -> Result<&'a [f64], String> {
        let n = self.count()?;
        if n > self.0.len() {
            return Err("a view's numbers end early".into());
        }
        let (run, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(run)
    }
}

fn put_run(w: &mut Vec<f64>, xs: impl ExactSizeIterator<Item = f64>) {
    w.push(xs.len() as f64);
    w.extend(xs);
}

fn counts(xs: &[f64]) -> Result<Vec<usize>, String> {
    let mut r = Numbers(xs);
    (0..xs.len()).map(|_| r.count()).collect()
}

impl Update {
    fn put(&self, w: &mut Vec<f64>) {
        for p in &self.plans {
            put_run(w, p.per_layer.iter().copied());
            put_run(w, p.replicas_per_layer.iter().map(|&x| x as f64));
            put_run(w, p.per_batch_imbalance.iter().copied());
            put_run(w, p.per_batch_bytes.iter().copied());
        }
        if let Some(h) = &self.heat {
            put_run(w, h.values.iter().copied());
        }
        if let Some(p) = &self.placement {
            w.push(p.gpus.len() as f64);
            for g in &p.gpus {
                w.push(g.len() as f64);
                for s in g {
                    w.extend([s.expert as f64, s.copies as f64, s.share]);
                }
            }
        }
        if let Some(g) = &self.grouping {
            put_run(w, g.affinity.iter().copied());
        }
    }

    fn take(&mut self, r: &mut Numbers) -> Result<(), String> {
        for p in &mut self.plans {
            p.per_layer = r.run()?.to_vec();
            p.replicas_per_layer = counts(r.run()?)?;
            p.per_batch_imbalance = r.run()?.to_vec();
            p.per_batch_bytes = r.run()?.to_vec();
        }
        if let Some(h) = &mut self.heat {
            h.values = r.run()?.to_vec();
            if h.values.len() != h.layers * h.gpus {
                return Err(format!(
                    "a load map of {} × {} with {} values",
                    h.layers,
                    h.gpus,
                    h.values.len()
                ));
            }
        }
        if let Some(p) = &mut self.placement {
            let gpus = r.count()?;
            p.gpus = Vec::with_capacity(gpus.min(r.0.len()));
            for _ in 0..gpus {
                let n = r.count()?;
                let mut g = Vec::with_capacity(n.min(r.0.len()));
                for _ in 0..n {
                    let expert = r.count()? as u32;
                    let copies = r.count()? as u32;
                    g.push(Slot {
                        expert,
                        copies,
                        share: r.next()?,
                    });
                }
                p.gpus.push(g);
            }
        }
        if let Some(g) = &mut self.grouping {
            g.affinity = r.run()?.to_vec();
            let n = g.order.len();
            if g.affinity.len() != n * n || g.sizes.iter().sum::<usize>() != n {
                return Err(format!(
                    "an affinity map of {n} experts in groups of {} with {} values",
                    g.sizes.iter().sum::<usize>(),
                    g.affinity.len()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
