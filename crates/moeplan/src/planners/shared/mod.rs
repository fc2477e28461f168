//! Building blocks more than one planner (or the page's oracle) uses:
//! the multiple-choice `knapsack` over layers, the replication
//! [`order`], capacity-aware [`placement`] and its refinement, the
//! [`joint`] search of copy counts and placement, the exact [`oracle`]
//! and its programme (`lp`), the per-layer map (`layers`), and the
//! [`incremental`] re-plan from a served plan and the STAIR-like one
//! (`stair`).

pub mod incremental;
pub mod joint;
pub(crate) mod knapsack;
pub(crate) mod layers;
pub(crate) mod lp;
pub mod oracle;
pub mod order;
pub mod packing;
pub mod placement;
pub(crate) mod stair;
