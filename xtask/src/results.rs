//! The results tables in `docs/` (and so in the book, which includes them),
//! regenerated from the examples that make them.
//!
//! A table in a page is marked as the `n`-th table (1-based) of an
//! example's Markdown output:
//!
//! ```text
//! <!-- results cross_table 2 -->
//!
//! | made on \ judged on | … |
//!
//! <!-- /results -->
//! ```
//!
//! `cargo xtask results` runs every example a page names ([`FIGURES`]) and
//! writes its tables between the markers; `cargo xtask test` runs them too
//! and fails on a table that differs, so a committed figure is what the code
//! makes now. Every figure here is deterministic (seeded generators, real
//! files, the time *model*); measured timings are not in this list.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{Result, cargo, root};

/// One example whose output holds results tables.
pub struct Figure {
    /// The example's name, as the markers say it.
    pub name: &'static str,
    /// The package it belongs to.
    pub package: &'static str,
    /// Its package's features: the core's `parallel` for every one (one
    /// build of the core; the threads only split independent work, so the
    /// figures are the same without it).
    pub features: &'static str,
    /// Its arguments; `{data}` is `../shared/data`.
    pub args: &'static [&'static str],
}

/// Every example whose tables the pages hold.
pub const FIGURES: &[Figure] = &[
    Figure {
        name: "dispatch_table",
        package: "moeplan",
        features: "parallel",
        args: &["{data}/sglang-deepseek-v3"],
    },
    Figure {
        name: "eplb_craft_table",
        package: "moeplan",
        features: "parallel",
        args: &["{data}/sglang-deepseek-v3/prefill_in4096.json"],
    },
    Figure {
        name: "holdout_table",
        package: "moeplan",
        features: "parallel",
        args: &["{data}"],
    },
    Figure {
        name: "cross_table",
        package: "moeplan",
        features: "parallel",
        args: &["{data}/sglang-deepseek-v3"],
    },
    Figure {
        name: "placement_table",
        package: "moeplan",
        features: "parallel",
        args: &["{data}/sglang-deepseek-v3"],
    },
    Figure {
        name: "relabel_table",
        package: "moeplan",
        features: "parallel",
        args: &["{data}/sglang-deepseek-v3"],
    },
    Figure {
        name: "replay_table",
        package: "moeplan",
        features: "parallel",
        args: &["{data}"],
    },
    Figure {
        name: "cost_table",
        package: "moeplan",
        features: "parallel",
        args: &["{data}"],
    },
    Figure {
        name: "libra_accuracy",
        package: "moeplan",
        features: "parallel",
        args: &["{data}"],
    },
    Figure {
        name: "libra_shift",
        package: "moeplan",
        features: "parallel",
        args: &["{data}"],
    },
    Figure {
        name: "libra_time",
        package: "moeplan",
        features: "parallel",
        args: &[],
    },
    Figure {
        name: "grace_table",
        package: "moeplan",
        features: "parallel",
        args: &["{data}"],
    },
    Figure {
        name: "grace_imbalance",
        package: "moeplan",
        features: "parallel",
        args: &["{data}"],
    },
    Figure {
        name: "calibration",
        package: "moeplan-view",
        features: "moeplan/parallel",
        args: &["{data}"],
    },
    Figure {
        name: "libra_route_default",
        package: "moeplan-view",
        features: "moeplan/parallel",
        args: &[],
    },
    Figure {
        name: "token_calibration",
        package: "moeplan",
        features: "parallel",
        args: &["{data}"],
    },
];

/// The pages that may hold marked tables.
fn pages() -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for dir in ["docs", "book/src"] {
        let dir = root().join(dir);
        for entry in std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .flatten()
        {
            let path = entry.path();
            if path.extension().is_some_and(|x| x == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A marked region: the line of its opening marker, the figure and table
/// it names, and the lines between the markers.
struct Region {
    start: usize,
    end: usize,
    figure: String,
    table: usize,
}

const OPEN: &str = "<!-- results ";
const CLOSE: &str = "<!-- /results -->";

fn regions(path: &Path, lines: &[&str]) -> Result<Vec<Region>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(rest) = lines[i].strip_prefix(OPEN) else {
            i += 1;
            continue;
        };
        let at = |msg: &str| format!("{}:{}: {msg}", path.display(), i + 1);
        let words: Vec<&str> = rest.trim_end_matches("-->").split_whitespace().collect();
        let [figure, table] = words.as_slice() else {
            return Err(at("expected `<!-- results EXAMPLE TABLE -->`"));
        };
        let table: usize = table
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| at("the table number must be 1 or more"))?;
        if !FIGURES.iter().any(|f| f.name == *figure) {
            return Err(at(&format!("no figure named {figure} in xtask's FIGURES")));
        }
        let end = (i + 1..lines.len())
            .find(|&j| lines[j].trim() == CLOSE)
            .ok_or_else(|| at("no closing `<!-- /results -->`"))?;
        out.push(Region {
            start: i,
            end,
            figure: figure.to_string(),
            table,
        });
        i = end + 1;
    }
    Ok(out)
}

/// The tables of an example's output: each maximal run of lines that
/// start with `|`.
fn tables(output: &str) -> Vec<Vec<&str>> {
    let mut out: Vec<Vec<&str>> = Vec::new();
    let mut open = false;
    for line in output.lines() {
        if line.starts_with('|') {
            if !open {
                out.push(Vec::new());
                open = true;
            }
            if let Some(t) = out.last_mut() {
                t.push(line);
            }
        } else {
            open = false;
        }
    }
    out
}

fn run(figure: &Figure, data: &Path) -> Result<String> {
    let args: Vec<String> = figure
        .args
        .iter()
        .map(|a| a.replace("{data}", &data.to_string_lossy()))
        .collect();
    let mut cmd = Command::new(cargo());
    cmd.args([
        "run",
        "--quiet",
        "--release",
        "-p",
        figure.package,
        "--features",
        figure.features,
        "--example",
        figure.name,
        "--",
    ])
    .args(&args)
    .current_dir(root())
    .stderr(Stdio::inherit());
    eprintln!(
        "$ cargo run --release --example {} -- {}",
        figure.name,
        args.join(" ")
    );
    let out = cmd
        .output()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("example {} failed ({})", figure.name, out.status));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| format!("example {}: output is not UTF-8", figure.name))
}

/// Writes (`check == false`) or checks every marked table — or, with
/// `only`, the tables of those examples alone (a quick turn while editing
/// one). Without the real data beside the repository it says so and does
/// nothing, unless `CI=true` (then `test` has already failed on the
/// missing data).
pub fn results(check: bool, only: Option<&[String]>) -> Result {
    if let Some(bad) = only
        .unwrap_or_default()
        .iter()
        .find(|n| !FIGURES.iter().any(|f| f.name == *n))
    {
        return Err(format!(
            "--only {bad}: no figure of that name in xtask's FIGURES"
        ));
    }
    let chosen = |name: &str| only.is_none_or(|names| names.iter().any(|n| n == name));
    let data = root().join("../shared/data");
    if !data.is_dir() {
        eprintln!(
            "results: {} is missing, so the results tables were not {}",
            data.display(),
            if check { "checked" } else { "written" }
        );
        return Ok(());
    }
    let mut pages_regions = Vec::new();
    for path in pages()? {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let lines: Vec<&str> = text.lines().collect();
        let mut found = regions(&path, &lines)?;
        found.retain(|r| chosen(&r.figure));
        if !found.is_empty() {
            pages_regions.push((path.clone(), text.clone(), found));
        }
    }
    // Build each package's examples once, then run each one the pages name.
    let mut built: Vec<&str> = Vec::new();
    for f in FIGURES.iter().filter(|f| chosen(f.name)) {
        if !built.contains(&f.package) {
            crate::sh(
                &cargo(),
                &[
                    "build",
                    "--release",
                    "-p",
                    f.package,
                    "--features",
                    f.features,
                    "--examples",
                ],
            )?;
            built.push(f.package);
        }
    }
    let mut outputs = std::collections::HashMap::new();
    for figure in FIGURES {
        if pages_regions
            .iter()
            .any(|(_, _, rs)| rs.iter().any(|r| r.figure == figure.name))
        {
            outputs.insert(figure.name, run(figure, &data)?);
        }
    }
    let mut stale = Vec::new();
    let mut written = 0;
    for (path, text, found) in &pages_regions {
        let lines: Vec<&str> = text.lines().collect();
        let mut new: Vec<String> = Vec::new();
        let mut from = 0;
        for r in found {
            let output = outputs.get(r.figure.as_str()).map_or("", String::as_str);
            let all = tables(output);
            let table = all.get(r.table - 1).ok_or_else(|| {
                format!(
                    "{}:{}: {} prints {} tables, not {}",
                    path.display(),
                    r.start + 1,
                    r.figure,
                    all.len(),
                    r.table
                )
            })?;
            // The table stands between blank lines inside the markers, so
            // Markdown renders it as a table whatever surrounds it.
            let inside = &lines[r.start + 1..r.end];
            let blank = |l: &&str| l.trim().is_empty();
            let lo = inside
                .iter()
                .position(|l| !blank(l))
                .unwrap_or(inside.len());
            let hi = inside.iter().rposition(|l| !blank(l)).map_or(lo, |i| i + 1);
            let old = &inside[lo..hi];
            if old != table.as_slice() {
                let first = old
                    .iter()
                    .zip(table.iter())
                    .position(|(a, b)| a != b)
                    .unwrap_or(old.len().min(table.len()));
                stale.push(format!(
                    "{}:{}: {} table {} differs from what the code makes now (line {} of the table: committed {:?}, now {:?})",
                    path.display(),
                    r.start + 1,
                    r.figure,
                    r.table,
                    first + 1,
                    old.get(first).copied().unwrap_or("(nothing)"),
                    table.get(first).copied().unwrap_or("(nothing)"),
                ));
            }
            new.extend(lines[from..=r.start].iter().map(|s| s.to_string()));
            new.push(String::new());
            new.extend(table.iter().map(|s| s.to_string()));
            new.push(String::new());
            from = r.end;
        }
        new.extend(lines[from..].iter().map(|s| s.to_string()));
        let mut joined = new.join("\n");
        if text.ends_with('\n') {
            joined.push('\n');
        }
        if !check && joined != *text {
            std::fs::write(path, joined)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            written += 1;
        }
    }
    let marked: usize = pages_regions.iter().map(|(_, _, rs)| rs.len()).sum();
    if check {
        if !stale.is_empty() {
            return Err(format!(
                "{} of {marked} results tables are stale; `cargo xtask results` writes them anew:\n{}",
                stale.len(),
                stale.join("\n")
            ));
        }
        eprintln!("results: {marked} tables in the pages are what the code makes now");
    } else {
        eprintln!(
            "results: {marked} tables from {} examples; {written} pages rewritten, {} tables changed",
            outputs.len(),
            stale.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tables_and_regions() {
        let out = "intro\n| a |\n| - |\n| 1 |\n\ntext\n| b |\n| 2 |\n";
        let t = tables(out);
        assert_eq!(
            t,
            vec![vec!["| a |", "| - |", "| 1 |"], vec!["| b |", "| 2 |"]]
        );
        let page = "x\n<!-- results cross_table 2 -->\n| old |\n<!-- /results -->\ny";
        let lines: Vec<&str> = page.lines().collect();
        let r = regions(Path::new("p.md"), &lines).unwrap();
        assert_eq!((r[0].start, r[0].end, r[0].table), (1, 3, 2));
        assert_eq!(r[0].figure, "cross_table");
        let bad = ["<!-- results nothing 1 -->", "<!-- /results -->"];
        assert!(regions(Path::new("p.md"), &bad).is_err());
        let open = ["<!-- results cross_table 1 -->", "| x |"];
        assert!(regions(Path::new("p.md"), &open).is_err());
    }
}
