//! Questions asked across many plans or workloads, built on the planners
//! and the judge: plans across workloads and the cross-workload matrix
//! ([`across`]), the replica-budget sweep ([`sweep`]) and a trace's
//! batch-to-batch variation ([`variation`]).

pub mod across;
pub mod sweep;
pub mod variation;
