//! The planners, one file each, named after the method.

pub mod contiguous;
pub mod craft;
pub mod eplb;

pub use contiguous::contiguous;
pub use craft::{Budget, Craft, CraftOptions, craft};
pub use eplb::{EplbConfig, base, eplb};
