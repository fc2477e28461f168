//! Embeds the core's broken-input folder for the browser tests: wasm tests
//! cannot read files, so every fixture listed in `EXPECTED` becomes an
//! `include_bytes!` entry of `$OUT_DIR/broken_fixtures.rs` (only the tests
//! include it; the library never does).

use std::fmt::Write;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dir = manifest.join("../moeplan/tests/fixtures/broken");
    println!("cargo:rerun-if-changed={}", dir.display());
    let expected = std::fs::read_to_string(dir.join("EXPECTED")).unwrap_or_default();
    let mut out = String::from("pub const BROKEN: &[(&str, &[u8], &str)] = &[\n");
    for line in expected.lines().filter(|l| !l.starts_with('#')) {
        if let Some((file, needle)) = line.split_once('\t') {
            let path = dir.join(file);
            let _ = writeln!(
                out,
                "    ({file:?}, include_bytes!({:?}), {needle:?}),",
                path.display().to_string()
            );
        }
    }
    out.push_str("];\n");
    let dest =
        PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("broken_fixtures.rs");
    if let Err(e) = std::fs::write(&dest, out) {
        println!("cargo:warning=cannot write {}: {e}", dest.display());
    }
}
