//! # moeplan — expert placement and replication for MoE serving
//!
//! The planning core: read an expert-load trace, compute where every expert
//! and replica lives on a cluster of nodes × GPUs, and measure how balanced
//! the result is. Pure Rust with no I/O beyond parsing bytes it is handed,
//! so the same code runs in the CLI, in the browser (wasm) and in tests.
//!
//! Data flows one way: bytes → [`formats`] → [`LoadTrace`] → planner →
//! [`Plan`] → [`evaluate`] → [`EvalReport`].
//!
//! ## Planners
//! | planner | what it does | source |
//! | --- | --- | --- |
//! | [`planners::contiguous`](mod@planners::contiguous) | expert `e` on GPU `⌊e·D/E⌋`, no replicas | — |
//! | [`planners::base`] | EPLB's placement, no replicas (the papers' BASE) | DeepSeek EPLB |
//! | [`planners::eplb`](mod@planners::eplb) | DeepSeek's EPLB, exact port: replicate the highest load per copy, balanced packing, hierarchical over nodes | deepseek-ai/EPLB `eplb.py` |
//! | [`planners::craft`](mod@planners::craft) | CRAFT: per-layer replica budget by measured benefit (knapsack), equal memory on every GPU, capacity-aware placement | CRAFT paper, §4.2 and appendix A (Algorithms 1–3) |
//! | [`planners::grace`](mod@planners::grace) | GRACE-MoE: experts grouped by co-activation affinity (spectral clustering, hierarchical over nodes, controlled non-uniform sizes at the `(S, U)` knee), the heaviest group's hot experts replicated by load skew; load-only grouping without token routes | GRACE-MoE paper, §4.1–4.2, appendix A.2 (Algorithms 1–2, Eqs. 1–3) |
//! | [`planners::libra`](mod@planners::libra) | Libra: per-batch prefetch of up to N copies per GPU from a predicted next-layer routing (Algorithm 1) and the token rebalancer as the dispatch rule `libra-rebalance` (Algorithm 2); registered as a per-batch planner: its plan is a contiguous base, its copies a schedule ([`planners::Prepared::schedule`]) front ends replay | Libra paper, §3, appendices B–C |
//!
//! Every planner is registered once in [`planners::PLANNERS`]; the CLI, the
//! JavaScript API and the [`workspace`] list planners from there. Shared by
//! planners:
//!
//! | module | what it does | source |
//! | --- | --- | --- |
//! | [`planners::registry`](mod@planners::registry) | the `Planner` trait, ids, options and defaults, the prepare / plan split | — |
//! | [`planners::knapsack`] | multiple-choice knapsack over layers (CRAFT's Algorithm 2, its bound) | CRAFT paper, appendix A |
//! | [`planners::placement`] | capacity-aware placement of copies on slots, swap refinement | CRAFT paper, §4.2 Step 5 |
//!
//! ## Reading hostile files
//! Every reader in [`formats`] works within a [`Budget`] (bytes
//! materialised, values built, nesting depth) checked by a [`Meter`] before
//! it allocates: declared sizes and shapes are claims checked against the
//! bytes really there, and what a compressed member expands to is counted as
//! it is inflated.
//!
//! ## Metrics
//! Balancedness = mean GPU load / max GPU load (CRAFT; 1.0 is perfect);
//! imbalance ratio = max / mean (Libra). Overall figures are the mean over
//! batches, then over layers. See [`eval`]. Every evaluation also reports
//! the [`bound`]: the best balancedness any plan with the same replica counts
//! could reach, and the plan's gap to it.
//!
//! ```
//! use moeplan::{evaluate, generator, model, planners, Topology};
//! let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 8))?;
//! let topo = Topology::new(1, 8)?;
//! let base = evaluate(&trace, &planners::base(&trace, topo, 1)?)?;
//! let cfg = planners::EplbConfig { redundant_experts: 16, groups: 1 };
//! let eplb = evaluate(&trace, &planners::eplb(&trace, topo, cfg)?)?;
//! assert!(eplb.balancedness > base.balancedness);
//! # Ok::<(), moeplan::Error>(())
//! ```
//!
//! ## Simulation
//! | module | what it does | source |
//! | --- | --- | --- |
//! | [`sim`] | replays a workload against a plan or a schedule under engines' real dispatch rules (even, vLLM, SGLang static / dynamic, local-first, optimal min-max); balance, local / intra / cross-node traffic, bytes moved | vLLM and SGLang dispatch code, design brief "one simulator for every planner" |
//! | [`across`] | plans across workloads: several traces as one mix (EPLB on the weighted sum, CRAFT on the weighted mean over batches, a robust CRAFT by multiplicative weights over the traces) and the cross-workload matrix | issue 16; CRAFT paper §4.2 |
//! | [`variation`] | batch-to-batch variation of any trace: per-expert CV of its share, load-weighted and median CV, lag-1 autocorrelation, CV by load (how the generator is calibrated against real per-batch data) | HarMoEny per-batch Qwen1.5-MoE data, `shared/data` |
//! | [`token_generator`] | seeded token-level traces (per-token top-k routes, source ranks) with planted co-activation: per-layer expert topics, per-rank topic skew, cross-layer persistence | calibrated on ESFT's DeepSeek-V2-Lite token routing, `shared/data` |
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

pub mod across;
pub mod bound;
pub mod budget;
pub mod error;
pub mod eval;
pub mod formats;
pub mod generator;
pub mod model;
pub mod plan;
pub mod planners;
pub mod sim;
pub mod sweep;
pub mod token_generator;
pub mod topology;
pub mod trace;
pub mod variation;
pub mod workspace;

pub use budget::{Budget, Meter};
pub use error::{Error, Result};
pub use eval::{BoundCounts, EvalReport, evaluate, evaluate_with_progress, gpu_loads};
pub use plan::{LayerPlacement, Plan, PlanSummary};
pub use topology::Topology;
pub use trace::{Deal, HoldoutSplit, LayerStats, LoadTrace, TokenTrace, TraceStats};
