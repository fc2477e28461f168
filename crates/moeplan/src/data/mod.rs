//! What moeplan reasons about: a load trace (and token routes), the
//! cluster, the model, a plan, and the workload a plan is judged on. No
//! algorithm lives here, only the types, their checks and their summaries.

pub(crate) mod cache;
pub mod hardware;
pub(crate) mod limits;
pub mod model;
pub mod plan;
mod provenance;
pub mod topology;
pub mod trace;
pub(crate) mod workload;

pub use workload::Workload;
