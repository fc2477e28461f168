//! What moeplan reasons about: a load trace (and token routes), the
//! cluster, the model, a plan, and the workload a plan is judged on. No
//! algorithm lives here, only the types, their checks and their summaries.

pub(crate) mod cache;
pub mod hardware;
pub(crate) mod limits;
pub mod model;
pub(crate) mod plan;
mod provenance;
pub(crate) mod topology;
pub(crate) mod trace;
pub(crate) mod workload;

pub use plan::{LayerPlacement, Plan, PlanSummary};
pub use provenance::{Provenance, Scope, TraceRef, fingerprint};
pub use topology::Topology;
pub use trace::{Deal, HoldoutSplit, LayerStats, LoadTrace, TokenTrace, TraceStats};
pub use workload::Workload;
