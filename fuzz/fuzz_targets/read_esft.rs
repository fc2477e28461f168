//! ESFT's token-level layer files: the input is split at NUL bytes into up
//! to four files named expert_weights_1..4.txt.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let files: Vec<(String, Vec<u8>)> = data
        .split(|&b| b == 0)
        .take(4)
        .enumerate()
        .map(|(i, f)| (format!("expert_weights_{}.txt", i + 1), f.to_vec()))
        .collect();
    if let Ok(t) = moeplan::formats::read_esft(&files, 64, 6, &mut moeplan::Meter::new(moeplan::ReadLimits::mib(64))) {
        let _ = t.to_load_trace(7);
    }
});
