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
//! This module holds only the envelopes: what the page asks ([`Request`])
//! and what the worker answers ([`Response`]). A view answer carries a diff
//! in the view crate's page form ([`moeplan_view::page`]), and answers
//! arrive in the order they were sent (`postMessage`), so the page applies
//! every one in turn.

use moeplan_view::page::{CrossTable, TraceStatsLite, Update};
use moeplan_view::{Cluster, ServingAsk, ServingView};
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

/// Tokens in each batch of a generated trace with token routes, dealt to
/// the 8 ranks in equal shares. At 128 a batch put 16 (token, expert)
/// pairs on each of the default's 64 GPUs and the previous batch predicted
/// the next one no better than chance (Libra 0.36 against the base's 0.55
/// on 8 × 8); at 512 Libra's previous batch reaches 0.650 against the
/// base's 0.439 (docs/libra.md) and the default's routes are 61 MB. The per-batch
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
    /// `decode` prices decode batches (each token a request holding its
    /// context's KV cache); anything else prefill.
    #[serde(default)]
    pub phase: String,
    /// Every plan judged under `rule`; `false`: each planner under the
    /// rule its system serves under where it has one (GRACE's), the rest
    /// under `rule`.
    #[serde(default)]
    pub one_rule: bool,
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
            phase: s.phase.clone(),
            one_rule: s.one_rule,
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
    /// What the worker prepares between requests (`what`, `done` of it,
    /// 0 to 1), sent as it goes; `what: None` once nothing is left. The
    /// page says so in a line of its own.
    Preparing { what: Option<String>, done: f64 },
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

/// A message's JSON and, for a view, its numbers (the page posts them as a
/// transferred `Float64Array`).
///
/// ```
/// use moeplan_app::protocol::{Response, decode, encode};
/// use moeplan_view::page::{Figures, Update};
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
        Response::View { update, .. } => Some(update.to_numbers()),
        _ => None,
    }
}

/// Puts a view's [`numbers`] back into the message read without them.
fn attach(mut r: Response, numbers: Option<&[f64]>) -> Result<Response, String> {
    if let Response::View { update, .. } = &mut r {
        update.take_numbers(numbers.ok_or("a view arrived without its numbers")?)?;
    }
    Ok(r)
}

#[cfg(test)]
mod tests;
