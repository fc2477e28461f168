//! # moeplan — expert placement and replication for MoE serving
//!
//! The planning core: read an expert-load trace, compute where every expert
//! and replica lives on a cluster of nodes × GPUs, and judge the result
//! under the dispatch rules engines really use. Pure Rust with no I/O beyond
//! parsing bytes it is handed, so the same code runs in the CLI, in the
//! browser (wasm) and in tests.
//!
//! Data flows one way: bytes → [`formats`] → [`data`] ([`LoadTrace`],
//! [`Workload`]) → [`planners`] → [`Plan`] → [`judge`] → a report.
//!
//! ## The house
//! | folder | what it is for |
//! | --- | --- |
//! | [`data`] | the types: trace and token routes, topology, model, plan, workload; the reading limits every reader works within |
//! | [`judge`] | a plan or a schedule judged under a dispatch rule: balance, traffic, bytes moved, the bound |
//! | [`planners`] | one folder or file per planner, the registry, and `planners::shared` |
//! | [`formats`] | readers and writers of every engine's files |
//! | [`synth`] | seeded generated traces: counts and token routes |
//! | [`studies`] | across workloads, the budget sweep, batch-to-batch variation, serving with re-planning, the time model against published figures |
//!
//! Each folder reads only the ones above it in this table (`data` reads
//! none but [`error`]): the judge knows no planner, a planner no file
//! format, and `formats` reads the planners' option vocabulary only to
//! record a plan's options. `tests/tidy.rs` checks the order and that no
//! module imports another that imports it back.
//!
//! ## Planners
//! | planner | what it does | source |
//! | --- | --- | --- |
//! | [`planners::contiguous`] | expert `e` on GPU `⌊e·D/E⌋`, no replicas | — |
//! | [`planners::base`] | EPLB's placement, no replicas (the papers' BASE) | DeepSeek EPLB |
//! | [`planners::eplb`] | DeepSeek's EPLB, exact port: replicate the highest load per copy, balanced packing, hierarchical over nodes | deepseek-ai/EPLB `eplb.py` |
//! | [`planners::craft`] | CRAFT: per-layer replica budget by measured benefit (knapsack), equal memory on every GPU, capacity-aware placement | CRAFT paper, §4.2 and appendix A (Algorithms 1–3) |
//! | [`planners::grace`](planners::Grace) | GRACE-MoE: experts grouped by co-activation affinity (spectral clustering, hierarchical over nodes, controlled non-uniform sizes at the `(S, U)` knee), the heaviest group's hot experts replicated by load skew; load-only grouping without token routes | GRACE-MoE paper, §4.1–4.2, appendix A.2 (Algorithms 1–2, Eqs. 1–3) |
//! | [`planners::libra`](planners::libra_schedule) | Libra: per-batch prefetch of up to N copies per GPU from a predicted next-layer routing (Algorithm 1) and the token rebalancer as the dispatch rule `libra-rebalance` (Algorithm 2); a per-batch planner: its plan is a contiguous base, its copies a schedule ([`planners::Prepared::schedule`]) | Libra paper, §3, appendices B–C |
//!
//! Every planner is registered once, in the list in `planners/mod.rs`
//! ([`planners::registry`] to plan, [`planners::SPECS`] as data), in the
//! vocabulary of [`planners::PlannerSpec`]; the CLI,
//! the JavaScript API and the page list planners from there. Every dispatch
//! rule is listed once in [`judge::Rule::ALL`].
//!
//! ## Entry points
//! | to … | call |
//! | --- | --- |
//! | read a trace file | [`formats::read_trace`] (content-detected), or a format's own reader |
//! | generate a trace | [`synth::generator::generate`], [`synth::token_generator::generate_tokens`] |
//! | plan with any planner | [`planners::find`] then [`planners::plan`] (or [`planners::prepare`] to plan many budgets) |
//! | judge a plan or a schedule under a rule | [`judge::simulate`]; [`evaluate`] is its fast path under even split |
//! | the best any plan with those replica counts could do | [`EvalReport`]'s `bound`, [`judge::layer_bound_curve`] |
//! | write a plan for an engine | [`formats::PlanFormat::write`], each engine's format in [`formats::PlanFormat::ALL`] |
//!
//! ## Reading hostile files
//! Every reader in [`formats`] works within a [`ReadLimits`] (bytes
//! materialised, values built, nesting depth) checked by a [`Meter`] before
//! it allocates: declared sizes and shapes are claims checked against the
//! bytes really there, and what a compressed member expands to is counted as
//! it is inflated.
//!
//! ## Metrics
//! Balancedness = mean GPU load / max GPU load (CRAFT; 1.0 is perfect);
//! imbalance ratio = max / mean (Libra). Overall figures are the mean over
//! batches, then over layers. Every evaluation also reports the bound: the
//! best balancedness any plan with the same replica counts could reach, and
//! the plan's gap to it.
//!
//! ```
//! use moeplan::{evaluate, planners, Topology};
//! use moeplan::{data::model, synth::generator};
//! let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 8))?;
//! let topo = Topology::new(1, 8)?;
//! let base = evaluate(&trace, &planners::base(&trace, topo, 1)?)?;
//! let cfg = planners::EplbConfig { redundant_experts: 16, groups: 1 };
//! let eplb = evaluate(&trace, &planners::eplb(&trace, topo, cfg)?)?;
//! assert!(eplb.balancedness > base.balancedness);
//! # Ok::<(), moeplan::Error>(())
//! ```
#![deny(unsafe_code)] // deny, not forbid: ndarray's s! macro carries a local allow
#![warn(missing_docs)]
// User input never panics the core: failures are `Error`s. Lints, not a
// grep, so macros and method chains cannot slip past (tests may unwrap).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented
    )
)]

pub mod data;
pub mod error;
pub mod formats;
pub mod judge;
pub mod planners;
mod sort;
pub mod studies;
pub mod synth;
#[cfg(test)]
mod tests;
// Test helpers shared with the examples name the crate `moeplan::`.
#[cfg(test)]
extern crate self as moeplan;

pub use data::limits::{Meter, ReadLimits};
pub use data::{
    Deal, HoldoutSplit, LayerPlacement, LayerStats, LoadTrace, Plan, PlanSummary, TokenTrace,
    Topology, TraceStats, Workload,
};
pub use error::{Error, Result};
pub use judge::{BoundCounts, EvalReport, evaluate, gpu_loads};
