//! Zip containers (`.npz`, torch.save `.pt`): central directories, local
//! headers, declared sizes, compression methods and members that inflate
//! past the budget. Any bytes give a trace or an error within the 64 MiB
//! budget, never a panic; what a member expands to is counted while
//! inflating, so a zip bomb stops at the limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moeplan::formats::{npy, torch};
use moeplan::{ReadLimits, Meter};

fuzz_target!(|data: &[u8]| {
    let _ = npy::read_npz(data, &mut Meter::new(ReadLimits::mib(64)));
    let _ = torch::read_pt(data, &mut Meter::new(ReadLimits::mib(64)));
});
