//! The planners, one file (or folder) each, named after the method, and
//! [`PLANNERS`] — the one list every front end and the workspace iterate.
//!
//! Adding a planner: write its file (its functions, an `ID`, its options as
//! [`OptionSpec`]s, its registry entry `SPEC`, a unit struct implementing
//! [`Planner`] and a [`Prepared`]), then add its `mod` line and one line in
//! the list here, which makes both [`PLANNERS`] and [`SPECS`]. The CLI's `--algo` and flags, `compare`'s rows, the JavaScript
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
// What front ends name of the planners, at this one door: the ids and the
// options a front end sets itself (the page's Libra and GRACE controls,
// CRAFT's budget and objective), the state a view reads and warms (GRACE's
// analysis, Libra's path table, CRAFT's benefit table) and the served
// plan's incremental adjustment; never a planner's module path.
pub use craft::{ID as CRAFT_ID, OBJECTIVE, REPLICAS_PER_GPU, warm as warm_craft};
pub use grace::{
    Grace, GraceAnalysis, GraceOptions, ID as GRACE_ID, NONUNIFORMITY,
    affinity::affinity as grace_affinity,
};
pub use libra::{
    DEFAULT_DEPTH, EXTRA_EXPERTS_PER_GPU, ID as LIBRA_ID, LibraOptions, PREDICTOR, PathMemoBuild,
    Predictor, libra_schedule,
};
pub use registry::{
    CurvePoint, Needs, OptionKind, OptionSpec, Planned, Planner, PlannerId, PlannerInfo,
    PlannerSpec, Predicted, Prepared, Settings, Unit, Value, all_options, describe, find, option,
    plan, prepare, prepare_by, registry,
};
pub use shared::incremental::{Goal, incremental};

/// Makes [`PLANNERS`] and [`SPECS`] from one list: each line a planner's
/// unit struct and its registry entry.
macro_rules! listed {
    ($($planner:path => $spec:path),* $(,)?) => {
        /// Every planner's registry entry, in [`PLANNERS`]' order, as data
        /// only: what a front end that lists, labels or checks planners
        /// reads without linking any planner's code (the page's main
        /// thread; the planning runs in its worker).
        ///
        /// ```
        /// use moeplan::planners::{PLANNERS, SPECS};
        /// let ids: Vec<_> = SPECS.iter().map(|s| s.id).collect();
        /// assert_eq!(ids, PLANNERS.iter().map(|p| p.id()).collect::<Vec<_>>());
        /// for (s, p) in SPECS.iter().zip(PLANNERS) {
        ///     let o = |x: &moeplan::planners::PlannerSpec| x.options.iter().map(|o| o.name).collect::<Vec<_>>();
        ///     assert_eq!((s.display, s.needs, o(s)), (p.display(), p.needs(), o(p.spec())));
        /// }
        /// ```
        pub static SPECS: &[&PlannerSpec] = &[$(&$spec),*];

        /// Every planner, in the order reports list them: the floor first,
        /// then by how much of the loads each uses.
        pub static PLANNERS: &[&dyn Planner] = &[$(&$planner),*];
    };
}

// The one list of planners (adding one: its file, its `mod` line above and
// one line here).
listed! {
    contiguous::ContiguousPlanner => contiguous::SPEC,
    eplb::BasePlanner => eplb::BASE_SPEC,
    eplb::EplbPlanner => eplb::SPEC,
    craft::CraftPlanner => craft::SPEC,
    grace::GracePlanner => grace::SPEC,
    libra::LibraPlanner => libra::SPEC,
}

/// The entry of the planner named `name`, data only (see [`SPECS`]).
pub fn spec(name: &str) -> Option<&'static PlannerSpec> {
    SPECS.iter().copied().find(|s| s.id.as_str() == name)
}
