//! The planners, one file (or folder) each, named after the method, and
//! the one list of them every front end and the workspace iterate
//! ([`registry`] to plan, [`SPECS`] as data).
//!
//! Adding a planner: write its file (its functions, an `ID`, its options as
//! [`OptionSpec`]s, its registry entry `SPEC`, a unit struct implementing
//! [`Planner`] and a [`Prepared`]), then add its `mod` line and one line in
//! the list here, which makes both `PLANNERS` and [`SPECS`]. The CLI's `--algo` and flags, `compare`'s rows, the JavaScript
//! API's `algorithm` and `planners()`, and the page's workspace pick it up
//! from the list (ARCHITECTURE.md, "Adding a planner").
//!
//! `registry` is the vocabulary every planner speaks;
//! `shared` holds the building blocks more than one planner uses.

pub(crate) mod contiguous;
pub(crate) mod craft;
pub(crate) mod eplb;
pub(crate) mod grace;
pub(crate) mod libra;
pub(crate) mod registry;
pub(crate) mod shared;

// The door: what front ends, benches and the results examples name of the
// planners, here and never by a planner's module path. A planner's id is
// `<NAME>_ID`; the registry's vocabulary is below.
pub use contiguous::{ID as CONTIGUOUS_ID, contiguous};
pub use craft::{
    BenefitTable, Craft, CraftOptions, CraftPlan, ID as CRAFT_ID, OBJECTIVE, Objective,
    REPLICAS_PER_GPU, ReplicaBudget, ReplicaCounts, craft, estimate_benefit, warm as warm_craft,
};
pub use eplb::{
    EplbConfig, EplbOutput, GROUPS, ID as EPLB_ID, REDUNDANT_EXPERTS, base,
    default_redundant_experts, eplb, groups, rebalance_experts, redundant_steps,
};
pub use grace::{
    Grace, GraceAnalysis, GraceOptions, ID as GRACE_ID, LayerGrouping, NONUNIFORMITY, REPLICATION,
    Ratio,
    affinity::{affinity as grace_affinity, affinity_all, utilisation as affinity_utilisation},
    grouping::{RatioPoint, load_grouping, utilisation as grouping_utilisation},
    replication::{Replication, predicted_loads as grace_predicted_loads},
    spectral::{SpectralEmbedding, spectral_clusters},
};
pub use libra::{
    Accuracy, DEFAULT_DEPTH, EXTRA_EXPERTS_PER_GPU, ID as LIBRA_ID, LibraOptions, LibraSchedule,
    Noisy, PREDICTOR, PathMemoBuild, PathTable, PredictedCounts, Predictor, Prefetcher, accuracy,
    build_predictor, libra_schedule, prefetch,
    time_model::{
        IB_NDR_GB_PER_S, LayerTime, NVLINK4_GB_PER_S, PCIE5_GB_PER_S, TimeModel,
        TimeReport as LibraTimeReport, time as libra_time,
    },
};
pub use registry::{
    CurvePoint, Needs, OptionInfo, OptionKind, OptionSpec, Planned, Planner, PlannerId,
    PlannerInfo, PlannerSpec, Predicted, Prepared, Settings, Unit, Value, all_options, describe,
    find, option, plan, prepare, prepare_by, registry,
};
pub use shared::{
    incremental::{Goal, Incremental, incremental},
    joint::{JointOptions, joint_layer, repair},
    oracle::{Optimum, optimal_layer},
    order::replication_order,
    placement::{capacity_aware_placement, peak_load, refine_placement},
};

/// Makes [`PLANNERS`] and [`SPECS`] from one list: each line a planner's
/// unit struct and its registry entry.
macro_rules! listed {
    ($($planner:path => $spec:path),* $(,)?) => {
        /// Every planner's registry entry, in `PLANNERS`' order, as data
        /// only: what a front end that lists, labels or checks planners
        /// reads without linking any planner's code (the page's main
        /// thread; the planning runs in its worker).
        pub static SPECS: &[&PlannerSpec] = &[$(&$spec),*];

        /// Every planner, in the order reports list them: the floor first,
        /// then by how much of the loads each uses.
        pub(crate) static PLANNERS: &[&dyn Planner] = &[$(&$planner),*];
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

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn planners_specs_example() {
        use moeplan::planners::{PLANNERS, SPECS};
        let ids: Vec<_> = SPECS.iter().map(|s| s.id).collect();
        assert_eq!(ids, PLANNERS.iter().map(|p| p.id()).collect::<Vec<_>>());
        for (s, p) in SPECS.iter().zip(PLANNERS) {
            let o = |x: &moeplan::planners::PlannerSpec| {
                x.options.iter().map(|o| o.name).collect::<Vec<_>>()
            };
            assert_eq!(
                (s.display, s.needs, o(s)),
                (p.display(), p.needs(), o(p.spec()))
            );
        }
    }
}
