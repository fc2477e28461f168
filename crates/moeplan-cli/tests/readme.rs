//! README's walk from a dump to an engine runs as written: every `moeplan`
//! line of its fenced `sh` blocks between `<!-- walkthrough -->` and
//! `<!-- /walkthrough -->`, in order, in a scratch folder holding the user's
//! dump as `dump.json` (one of SGLang's DeepSeek-V3 dumps from
//! `../shared/data`), each of which must succeed; the files it writes must
//! be there for the engine lines after it, which are shown, not run.

use std::path::Path;
use std::process::Command;

mod common;

/// The walk-through's command lines (`\` continuations joined).
fn walkthrough(readme: &str) -> Vec<String> {
    let start = readme
        .find("<!-- walkthrough -->")
        .expect("README.md marks its walk-through with <!-- walkthrough -->");
    let end = readme[start..]
        .find("<!-- /walkthrough -->")
        .map(|e| start + e)
        .expect("README.md closes its walk-through with <!-- /walkthrough -->");
    let mut lines = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in readme[start..end].lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_block = !in_block && t.trim_start_matches('`') == "sh";
            continue;
        }
        if !in_block || t.starts_with('#') || t.is_empty() {
            continue;
        }
        let (body, more) = match t.strip_suffix('\\') {
            Some(b) => (b.trim_end(), true),
            None => (t, false),
        };
        pending.push_str(body);
        pending.push(' ');
        if !more {
            lines.push(pending.trim().to_string());
            pending.clear();
        }
    }
    lines
}

#[test]
fn the_readme_walk_through_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let lines = walkthrough(&readme);
    let runs: Vec<&String> = lines.iter().filter(|l| l.starts_with("moeplan ")).collect();
    assert!(
        runs.len() >= 3,
        "the walk-through runs at least inspect, compare and plan: {lines:?}"
    );
    let Some(dump) = common::shared("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    let dir = common::tmp("readme", "walk");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&dump, dir.join("dump.json")).unwrap();
    let mut ran = 0;
    for line in &lines {
        // Plain words only: the test runs them without a shell.
        assert!(
            !line.contains(['|', '>', '<', '"', '\'', '$', '`', ';', '&']),
            "the walk-through's lines are plain commands: {line}"
        );
        let words: Vec<&str> = line.split_whitespace().collect();
        if words[0] != "moeplan" {
            // An engine's line: the files it loads were written before.
            for w in &words {
                let name = w.rsplit('=').next().unwrap_or(w);
                if name.ends_with(".json") || name.ends_with(".pt") || name.ends_with(".csv") {
                    assert!(
                        dir.join(name).is_file(),
                        "{line}: {name} was not written by the commands before it"
                    );
                }
            }
            continue;
        }
        let o = Command::new(env!("CARGO_BIN_EXE_moeplan"))
            .args(&words[1..])
            .current_dir(&dir)
            .output()
            .expect("the binary runs");
        assert!(
            o.status.success(),
            "README: `{line}` failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            !o.stdout.is_empty() || line.contains("--out"),
            "{line}: printed nothing"
        );
        ran += 1;
    }
    assert_eq!(ran, runs.len());
    eprintln!("README's walk-through: {ran} moeplan commands ran");
}
