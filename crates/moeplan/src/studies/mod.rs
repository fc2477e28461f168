//! Questions asked across many plans or workloads, built on the planners
//! and the judge: plans across workloads and the cross-workload matrix
//! ([`across`]), the replica-budget sweep ([`sweep`]), a trace's
//! batch-to-batch variation ([`variation`]), and serving with re-planning
//! every `K` batches on the last `W` ([`serving`]).

pub mod across;
pub mod serving;
pub mod sweep;
pub mod variation;
