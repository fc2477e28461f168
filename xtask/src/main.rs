//! Project chores, run as `cargo xtask <task>`:
//!
//! - `setup` — install what the build needs and is missing (the
//!   `wasm32-unknown-unknown` rustup target); skips what is present.
//! - `test`  — setup, then formatting, lints, every test, and the core built
//!   for wasm32. This is what CI runs.
//! - `run`   — the main job on the embedded default: build the CLI and plan a
//!   generated DeepSeek-V3 trace on 8 × 8 GPUs with every planner.
//! - `bench` — the criterion benchmarks.
//!
//! Plain `std::process::Command`: no dependencies, so it builds in seconds.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let task = std::env::args().nth(1).unwrap_or_default();
    let result = match task.as_str() {
        "setup" => setup(),
        "test" => setup().and_then(|_| test()),
        "run" => setup().and_then(|_| run_main_job()),
        "bench" => bench(),
        _ => {
            eprintln!("usage: cargo xtask <setup|test|run|bench>");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {task}: {e}");
            ExitCode::FAILURE
        }
    }
}

type Result<T = ()> = std::result::Result<T, String>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Runs a command in the repository root, echoing it first.
fn sh(program: &str, args: &[&str]) -> Result {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(root())
        .status()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({status})", args.join(" ")))
    }
}

fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn setup() -> Result {
    let installed = output("rustup", &["target", "list", "--installed"]).unwrap_or_default();
    if installed
        .lines()
        .any(|l| l.trim() == "wasm32-unknown-unknown")
    {
        eprintln!("setup: rustup target wasm32-unknown-unknown present");
    } else {
        sh("rustup", &["target", "add", "wasm32-unknown-unknown"])?;
    }
    Ok(())
}

fn test() -> Result {
    let c = cargo();
    sh(&c, &["fmt", "--all", "--", "--check"])?;
    sh(
        &c,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    sh(&c, &["test", "--workspace"])?;
    // The workspace build turns on the core's `parallel` feature (the CLI
    // asks for it); the core alone is the single-threaded path wasm uses.
    sh(&c, &["test", "-p", "moeplan", "--tests"])?;
    sh(
        &c,
        &[
            "build",
            "-p",
            "moeplan",
            "--target",
            "wasm32-unknown-unknown",
        ],
    )?;
    Ok(())
}

fn run_main_job() -> Result {
    let c = cargo();
    sh(&c, &["build", "--release", "-p", "moeplan-cli"])?;
    let bin = root().join("target/release/moeplan");
    let bin = bin.to_string_lossy();
    sh(&bin, &["inspect"])?;
    sh(
        &bin,
        &[
            "compare",
            "--nodes",
            "8",
            "--gpus-per-node",
            "8",
            "--groups",
            "8",
            "--holdout",
            "0.25",
        ],
    )
}

fn bench() -> Result {
    sh(&cargo(), &["bench", "-p", "moeplan"])
}
