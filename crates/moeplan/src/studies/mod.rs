//! Questions asked across many plans or workloads, built on the planners
//! and the judge: plans across workloads and the cross-workload matrix
//! (`across`), the replica-budget sweep ([`sweep`]), a trace's
//! batch-to-batch variation (`variation`), serving with re-planning
//! every `K` batches on the last `W` (`serving`) with the engines' own
//! knobs (`engines`), and the time model against what others measured
//! (`cost_checks`).

pub(crate) mod across;
pub(crate) mod cost_checks;
pub(crate) mod engines;
pub(crate) mod serving;
pub(crate) mod sweep;
pub(crate) mod variation;

// The door: every study by name, never by its module's path.
pub use across::{
    CrossCell, CrossRow, Mix, ROBUST_ROUNDS, Robust, Round, craft_mean, craft_robust, cross_matrix,
    cross_table, judge_each,
};
pub use cost_checks::{
    CRAFT_KV_FITTED, Pair, craft_assumptions, craft_kv_loss, deepep_low_latency, deepep_normal,
    h100_rank_times,
};
pub use engines::{ENGINES, Engine, Setting, tokens_per_batch};
pub use serving::{LibraServed, Migrate, Replan, Serving, ServingReport, Stair, Transfer, serve};
pub use sweep::{Sweep, SweepRow, sweep, sweep_by};
pub use variation::{
    AUTOCORRELATION_MIN_LOAD, LoadBin, PairVariation, VariationStats, pair_variation,
};
