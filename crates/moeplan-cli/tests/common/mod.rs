//! What the CLI's integration tests share: running the binary, reading its
//! JSON, a scratch folder per test file, and the real data beside the
//! repository (a failure under `CI=true` when it is missing, `SKIP` else).
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `moeplan ARGS`.
pub fn moeplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_moeplan"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Runs `moeplan ARGS`, which must succeed, and parses its stdout as JSON.
pub fn json_of(args: &[&str]) -> serde_json::Value {
    let o = moeplan(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Runs `moeplan ARGS`, which must be refused: exit code 2 and exactly one
/// `moeplan: error:` line, containing `needle`.
pub fn refused(args: &[&str], needle: &str) {
    let o = moeplan(args);
    let err = String::from_utf8_lossy(&o.stderr);
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("moeplan: error:"))
        .collect();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        errors.len() == 1 && errors[0].contains(needle),
        "{args:?}: wanted one error line with {needle:?}: {err}"
    );
}

/// `name` in a scratch folder of this test file (`tag`) and process.
pub fn tmp(tag: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("moeplan-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// `../shared/data/REL` if it exists; `None` (with a `SKIP` line) if not,
/// except under `CI=true`, where CI always has the data and a missing folder
/// is a failure.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel);
    if p.exists() {
        Some(p)
    } else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but {rel} is not beside the repository"
        );
        eprintln!("SKIP: {rel} not found beside the repository");
        None
    }
}

/// The core's test fixtures.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../moeplan/tests/fixtures")
}
