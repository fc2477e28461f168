//! Zip containers (`.npz`, torch.save `.pt`): central directories, local
//! headers, declared sizes, compression methods and members that inflate
//! past the budget. Any bytes give a trace or an error within the 64 MiB
//! budget, never a panic; what a member expands to is counted while
//! inflating, so a zip bomb stops at the limit. Read through the door the
//! product reads by (`read_trace`), which sends a zip to the `.npz` or the
//! torch.save reader by its members.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moeplan::ReadLimits;
use moeplan::formats::{self, ReadOptions};

fuzz_target!(|data: &[u8]| {
    let options = ReadOptions {
        budget: ReadLimits::mib(64),
        ..Default::default()
    };
    let _ = formats::read_trace(data, &options);
});
