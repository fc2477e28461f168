//! Project chores, run as `cargo xtask <task>`:
//!
//! - `setup` — install what the build needs and is missing, skipping what is
//!   present at the right version: the `wasm32-unknown-unknown` rustup
//!   target, wasm-bindgen-cli 0.2.130 and trunk 0.21.14 (built from
//!   crates.io, never downloaded prebuilt), Debian's chromium and
//!   chromium-driver and firefox-esr, and the browser tests' npm packages
//!   (playwright-core and puppeteer-core, which never download a browser,
//!   and typescript), and mdBook 0.5.4 (built from crates.io with its search
//!   only: no server, no file watcher).
//! - `test`  — setup, then formatting, lints, every native test, the
//!   results tables, the page's heaviest changes counted in instructions
//!   against their ceilings (`instructions.rs`), the wasm surface's tests in
//!   headless Chromium, `dist`, the browser tests of what it built
//!   (`tests/e2e.mjs` the page, `embed.mjs` the docs embed, `onefile.mjs`
//!   the one-file page from `file://` in Chromium and `firefox.mjs` in
//!   Firefox, `present.mjs` the presenter's features, `api.mjs` the
//!   JavaScript package in Node, its errors in the caller's names) and the
//!   JavaScript package's type check; then each phase's wall-clock time. No check in it
//!   depends on the machine's speed beyond a hang (an answer that never
//!   comes, a median over 5× its budget). This is what CI runs.
//! - `instructions [--write]` — the page's heaviest changes counted under
//!   valgrind; `--write` writes docs/speed.md's table of them (the counts
//!   and the ceilings `test` holds them to).
//! - `dist [--out DIR]` — the one build of everything a user hosts, into
//!   DIR (default `dist/`), offline: the page (trunk, unhashed names and
//!   relative URLs, so it works from any folder), the docs example with its
//!   module in `DIR/embed/`, the one-file page `DIR/moeplan.html` (CSS, JS,
//!   every wasm binary and both workers inlined: opens from `file://`), and
//!   the JavaScript package in `DIR/pkg/`, and the book in `DIR/book/`;
//!   then each file's size and gzip size.
//! - `book [--out DIR]` — the book alone (`book/`, mdBook) into `DIR/book/`
//!   (default `dist/book/`), its live widgets the docs embed of an earlier
//!   `dist` into the same DIR, copied beside it.
//! - `results` — writes the book's generated pages anew from the code
//!   (`book/src/reference/`: every CLI command's help, the presets, the
//!   planners): the tests that compare them with the committed pages, run
//!   with `MOEPLAN_BLESS=1`; and every results table marked in `docs/` and
//!   `book/src/` (`<!-- results EXAMPLE N -->`), from the examples that
//!   make them on `../shared/data` (`results.rs`). `test` runs the same
//!   tests and examples and compares, so a stale page or table fails CI;
//!   `results --check` compares the tables alone.
//! - `run`   — the main job: build the planner page and serve it on
//!   http://127.0.0.1:8080 (it opens on a generated DeepSeek-V3 trace).
//! - `cli`   — the same job headless: plan the generated default with every
//!   planner from the command line.
//! - `bench` — the criterion benchmarks; `bench page` — the page built as
//!   `dist` builds it, every change timed in Chromium (`tests/e2e.mjs
//!   --bench`) and held to its budget (p50 / p95), with the machine and its
//!   load: for a person on a quiet machine, not CI.
//! - `screenshot` — `docs/screenshot.png` made anew from the page `dist`
//!   builds (the e2e's screenshot section; `test` makes the same picture in
//!   `target/screenshot.png` on every run).
//! - `fuzz [SECONDS] [TARGET]` — every cargo-fuzz target (or one) for
//!   SECONDS each (default 60) under a 2 GiB RSS limit, seeded from
//!   `../shared/data`, the fixtures and `fuzz/seeds/`. Needs
//!   `cargo install cargo-fuzz`; runs on the stable toolchain through
//!   `RUSTC_BOOTSTRAP=1` (libFuzzer's flags are nightly-only). Not part of CI.
//!
//! Plain `std::process::Command`: no dependencies, so it builds in seconds.

mod instructions;
mod onefile;
mod pkg;
mod results;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let task = std::env::args().nth(1).unwrap_or_default();
    let result = match task.as_str() {
        "setup" => setup(),
        "test" => {
            let mut phases = Phases::default();
            let result = phases
                .run("setup (install what is missing)", setup)
                .and_then(|_| test(&mut phases));
            phases.print();
            result
        }
        "dist" => match out_arg() {
            Ok(out) => setup().and_then(|_| dist(&out)),
            Err(e) => Err(e),
        },
        "book" => match out_arg() {
            Ok(out) => setup().and_then(|_| book(&out)),
            Err(e) => Err(e),
        },
        "results" => match results_args() {
            Ok((true, only)) => results::results(true, only.as_deref()),
            Ok((false, None)) => results(),
            Ok((false, only)) => results::results(false, only.as_deref()),
            Err(e) => Err(e),
        },
        "run" => setup().and_then(|_| serve()),
        "cli" => setup().and_then(|_| run_cli_job()),
        "instructions" => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            let write = args.iter().any(|a| a == "--write");
            let only = args.iter().find(|a| *a != "--write").map(String::as_str);
            instructions::run(only, write)
        }
        "bench" => match std::env::args().nth(2).as_deref() {
            None => bench(),
            Some("page") => setup().and_then(|_| bench_page()),
            Some(other) => Err(format!(
                "unknown bench {other:?}; usage: cargo xtask bench [page]"
            )),
        },
        "screenshot" => setup().and_then(|_| screenshot()),
        "fuzz" => fuzz(
            std::env::args()
                .nth(2)
                .and_then(|s| s.parse().ok())
                .unwrap_or(60),
        ),
        _ => {
            eprintln!(
                "usage: cargo xtask <setup|test|dist [--out DIR]|book [--out DIR]|results [--check] [--only NAME,…]|instructions [routes|counts] [--write]|run|cli|bench [page]|screenshot|fuzz [seconds]>"
            );
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

/// `--skip` filters for the core's cross-module test files (`tests::NAME::`
/// under `crates/moeplan/src/tests/`) other than `kept`.
fn core_suites_skipped(kept: &[&str]) -> Result<Vec<String>> {
    let dir = root().join("crates/moeplan/src/tests");
    let mut skips = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs") && name != "mod" && !kept.contains(&name) {
            skips.push(format!("tests::{name}::"));
        }
    }
    skips.sort();
    Ok(skips)
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
/// mdBook 0.5.x builds with this toolchain (rust-version 1.88).
const MDBOOK: &str = "0.5.4";
const CHROMIUM: &str = "/usr/bin/chromium";
const FIREFOX: &str = "/usr/bin/firefox-esr";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const VALGRIND: &str = "/usr/bin/valgrind";
const CALLGRIND_H: &str = "/usr/include/valgrind/callgrind.h";

fn setup() -> Result {
    // What downloads (Debian's browsers and valgrind, the npm packages)
    // runs beside what compiles (the cargo tools): on a fresh machine of
    // two cores the downloads left a core idle for minutes.
    let mut background = Vec::new();
    // Debian's browsers: Chromium for every browser test, Firefox ESR for
    // the one-file page's (the talks' file must open in both).
    let mut missing = Vec::new();
    if !(Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists()) {
        missing.extend(["chromium", "chromium-driver"]);
    }
    if !Path::new(FIREFOX).exists() {
        missing.push("firefox-esr");
    }
    // valgrind counts the page's changes in instructions, and its headers
    // build the client requests (`crabgrind`); every machine kind has it.
    if !(Path::new(VALGRIND).exists() && Path::new(CALLGRIND_H).exists()) {
        missing.push("valgrind");
    }
    if missing.is_empty() {
        eprintln!("setup: chromium, chromedriver, firefox-esr and valgrind present");
    } else {
        let script = format!(
            "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {}",
            missing.join(" ")
        );
        eprintln!("$ {script} (in the background)");
        background.push((
            "apt-get",
            Command::new("sh")
                .args(["-c", &script])
                .spawn()
                .map_err(|e| format!("cannot start apt-get: {e}"))?,
        ));
    }
    let modules = root().join("tests/node_modules");
    if ["playwright-core", "puppeteer-core", "typescript"]
        .iter()
        .all(|m| modules.join(m).exists())
    {
        eprintln!("setup: playwright-core, puppeteer-core and typescript present");
    } else {
        eprintln!("$ npm ci --prefix tests --no-audit --no-fund (in the background)");
        background.push((
            "npm ci",
            Command::new("npm")
                .args(["ci", "--prefix", "tests", "--no-audit", "--no-fund"])
                .spawn()
                .map_err(|e| format!("cannot start npm: {e}"))?,
        ));
    }
    let compiled = compile_tools();
    let mut failed = Vec::new();
    for (name, mut child) in background {
        match child.wait() {
            Ok(status) if status.success() => {}
            Ok(status) => failed.push(format!("{name} failed ({status})")),
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    }
    compiled?;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// The rustup target and the cargo tools at their pinned versions.
fn compile_tools() -> Result {
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
    // The three tools are built once per machine and do little work here
    // (trunk runs cargo and wasm-bindgen; wasm-bindgen rewrites four
    // binaries; mdBook renders one book): built at opt-level 1, without LTO
    // (trunk's own release profile is fat LTO in one codegen unit), the
    // cold install was 548 s of a 45.2-minute CI run on 2 cores at
    // opt-level 3 (docs/speed.md, "Cold CI").
    let quick = [
        ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1"),
        ("CARGO_PROFILE_RELEASE_LTO", "false"),
        ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16"),
    ];
    let has = |tool: &str, version: &str| {
        output(tool, &["--version"]).is_some_and(|v| v.split_whitespace().any(|w| w == version))
    };
    if has("wasm-bindgen", WASM_BINDGEN) {
        eprintln!("setup: wasm-bindgen {WASM_BINDGEN} present");
    } else {
        // Without its default TLS backend (rustls and ring: 40 s of the
        // cold install on 2 cores): the test runner is given Debian's
        // chromedriver and never downloads one.
        sh_env(
            &c,
            &[
                "install",
                "wasm-bindgen-cli",
                "--version",
                WASM_BINDGEN,
                "--no-default-features",
            ],
            &quick,
        )?;
    }
    if has("trunk", TRUNK) {
        eprintln!("setup: trunk {TRUNK} present");
    } else {
        // Without its default features (the update check and TLS:
        // `trunk build --offline` with wasm-bindgen on the PATH downloads
        // nothing); with cargo's release defaults instead of its fat LTO,
        // 395 -> 332 s cold on 2 cores.
        sh_env(
            &c,
            &[
                "install",
                "trunk",
                "--version",
                TRUNK,
                "--locked",
                "--no-default-features",
            ],
            &quick,
        )?;
    }
    // `mdbook --version` says `mdbook v0.5.4`.
    if output("mdbook", &["--version"]).is_some_and(|v| {
        v.split_whitespace()
            .any(|w| w.trim_start_matches('v') == MDBOOK)
    }) {
        eprintln!("setup: mdbook {MDBOOK} present");
    } else {
        // The book needs its search, not `mdbook serve` or `watch`.
        sh_env(
            &c,
            &[
                "install",
                "mdbook",
                "--version",
                MDBOOK,
                "--no-default-features",
                "--features",
                "search",
                "--locked",
            ],
            &quick,
        )?;
    }
    Ok(())
}

/// Each phase of `test` with its wall-clock time, printed at the end (pass
/// or fail) so the next slow phase is visible in CI's log.
#[derive(Default)]
struct Phases {
    done: Vec<(String, std::time::Duration, bool)>,
    start: Option<std::time::Instant>,
}

impl Phases {
    fn run(&mut self, name: &str, phase: impl FnOnce() -> Result) -> Result {
        let t = std::time::Instant::now();
        self.start.get_or_insert(t);
        let result = phase();
        self.done
            .push((name.to_string(), t.elapsed(), result.is_ok()));
        result
    }

    fn print(&self) {
        let total = self.start.map(|t| t.elapsed()).unwrap_or_default();
        eprintln!("\nxtask test: phases (wall clock)");
        for (name, took, ok) in &self.done {
            let mark = if *ok { "" } else { "  FAILED" };
            eprintln!("{:>8.1} s  {name}{mark}", took.as_secs_f64());
        }
        eprintln!(
            "{:>8.1} s  in all ({:.1} min)",
            total.as_secs_f64(),
            total.as_secs_f64() / 60.0
        );
    }
}

fn test(phases: &mut Phases) -> Result {
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
    phases.run("fmt", || sh(&c, &["fmt", "--all", "--", "--check"]))?;
    // The work of the page's heaviest changes, in instructions: counted
    // under valgrind in the background from the start (the counts do not
    // depend on what else runs; the route default's setup alone takes ten
    // minutes there, which the builds and tests below hide), checked at
    // the end.
    let mut counting = None;
    phases.run("instruction counts: build, start", || {
        counting = Some(instructions::start(None)?);
        Ok(())
    })?;
    phases.run("clippy", || {
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
        )
    })?;
    // Every doc link resolves and every doc comment parses: a stale link is
    // a claim about code that is gone.
    // The CLI's binary is also named `moeplan`: documented with the
    // libraries, cargo warns that one page overwrites the other.
    phases.run("docs (warnings denied)", || {
        let deny = [("RUSTDOCFLAGS", "-D warnings")];
        sh_env(&c, &["doc", "--workspace", "--no-deps", "--lib"], &deny)?;
        sh_env(
            &c,
            &["doc", "--workspace", "--no-deps", "--bin", "moeplan"],
            &deny,
        )
    })?;
    phases.run("native tests (workspace)", || {
        sh(&c, &["test", "--workspace"])
    })?;
    // The workspace build turns on the core's `parallel` feature (the CLI
    // asks for it); the core alone is the single-threaded path wasm uses.
    // The feature changes two maps only (`planners/shared/layers.rs`, the
    // per-layer planners' and generators'; `judge/migration.rs`'s
    // relabelling): the unit tests and the integration tests that run
    // them cover it. Every integration test again took 212 s of a cold run
    // for no other code, and the wasm suite and the page's run the
    // single-threaded build in the browser anyway. The cross-module tests
    // (`src/tests/`) are in the lib's test binary: all but these four are
    // skipped, so a new file there runs once, in the workspace phase.
    phases.run("native tests (the core single-threaded)", || {
        let skips = core_suites_skipped(&["migration", "craft", "grace", "serving"])?;
        let mut args = vec!["test", "-p", "moeplan", "--lib", "--"];
        for s in &skips {
            args.extend(["--skip", s.as_str()]);
        }
        sh(&c, &args)
    })?;
    // The results tables in the pages are what the examples make now.
    phases.run("results tables", || results::results(true, None))?;
    // The JavaScript surface, in headless Chromium.
    phases.run("wasm tests (Chromium)", || {
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
        )
    })?;
    // Everything a user hosts, built as a user would, with no network, and
    // each artefact in a browser.
    let out = root().join("dist");
    phases.run("dist", || dist(&out))?;
    let dir = out.to_string_lossy();
    let timings = root().join("target/e2e-timings.json");
    let timings = timings.to_string_lossy();
    for test in BROWSER_TESTS {
        phases.run(test, || {
            if *test == "tests/e2e.mjs" {
                // The screenshot of the current page, as the README and the
                // book show it (`cargo xtask screenshot` puts it there).
                let shot = root().join("target/screenshot.png");
                let shot = shot.to_string_lossy();
                sh(
                    "node",
                    &[
                        test,
                        "--dist",
                        &dir,
                        "--timings",
                        &timings,
                        "--screenshot",
                        &shot,
                    ],
                )
            } else {
                sh("node", &[test, "--dist", &dir])
            }
        })?;
    }
    phases.run("tsc (the JS API's types)", || pkg::typecheck(&root()))?;
    phases.run("instruction counts: wait, check", || match counting {
        Some(c) => instructions::check(c),
        None => Err("the instruction counts did not start".into()),
    })
}

/// `bench page`: the page built as `dist` builds it, then the e2e's timed
/// sections alone, each change held to its budget (p50 / p95); the machine
/// and its load are printed with the table, and the figures written to
/// `target/page-bench.json`. For a person on a quiet machine, not CI.
/// `docs/screenshot.png` (the README's and the book's picture of the page)
/// made anew from the page as it is: `dist`, then the e2e's screenshot
/// section alone (`cargo xtask test` makes the same one in `target/`).
fn screenshot() -> Result {
    let out = root().join("dist");
    dist(&out)?;
    let shot = root().join("docs/screenshot.png");
    sh_env(
        "node",
        &[
            "tests/e2e.mjs",
            "--dist",
            &out.to_string_lossy(),
            "--screenshot",
            &shot.to_string_lossy(),
        ],
        &[("E2E_ONLY", "screenshot")],
    )?;
    eprintln!("screenshot: wrote {} (commit it)", shot.display());
    Ok(())
}

fn bench_page() -> Result {
    let out = root().join("dist");
    dist(&out)?;
    let timings = root().join("target/page-bench.json");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!(
        "bench page: load average before it {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    sh(
        "node",
        &[
            "tests/e2e.mjs",
            "--dist",
            &out.to_string_lossy(),
            "--bench",
            "--timings",
            &timings.to_string_lossy(),
        ],
    )?;
    eprintln!("bench page: figures in {}", timings.display());
    Ok(())
}

/// The tests of `dist`'s artefacts, each taking `--dist DIR`: in the
/// browsers, and the JavaScript package in Node (`api.mjs`).
const BROWSER_TESTS: &[&str] = &[
    "tests/e2e.mjs",
    "tests/book.mjs",
    "tests/embed.mjs",
    "tests/onefile.mjs",
    "tests/firefox.mjs",
    "tests/present.mjs",
    "tests/api.mjs",
];

/// `--out DIR` after the task, else `dist` in the repository root.
fn out_arg() -> Result<PathBuf> {
    let args: Vec<String> = std::env::args().skip(2).collect();
    match args.as_slice() {
        [] => Ok(root().join("dist")),
        [flag, dir] if flag == "--out" => {
            let dir = PathBuf::from(dir);
            // Relative to where the command was typed, as a user expects;
            // trunk and the copies run from the repository root.
            Ok(if dir.is_absolute() {
                dir
            } else {
                std::env::current_dir()
                    .map_err(|e| format!("no current directory: {e}"))?
                    .join(dir)
            })
        }
        _ => Err(format!(
            "unexpected arguments {args:?}; usage: cargo xtask dist [--out DIR]"
        )),
    }
}

/// Builds everything a user hosts into `out` (see the module doc).
fn dist(out: &Path) -> Result {
    check_out(out)?;
    let dir = out.to_string_lossy();
    // 1. The page: unhashed names and relative URLs, so the same files
    // work from any folder, the embed copy and the inliner.
    sh(
        "trunk",
        &[
            "build",
            "--release",
            "--offline",
            "--filehash",
            "false",
            "--public-url",
            "./",
            "--dist",
            &dir,
        ],
    )?;
    // 2. The docs embed: the page's artefacts beside the example and its
    // module.
    let embed = out.join("embed");
    std::fs::create_dir_all(&embed)
        .map_err(|e| format!("cannot create {}: {e}", embed.display()))?;
    for entry in files_in(out)? {
        // Step 1's files only (not a one-file page of an earlier run).
        if entry
            .file_name()
            .is_some_and(|n| n != "index.html" && n != onefile::FILE_NAME)
        {
            copy_into(&entry, &embed)?;
        }
    }
    let www_embed = root().join("www/embed");
    if www_embed.is_dir() {
        for entry in files_in(&www_embed)? {
            copy_into(&entry, &embed)?;
        }
    }
    // The embed for docs opened from file:// (the book's among them).
    let file_embed = onefile::embed_for_file(&embed)?;
    eprintln!("dist: wrote {}", file_embed.display());
    // 3. The one-file page.
    let one = onefile::build(out)?;
    eprintln!("dist: wrote {}", one.display());
    // 4. The JavaScript package.
    pkg::build(&root(), &out.join("pkg"))?;
    // 5. The book, its widgets the embed of step 2.
    book(out)?;
    report_sizes(out)
}

/// `results [--check] [--only NAME[,NAME…]]`.
fn results_args() -> Result<(bool, Option<Vec<String>>)> {
    let mut check = false;
    let mut only = None;
    let mut args = std::env::args().skip(2);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--check" => check = true,
            "--only" => {
                let names = args.next().ok_or("--only takes NAME[,NAME…]")?;
                only = Some(names.split(',').map(str::to_string).collect());
            }
            other => return Err(format!("results: unknown argument {other}")),
        }
    }
    Ok((check, only))
}

/// Writes the book's generated pages and the pages' results tables from
/// the code (see the module doc).
fn results() -> Result {
    sh_env(
        &cargo(),
        &["test", "-p", "moeplan-cli", "--test", "book_reference"],
        &[("MOEPLAN_BLESS", "1")],
    )?;
    eprintln!("results: wrote book/src/reference/ (commit it)");
    results::results(false, None)
}

/// Builds the book (`book/`) into `out/book` and copies the docs embed of
/// `out/embed` (a `dist` into the same folder) beside it, for its widgets.
fn book(out: &Path) -> Result {
    let embed = out.join("embed");
    if !embed.join("moeplan-embed.js").is_file() {
        return Err(format!(
            "no docs embed in {}: the book's widgets are the embed, so run `cargo xtask dist` into the same folder first",
            embed.display()
        ));
    }
    let dest = out.join("book");
    let dest_arg = dest.to_string_lossy();
    sh("mdbook", &["build", "book", "--dest-dir", &dest_arg])?;
    let book_embed = dest.join("embed");
    std::fs::create_dir_all(&book_embed)
        .map_err(|e| format!("cannot create {}: {e}", book_embed.display()))?;
    for entry in files_in(&embed)? {
        // The embed's example page is not the book's.
        if entry.file_name().is_some_and(|n| n != "index.html") {
            copy_into(&entry, &book_embed)?;
        }
    }
    // The page's screenshot, which a chapter (docs/page.md) shows.
    copy_into(&root().join("docs/screenshot.png"), &dest)?;
    eprintln!("book: wrote {}", dest.join("index.html").display());
    Ok(())
}

/// Trunk replaces its output folder whole: refuse one that holds the
/// repository or anything but an earlier build.
fn check_out(out: &Path) -> Result {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if canonical(&root()).starts_with(canonical(out)) {
        return Err(format!(
            "--out {} holds the repository, which the build would replace",
            out.display()
        ));
    }
    let empty = std::fs::read_dir(out).map_or(true, |mut d| d.next().is_none());
    if !empty && !out.join("index.html").is_file() {
        return Err(format!(
            "--out {} is not empty and holds no earlier build (index.html): \
             the build replaces the folder whole, so give a new or dist folder",
            out.display()
        ));
    }
    Ok(())
}

/// The plain files directly in `dir`, sorted.
fn files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

fn copy_into(file: &Path, dir: &Path) -> Result {
    let name = file
        .file_name()
        .ok_or_else(|| format!("{} has no name", file.display()))?;
    std::fs::copy(file, dir.join(name))
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", file.display(), dir.display()))
}

/// Prints every file under `out` with its size and its `gzip -9` size (what
/// a server sending gzip would transfer).
fn report_sizes(out: &Path) -> Result {
    let mut files = Vec::new();
    let mut dirs = vec![out.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.is_file() {
                files.push(path);
            }
        }
    }
    files.sort();
    // The book's pages, fonts and scripts in one line, not a hundred.
    let book = out.join("book");
    let (in_book, files): (Vec<PathBuf>, Vec<PathBuf>) =
        files.into_iter().partition(|f| f.starts_with(&book));
    let mut gzip_missing = false;
    eprintln!(
        "dist: {} ({} files)",
        out.display(),
        files.len() + in_book.len()
    );
    eprintln!("{:>12} {:>12}  file", "bytes", "gzip -9");
    for file in &files {
        let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        let gz = if gzip_missing { None } else { gzip_size(file) };
        gzip_missing |= gz.is_none();
        let gz = gz.map_or_else(|| "-".to_string(), |n| n.to_string());
        let name = file.strip_prefix(out).unwrap_or(file).display();
        eprintln!("{size:>12} {gz:>12}  {name}");
    }
    if !in_book.is_empty() {
        let bytes: u64 = in_book
            .iter()
            .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
            .sum();
        eprintln!("{bytes:>12} {:>12}  book/ ({} files)", "", in_book.len());
    }
    if gzip_missing {
        eprintln!("dist: gzip did not run, so gzip sizes are missing");
    }
    Ok(())
}

fn gzip_size(file: &Path) -> Option<u64> {
    let out = Command::new("gzip")
        .args(["-9", "-c"])
        .arg(file)
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout.len() as u64)
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
