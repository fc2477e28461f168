//! Messages between the page (main thread) and the planning worker.
//!
//! Each message is a two-element JS array: a JSON string, and either `null`
//! or the bytes of a trace file (a transferred `Uint8Array`, never copied
//! through JSON). JSON keeps the protocol readable in the browser's console.

use moeplan::TraceStats;
use moeplan::workspace::{Cluster, View};
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
    },
    /// A file from the user's disk; its bytes travel beside the JSON.
    File {
        /// File name, for messages.
        name: String,
    },
}

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
    /// Export CRAFT's plan in this format (`moeplan` or `sglang`) instead of
    /// answering with a view.
    pub export: Option<String>,
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
    /// The figures to draw.
    View {
        /// Request it answers.
        id: u64,
        /// The trace's statistics (sent when the trace changed).
        stats: Option<TraceStatsLite>,
        /// The view.
        view: Box<View>,
        /// Milliseconds the worker spent.
        worker_ms: f64,
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
