//! Raw pickles through the restricted unpickler of torch.save dumps, behind
//! no zip: a mutated `data.pkl` inside a zip fails its CRC check, so
//! `zip_container` never reaches the unpickler. Memo references, marks,
//! nesting, cycles, persistent ids and tensor views as an attacker writes
//! them; every storage reads as the input itself, so tensor decoding is
//! reached too, and a legacy (non-zip) torch.save stream is read whole. Any
//! bytes give a result or an error within the 64 MiB budget, never a panic,
//! a stack overflow or an allocation the budget did not allow.
//! Seeds: `fuzz/seeds/read_pickle`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moeplan::{ReadLimits, Meter};

fuzz_target!(|data: &[u8]| {
    let _ = moeplan::formats::read_pickle(data, &mut Meter::new(ReadLimits::mib(64)));
    // The same bytes after a legacy torch.save stream's first three pickles
    // (magic number, protocol 1001, an empty sys info), so mutations reach
    // the storage keys and raw storages without rediscovering the magic.
    let mut legacy =
        b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.\x80\x02M\xe9\x03.\x80\x02}."
            .to_vec();
    legacy.extend_from_slice(data);
    let _ = moeplan::formats::read_pickle(&legacy, &mut Meter::new(ReadLimits::mib(64)));
});
