//! The planners, one file (or folder) each, named after the method, and
//! [`PLANNERS`] — the one list every front end and the workspace iterate.
//!
//! Adding a planner: write its file (its functions, an `ID`, its options as
//! [`OptionSpec`]s, a unit struct implementing [`Planner`] and a
//! [`Prepared`]), then add a `pub mod` line and an entry in [`PLANNERS`]
//! here. The CLI's `--algo` and flags, `compare`'s rows, the JavaScript
//! API's `algorithm` and `planners()`, and the page's workspace pick it up
//! from the list (ARCHITECTURE.md, "Adding a planner").
//!
//! [`registry`](mod@registry) is the vocabulary every planner speaks;
//! [`shared`] holds the building blocks more than one planner uses.

pub mod contiguous;
pub mod craft;
pub mod eplb;
pub mod grace;
pub mod libra;
pub mod registry;
pub mod shared;

pub use contiguous::contiguous;
pub use craft::{Craft, CraftOptions, ReplicaBudget, craft};
pub use eplb::{EplbConfig, base, eplb};
pub use registry::{
    CurvePoint, Kind, Needs, OptionSpec, Planned, Planner, PlannerId, PlannerInfo, PlannerSpec,
    Predicted, Prepared, Settings, Unit, Value, all_options, describe, find, option, plan, prepare,
    registry,
};

/// Every planner, in the order reports list them: the floor first, then by
/// how much of the loads each uses.
pub static PLANNERS: &[&dyn Planner] = &[
    &contiguous::ContiguousPlanner,
    &eplb::BasePlanner,
    &eplb::EplbPlanner,
    &craft::CraftPlanner,
    &grace::GracePlanner,
    &libra::LibraPlanner,
];
