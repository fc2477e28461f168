//! Generated workloads: seeded per-batch expert counts shaped like a
//! model preset ([`generator`], the page's default), and token routes with
//! planted co-activation ([`token_generator`]). The same seed gives the
//! same trace on every machine.

pub mod generator;
pub mod token_generator;
