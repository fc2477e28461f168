//! The core's tests across modules: planners against oracles and papers,
//! the judge against brute force, every format and engine file, real data.
//! They live inside the crate so that what only they reach stays
//! `pub(crate)`: the door (`lib.rs`) is what the front ends use.

mod common;
#[path = "../../examples/common/token_stats.rs"]
mod token_stats;

mod calibrate_hardware;
mod calibration;
mod cost;
mod craft;
mod engine_files;
mod eplb;
mod eval;
mod formats;
mod generator;
mod grace;
mod grace_routing;
mod grace_spectral;
mod hostile_time;
mod incremental;
mod libra;
mod libra_time;
mod messages;
mod migration;
mod oracle;
mod plan_for_time;
mod serving;
mod sim;
mod token_generator;
mod torch;
mod trtllm;
