//! Project chores, run as `cargo xtask <task>`:
//!
//! - `setup` — install what the build needs and is missing, skipping what is
//!   present at the right version: the `wasm32-unknown-unknown` rustup
//!   target, wasm-bindgen-cli 0.2.130 and trunk 0.21.14 (built from
//!   crates.io, never downloaded prebuilt), Debian's chromium and
//!   chromium-driver, and the browser tests' npm packages (playwright-core,
//!   which never downloads a browser).
//! - `test`  — setup, then formatting, lints, every native test, the wasm
//!   surface's tests in headless Chromium, the page built with trunk
//!   (offline) and its end-to-end test. This is what CI runs.
//! - `run`   — the main job: build the planner page and serve it on
//!   http://127.0.0.1:8080 (it opens on a generated DeepSeek-V3 trace).
//! - `cli`   — the same job headless: plan the generated default with every
//!   planner from the command line.
//! - `bench` — the criterion benchmarks.
//! - `fuzz [SECONDS] [TARGET]` — every cargo-fuzz target (or one) for
//!   SECONDS each (default 60) under a 2 GiB RSS limit, seeded from
//!   `../shared/data`, the fixtures and `fuzz/seeds/`. Needs
//!   `cargo install cargo-fuzz`; runs on the stable toolchain through
//!   `RUSTC_BOOTSTRAP=1` (libFuzzer's flags are nightly-only). Not part of CI.
//!
//! Plain `std::process::Command`: no dependencies, so it builds in seconds.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let task = std::env::args().nth(1).unwrap_or_default();
    let result = match task.as_str() {
        "setup" => setup(),
        "test" => setup().and_then(|_| test()),
        "run" => setup().and_then(|_| serve()),
        "cli" => setup().and_then(|_| run_cli_job()),
        "bench" => bench(),
        "fuzz" => fuzz(
            std::env::args()
                .nth(2)
                .and_then(|s| s.parse().ok())
                .unwrap_or(60),
        ),
        _ => {
            eprintln!("usage: cargo xtask <setup|test|run|cli|bench|fuzz [seconds]>");
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
    sh_env(program, args, &[])
}

fn sh_env(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
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

const WASM_BINDGEN: &str = "0.2.130";
const TRUNK: &str = "0.21.14";
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

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
    let c = cargo();
    let has = |tool: &str, version: &str| {
        output(tool, &["--version"]).is_some_and(|v| v.split_whitespace().any(|w| w == version))
    };
    if has("wasm-bindgen", WASM_BINDGEN) {
        eprintln!("setup: wasm-bindgen {WASM_BINDGEN} present");
    } else {
        sh(
            &c,
            &["install", "wasm-bindgen-cli", "--version", WASM_BINDGEN],
        )?;
    }
    if has("trunk", TRUNK) {
        eprintln!("setup: trunk {TRUNK} present");
    } else {
        sh(&c, &["install", "trunk", "--version", TRUNK, "--locked"])?;
    }
    if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
        eprintln!("setup: chromium and chromedriver present");
    } else {
        sh("apt-get", &["update"])?;
        sh_env(
            "apt-get",
            &[
                "install",
                "-y",
                "--no-install-recommends",
                "chromium",
                "chromium-driver",
            ],
            &[("DEBIAN_FRONTEND", "noninteractive")],
        )?;
    }
    if root().join("tests/node_modules/playwright-core").exists() {
        eprintln!("setup: playwright-core present");
    } else {
        sh(
            "npm",
            &["ci", "--prefix", "tests", "--no-audit", "--no-fund"],
        )?;
    }
    Ok(())
}

fn test() -> Result {
    // CI always runs with the real data beside the repository; a run that
    // lacks it would pass its real-data tests vacuously.
    let shared = root().join("../shared/data");
    if std::env::var("CI").as_deref() == Ok("true") && !shared.is_dir() {
        return Err(format!(
            "CI=true but {} is missing: the real-data tests cannot run",
            shared.display()
        ));
    }
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
    // The JavaScript surface, in headless Chromium.
    sh_env(
        &c,
        &[
            "test",
            "-p",
            "moeplan-wasm",
            "--target",
            "wasm32-unknown-unknown",
        ],
        &[("CHROMEDRIVER", CHROMEDRIVER)],
    )?;
    // The page, built as a user would, with no network.
    sh("trunk", &["build", "--release", "--offline"])?;
    sh("node", &["tests/e2e.mjs"])?;
    Ok(())
}

fn serve() -> Result {
    eprintln!("serving the planner page on http://127.0.0.1:8080 (Ctrl-C to stop)");
    sh("trunk", &["serve", "--release", "--offline"])
}

fn run_cli_job() -> Result {
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

/// What each fuzz target is seeded with: folders whose files are copied
/// into its corpus (missing folders are skipped), and the longest input.
const FUZZ_TARGETS: &[(&str, &[&str], usize)] = &[
    (
        "read_trace",
        &[
            "crates/moeplan/tests/fixtures/broken",
            "crates/moeplan/tests/fixtures/numpy",
            "crates/moeplan/tests/fixtures/torch",
            "../shared/data/sglang-deepseek-v3",
            "../shared/data/harmoeny-qwen1.5-moe",
        ],
        1 << 16,
    ),
    (
        "read_plans",
        &["crates/moeplan/tests/fixtures/broken"],
        1 << 16,
    ),
    (
        "read_esft",
        &["../shared/data/esft-deepseek-v2-lite/intent"],
        1 << 16,
    ),
    ("read_pickle", &["fuzz/seeds/read_pickle"], 1 << 18),
    (
        "npy_header",
        &[
            "crates/moeplan/tests/fixtures/numpy",
            "fuzz/seeds/npy_header",
        ],
        1 << 16,
    ),
    (
        "zip_container",
        &[
            "crates/moeplan/tests/fixtures/numpy",
            "crates/moeplan/tests/fixtures/torch",
            "fuzz/seeds/zip_container",
        ],
        1 << 20,
    ),
];

/// Runs every fuzz target for `seconds`, each under an RSS limit so that a
/// reader escaping its budget is a finding (libFuzzer reports "out-of-memory"
/// and saves the input) rather than a machine brought down.
fn fuzz(seconds: u64) -> Result {
    let only = std::env::args().nth(3);
    for &(target, seeds, max_len) in FUZZ_TARGETS {
        if only.as_deref().is_some_and(|o| o != target) {
            continue;
        }
        let corpus = root().join("fuzz/corpus").join(target);
        std::fs::create_dir_all(&corpus).map_err(|e| e.to_string())?;
        for dir in seeds {
            for entry in std::fs::read_dir(root().join(dir))
                .into_iter()
                .flatten()
                .flatten()
            {
                if entry.path().is_file() && entry.file_name() != "EXPECTED" {
                    let _ = std::fs::copy(entry.path(), corpus.join(entry.file_name()));
                }
            }
        }
        let time = format!("-max_total_time={seconds}");
        let len = format!("-max_len={max_len}");
        eprintln!("$ cargo fuzz run -O {target} -- {time} {len} -rss_limit_mb=2048");
        let status = Command::new("cargo")
            .args(["fuzz", "run", "-O", target, "--", &time, &len])
            .args(["-rss_limit_mb=2048", "-malloc_limit_mb=2048", "-timeout=20"])
            .env("RUSTC_BOOTSTRAP", "1")
            .current_dir(root().join("fuzz"))
            .status()
            .map_err(|e| format!("cannot start cargo fuzz (cargo install cargo-fuzz): {e}"))?;
        if !status.success() {
            let artifacts = root().join("fuzz/artifacts").join(target);
            let found = std::fs::read_dir(&artifacts).is_ok_and(|mut d| d.next().is_some());
            return Err(if found {
                format!(
                    "fuzz target {target} found a crash, timeout or blow-up: see {}",
                    artifacts.display()
                )
            } else {
                format!(
                    "cargo fuzz failed for {target} before fuzzing (see the build output above)"
                )
            });
        }
    }
    Ok(())
}

fn bench() -> Result {
    sh(&cargo(), &["bench", "-p", "moeplan"])
}
