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

/// Runs `moeplan ARGS`, which must succeed, and parses its stdout as JSON;
/// a `--json` output must be valid under its schema in `schemas/`.
pub fn json_of(args: &[&str]) -> serde_json::Value {
    let o = moeplan(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = serde_json::from_slice(&o.stdout).unwrap();
    if let Some(schema) = schema_for(args) {
        assert_valid(schema, &v);
    }
    v
}

/// The schema (a file of `schemas/`) of what `moeplan ARGS` prints, when
/// it prints JSON (`--json`).
pub fn schema_for(args: &[&str]) -> Option<&'static str> {
    if !args.contains(&"--json") {
        return None;
    }
    Some(match *args.first()? {
        "inspect" if args.contains(&"--variation") => "moeplan.variation.schema.json",
        "inspect" => "moeplan.inspect.schema.json",
        "plan" => "moeplan.plan-run.schema.json",
        "eval" => "moeplan.eval.schema.json",
        "compare" => "moeplan.compare.schema.json",
        "sweep" => "moeplan.sweep.schema.json",
        "replay" => "moeplan.replay.schema.json",
        "cross" => "moeplan.cross.schema.json",
        "calibrate" => "moeplan.calibrate.schema.json",
        "hardware" => "moeplan.hardware-list.schema.json",
        "planners" => "moeplan.planners.schema.json",
        _ => return None,
    })
}

/// The repository's `schemas/`.
pub fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas")
}

/// `v` is valid under `schemas/FILE`, every other schema there registered
/// under its `$id` (a `$ref` to a sibling resolves offline); the first
/// errors are the message.
pub fn assert_valid(file: &str, v: &serde_json::Value) {
    let read = |name: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(schemas_dir().join(name))
            .unwrap_or_else(|e| panic!("schemas/{name}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("schemas/{name}: {e}"))
    };
    let mut registry = jsonschema::Registry::new();
    for entry in std::fs::read_dir(schemas_dir()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == file || !name.ends_with(".schema.json") {
            continue;
        }
        let schema = read(&name);
        let id = schema["$id"].as_str().unwrap_or(&name).to_string();
        registry = registry.add(id, schema).expect("a schema registers");
    }
    let registry = registry.prepare().expect("the schemas resolve");
    let validator = jsonschema::options()
        .offline()
        .with_registry(&registry)
        .build(&read(file))
        .unwrap_or_else(|e| panic!("schemas/{file} is not a valid schema: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(v)
        .take(5)
        .map(|e| format!("{e} (at {})", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not valid under schemas/{file}:\n{}",
        errors.join("\n")
    );
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
