//! House rules, checked as ordinary tests.

use std::path::{Path, PathBuf};

fn core_sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut v);
    v.sort();
    v
}

#[test]
fn every_core_file_opens_with_a_doc_comment() {
    for p in core_sources() {
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.starts_with("//!"),
            "{} must open with a //! comment saying what it is",
            p.display()
        );
    }
}

/// The core's no-panic rule is enforced by clippy lints (CI runs clippy
/// with `-D warnings`); this checks the lints stay switched on.
#[test]
fn core_denies_panicking_lints() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    for lint in [
        "clippy::unwrap_used",
        "clippy::expect_used",
        "clippy::panic",
        "clippy::unreachable",
        "clippy::todo",
        "clippy::unimplemented",
    ] {
        assert!(lib.contains(lint), "lib.rs must deny {lint}");
    }
    assert!(
        lib.contains("not(test)"),
        "the lints apply to non-test code"
    );
}

#[test]
fn every_planner_is_in_the_index() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    for entry in std::fs::read_dir(root.join("src/planners")).unwrap() {
        let name = entry
            .unwrap()
            .path()
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if name == "mod" {
            continue;
        }
        assert!(
            lib.contains(&format!("planners::{name}")),
            "planner {name} is missing from lib.rs's index"
        );
    }
}

#[test]
fn ci_runs_the_readme_test_command() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let ci = std::fs::read_to_string(repo.join(".ci/run")).unwrap();
    assert!(readme.contains("cargo xtask test"));
    assert!(ci.lines().any(|l| l.trim() == "cargo xtask test"));
}
