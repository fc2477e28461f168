//! `.npy` headers and data as an attacker writes them: magic, version,
//! header length, the dict's descr / fortran_order / shape, and data that may
//! not match the shape. Any bytes give an array or an error within the
//! 64 MiB budget, never a panic or an allocation the data does not back.
//! Seeds: `crates/moeplan/tests/fixtures/numpy` and the broken `.npy` files.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moeplan::{ReadLimits, Meter};

fuzz_target!(|data: &[u8]| {
    let mut meter = Meter::new(ReadLimits::mib(64));
    let _ = moeplan::formats::fuzz_header(data, &mut meter);
    // The same bytes behind the magic, so mutations need not rediscover it.
    let mut framed = b"\x93NUMPY\x01\x00".to_vec();
    framed.extend_from_slice(data);
    let mut meter = Meter::new(ReadLimits::mib(64));
    let _ = moeplan::formats::fuzz_header(&framed, &mut meter);
});
