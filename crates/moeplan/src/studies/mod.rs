//! Questions asked across many plans or workloads, built on the planners
//! and the judge: plans across workloads and the cross-workload matrix
//! ([`across`]), the replica-budget sweep ([`sweep`]), a trace's
//! batch-to-batch variation ([`variation`]), serving with re-planning
//! every `K` batches on the last `W` ([`serving`]) with the engines' own
//! knobs ([`engines`]), and the time model against what others measured
//! ([`cost_checks`]).

pub mod across;
pub mod cost_checks;
pub mod engines;
pub mod serving;
pub mod sweep;
pub mod variation;
