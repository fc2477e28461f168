//! GRACE-MoE (../shared/seeds/003_fb0469baf9896969.txt): affinity grouping
//! (§4.1, Algorithms 1–2), skew-driven replication (§4.2, Eq. 2) and
//! locality-aware routing (§4.3, Algorithms 3–4, as dispatch rules of the
//! simulator). Work in progress: not yet in `PLANNERS`.

pub mod affinity;
pub mod grouping;
pub mod replication;
pub mod spectral;
