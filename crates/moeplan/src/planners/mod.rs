//! The planners, one file each, named after the method.

pub mod contiguous;
pub mod eplb;

pub use contiguous::contiguous;
pub use eplb::{EplbConfig, base, eplb};
