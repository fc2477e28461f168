//! Building blocks more than one planner (or the page's oracle) uses:
//! the multiple-choice `knapsack` over layers, the replication
//! [`order`], capacity-aware [`placement`] and its refinement, the
//! [`joint`] search of copy counts and placement, the exact [`oracle`]
//! and its programme (`lp`), the per-layer map (`layers`), and the
//! [`incremental`] re-plan from a served plan and the STAIR-like one
//! (`stair`).

pub(crate) mod incremental;
pub(crate) mod joint;
pub(crate) mod knapsack;
pub(crate) mod layers;
pub(crate) mod lp;
pub(crate) mod oracle;
pub(crate) mod order;
pub(crate) mod packing;
pub(crate) mod placement;
pub(crate) mod stair;
