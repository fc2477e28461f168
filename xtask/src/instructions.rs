//! The page's heaviest changes counted in instructions, held to ceilings.
//!
//! Wall-clock time in a test fails on a slow or busy machine (issue 46: a
//! fresh clone's CI failed on twelve timing gates); an instruction count of
//! the same binary and inputs is the same on every machine of a kind. So
//! `cargo xtask test` runs `app/examples/change_work.rs` (each change
//! through the page's worker code, natively, release) under Debian's
//! valgrind (`--tool=callgrind --instr-atstart=no`: only the changes are
//! counted, each dumped under its name) on both defaults side by side, and
//! fails a change whose count is over its ceiling in docs/speed.md's
//! "Instructions per change" table (its count when written, plus
//! [`HEADROOM`]). `cargo xtask instructions` prints the counts;
//! `--write` writes the table anew from them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use crate::{Result, cargo, root};

// The docs' thousands separator, as the results examples write it. It
// keeps `% 3 == 0`: the core's rust-version (1.86) predates
// `is_multiple_of`, which xtask's lints (no rust-version) would ask for.
#[allow(clippy::manual_is_multiple_of)]
#[path = "../../crates/moeplan/examples/common/text.rs"]
mod text;

/// A ceiling is the count it was written from plus this fraction: the
/// issue's 10 %. Counts of one tree move by well under 1 % between runs
/// (hash seeds, allocator addresses); a change made 20 % heavier fails.
pub const HEADROOM: f64 = 0.10;

/// The page's two defaults, as `change_work` names them, and as the table
/// does.
const DEFAULTS: &[(&str, &str)] = &[("routes", "token routes"), ("counts", "counts")];

/// The table's page and its markers.
const PAGE: &str = "docs/speed.md";
const BEGIN: &str = "<!-- instructions: written by `cargo xtask instructions --write`; `cargo xtask test` fails a count over its ceiling -->";
const END: &str = "<!-- /instructions -->";

/// `cargo xtask test`'s phase: counts every change and fails any over its
/// ceiling (or missing from the table).
pub fn check(counting: Counting) -> Result {
    compare(&counting.finish()?, None)
}

/// Fails a count over its ceiling or without one, and (unless `only` one
/// default was counted) a ceiling of that default left uncounted.
fn compare(counts: &Counts, only: Option<&str>) -> Result {
    let ceilings = read_table()?;
    let mut failed = Vec::new();
    eprintln!("instructions per change (M), against the ceilings in {PAGE}:");
    for (default, change, n) in counts {
        let key = (default.clone(), change.clone());
        let line = match ceilings.get(&key) {
            Some(&ceiling) if *n <= ceiling => {
                format!("ok   {}", row(default, change, *n, Some(ceiling)))
            }
            Some(&ceiling) => {
                failed.push(format!(
                    "{default}: {change}: {:.0} M instructions, over its ceiling {:.0} M by {:.1} %",
                    n / 1e6,
                    ceiling / 1e6,
                    (n / ceiling - 1.0) * 100.0
                ));
                format!("FAIL {}", row(default, change, *n, Some(ceiling)))
            }
            None => {
                failed.push(format!("{default}: {change}: no ceiling in {PAGE}"));
                format!("FAIL {} (no ceiling)", row(default, change, *n, None))
            }
        };
        eprintln!("  {line}");
    }
    let named = |d: &str| DEFAULTS.iter().find(|x| x.1 == d).map(|x| x.0);
    for (default, change) in ceilings.keys() {
        if only.is_some_and(|o| named(default) != Some(o)) {
            continue;
        }
        if !counts.iter().any(|(d, c, _)| d == default && c == change) {
            failed.push(format!("{default}: {change}: in {PAGE} but not counted"));
        }
    }
    let within = counts
        .iter()
        .filter(|(d, c, n)| {
            ceilings
                .get(&(d.clone(), c.clone()))
                .is_some_and(|x| n <= x)
        })
        .count();
    eprintln!(
        "instructions: {within} of {} changes within their ceilings",
        counts.len()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\n(a change that really costs more or less now: `cargo xtask instructions --write`, and say why in the commit)",
            failed.join("\n")
        ))
    }
}

/// `cargo xtask instructions [routes|counts] [--write]`: counts (one
/// default or both) and compares them with the ceilings, as `test` does;
/// `--write` writes the table from them instead.
pub fn run(only: Option<&str>, write: bool) -> Result {
    if write && only.is_some() {
        return Err("--write writes both defaults' rows: name no default".into());
    }
    let counts = start(only)?.finish()?;
    if write {
        for (default, change, n) in &counts {
            eprintln!("  {}", row(default, change, *n, None));
        }
        write_table(&counts)?;
        eprintln!("instructions: wrote {PAGE}'s table (commit it)");
        Ok(())
    } else {
        compare(&counts, only)
    }
}

fn row(default: &str, change: &str, n: f64, ceiling: Option<f64>) -> String {
    match ceiling {
        Some(c) => format!(
            "{default:<12} {change:<40} {:>8.0} M (ceiling {:.0} M, {:+.1} %)",
            n / 1e6,
            c / 1e6,
            (n / c - 1.0) * 100.0
        ),
        None => format!("{default:<12} {change:<40} {:>8.0} M", n / 1e6),
    }
}

/// (default, change, instructions), in the example's order, from one
/// callgrind run per default.
type Counts = Vec<(String, String, f64)>;

/// The callgrind runs under way, one per default; dropped unfinished (a
/// phase between them failed), they are killed.
pub struct Counting {
    runs: Vec<(&'static str, &'static str, Child)>,
    dir: PathBuf,
}

impl Drop for Counting {
    fn drop(&mut self) {
        for (_, _, child) in &mut self.runs {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Builds the example and starts counting the changes of every default
/// (`only`: that one, by `change_work`'s name), one process each. The
/// route default takes about ten minutes under valgrind (its setup,
/// GRACE's spectral clustering of 58 layers on faer's FMA kernels, runs
/// some 200× slower there than natively), so `test` starts it first and
/// collects it at the end.
pub fn start(only: Option<&str>) -> Result<Counting> {
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Err("valgrind is missing (`cargo xtask setup` installs Debian's)".into());
    }
    if let Some(o) = only.filter(|o| !DEFAULTS.iter().any(|d| d.0 == *o)) {
        return Err(format!("no default {o:?}: routes or counts"));
    }
    crate::sh(
        &cargo(),
        &[
            "build",
            "--release",
            "-p",
            "moeplan-app",
            // The worker's side only: none of the crates Leptos brings.
            "--no-default-features",
            "--example",
            "change_work",
        ],
    )?;
    let bin = root().join("target/release/examples/change_work");
    let dir = root().join("target/callgrind");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut counting = Counting {
        runs: Vec::new(),
        dir: dir.clone(),
    };
    for &(arg, name) in DEFAULTS.iter().filter(|d| only.is_none_or(|o| o == d.0)) {
        let out = dir.join(format!("callgrind.{arg}"));
        let file = |ext: &str| {
            std::fs::File::create(dir.join(format!("{arg}.{ext}")))
                .map_err(|e| format!("cannot create a log in {}: {e}", dir.display()))
        };
        eprintln!(
            "$ valgrind --tool=callgrind --instr-atstart=no {} {arg} (in the background)",
            bin.display()
        );
        let child = Command::new("valgrind")
            // Valgrind runs FMA instructions through a software helper some
            // hundred times slower than any other; glibc's `exp` takes its
            // FMA build on a CPU that has FMA (as valgrind reports it), its
            // AVX build without. The token generator's `exp` calls are then
            // as quick as the rest of the setup (faer's kernels still find
            // FMA themselves).
            .env("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-FMA")
            .args([
                "--tool=callgrind",
                "--instr-atstart=no",
                "--compress-strings=no",
                "--compress-pos=no",
            ])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(&bin)
            .arg(arg)
            .current_dir(root())
            .stdout(file("stdout")?)
            .stderr(file("stderr")?)
            .spawn()
            .map_err(|e| format!("cannot start valgrind: {e}"))?;
        counting.runs.push((arg, name, child));
    }
    Ok(counting)
}

impl Counting {
    /// Waits for every run and reads its counts.
    pub fn finish(mut self) -> Result<Counts> {
        let mut counts = Counts::new();
        let mut errors = Vec::new();
        for (arg, name, mut child) in std::mem::take(&mut self.runs) {
            let status = child
                .wait()
                .map_err(|e| format!("valgrind on {arg}: {e}"))?;
            if !status.success() {
                let log = std::fs::read_to_string(self.dir.join(format!("{arg}.stderr")))
                    .unwrap_or_default();
                errors.push(format!(
                    "change_work {arg} under valgrind failed ({status}):\n{log}"
                ));
                continue;
            }
            for (change, n) in dumps(&self.dir, &format!("callgrind.{arg}"))? {
                counts.push((name.to_string(), change, n));
            }
        }
        if !errors.is_empty() {
            return Err(errors.join("\n"));
        }
        if counts.is_empty() {
            return Err(
                "callgrind dumped no change (were the client requests compiled in?)".into(),
            );
        }
        Ok(counts)
    }
}

/// The changes dumped into `dir/prefix.N`: each file's trigger (the
/// change's name) and its instruction total.
fn dumps(dir: &Path, prefix: &str) -> Result<Vec<(String, f64)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    // In the order dumped: `prefix.1`, `prefix.2`, … (`prefix` itself is
    // the final dump at exit, which names no change).
    files.sort_by_key(|p| {
        p.extension()
            .and_then(|e| e.to_str())
            .and_then(|e| e.parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    });
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let trigger = text
            .lines()
            .find_map(|l| l.strip_prefix("desc: Trigger: Client Request: "));
        let total = text
            .lines()
            .find_map(|l| l.strip_prefix("summary: "))
            .and_then(|t| t.split_whitespace().next())
            .and_then(|t| t.parse::<f64>().ok());
        if let (Some(change), Some(n)) = (trigger, total) {
            out.push((change.trim().to_string(), n));
        }
    }
    Ok(longest_steps(out))
}

/// The steps of the work ahead of time (`warm-up step|kind|what`, one dump
/// each) reduced to the longest of each kind, a row each, after the
/// changes: the most a change can wait behind (issue 52). Which step it
/// was is printed, not part of the row's name.
fn longest_steps(dumped: Vec<(String, f64)>) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut longest: Vec<(String, f64, String, usize)> = Vec::new();
    for (name, n) in dumped {
        let Some(rest) = name.strip_prefix("warm-up step|") else {
            out.push((name, n));
            continue;
        };
        let (kind, what) = rest.split_once('|').unwrap_or((rest, ""));
        match longest.iter_mut().find(|l| l.0 == kind) {
            Some(l) => {
                l.3 += 1;
                if n > l.1 {
                    (l.1, l.2) = (n, what.to_string());
                }
            }
            None => longest.push((kind.to_string(), n, what.to_string(), 1)),
        }
    }
    for (kind, n, what, steps) in longest {
        eprintln!(
            "  the longest warm-up step, {kind}: {:.1} M instructions ({what}; of {steps} counted)",
            n / 1e6
        );
        out.push((format!("the longest warm-up step: {kind}"), n));
    }
    out
}

/// (default, change) → ceiling, from the page's table (the count column
/// beside it is for the reader).
fn read_table() -> Result<BTreeMap<(String, String), f64>> {
    let text = page()?;
    let (_, table, _) = split(&text)?;
    let mut out = BTreeMap::new();
    for line in table.lines().filter(|l| l.starts_with('|')).skip(2) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let num = |s: &str| s.replace(',', "").parse::<f64>().ok().map(|m| m * 1e6);
        match cells.as_slice() {
            [default, change, counted, ceiling] => {
                let (Some(_), Some(x)) = (num(counted), num(ceiling)) else {
                    return Err(format!("{PAGE}: unreadable instructions row {line:?}"));
                };
                out.insert((default.to_string(), change.to_string()), x);
            }
            _ => return Err(format!("{PAGE}: unreadable instructions row {line:?}")),
        }
    }
    Ok(out)
}

/// Writes the table between the markers: each count and its ceiling, in
/// millions of instructions.
fn write_table(counts: &Counts) -> Result {
    let text = page()?;
    let (head, _, tail) = split(&text)?;
    let mut table = String::from(
        "\n| default | change | instructions (M) | ceiling (M) |\n| --- | --- | ---: | ---: |\n",
    );
    // The defaults in the page's order, each change in the example's.
    for &(_, name) in DEFAULTS {
        for (default, change, n) in counts.iter().filter(|(d, _, _)| d == name) {
            let ceiling = (n * (1.0 + HEADROOM) / 1e6).ceil();
            table.push_str(&format!(
                "| {default} | {change} | {} | {} |\n",
                text::thousands((n / 1e6).round() as usize),
                text::thousands(ceiling as usize)
            ));
        }
    }
    let new = format!("{head}{BEGIN}{table}{END}{tail}");
    let path = root().join(PAGE);
    std::fs::write(&path, new).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn page() -> Result<String> {
    let path = root().join(PAGE);
    std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The page before the table, the table, and the page after it.
fn split(text: &str) -> Result<(&str, &str, &str)> {
    let (head, rest) = text
        .split_once(BEGIN)
        .ok_or_else(|| format!("{PAGE} has no instructions table (marker {BEGIN})"))?;
    let (table, tail) = rest
        .split_once(END)
        .ok_or_else(|| format!("{PAGE}: the instructions table has no end marker {END}"))?;
    Ok((head, table, tail))
}
