//! The book's reference chapters (`book/src/reference/`), generated from the
//! CLI itself: every command's `--help` (clap), the model presets, the
//! hardware presets and the planners with their options (the registry).
//! This test fails when a committed page differs from what the code now
//! prints; `cargo xtask results` (which sets `MOEPLAN_BLESS=1`) writes them
//! anew. Everything here is deterministic: no timing, no data file.

use std::path::{Path, PathBuf};
use std::process::Command;

fn moeplan(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_moeplan"))
        .args(args)
        // clap wraps help to the terminal; a test has none, and the pages
        // must not depend on where they were made.
        .env("COLUMNS", "100")
        .env_remove("NO_COLOR")
        .output()
        .expect("the moeplan binary runs");
    assert!(
        out.status.success(),
        "moeplan {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The commands, in `moeplan --help`'s order (without `help`).
fn commands() -> Vec<String> {
    let help = moeplan(&["--help"]);
    let list = help
        .split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .expect("a Commands: section in moeplan --help");
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

fn text_block(out: &mut String, text: &str) {
    out.push_str("```text\n");
    out.push_str(text.trim_end());
    out.push_str("\n```\n");
}

fn cli_page() -> String {
    let mut page = String::from(
        "# The CLI, command by command\n\n\
         Generated from the `moeplan` binary by `cargo xtask results` (every \
         command's `--help`, as clap prints it); a test fails when this page \
         and the code differ. What the flags mean in depth, with worked \
         examples: [The CLI](../cli.md).\n\n## moeplan\n\n",
    );
    text_block(&mut page, &moeplan(&["--help"]));
    let commands = commands();
    assert!(commands.len() >= 10, "commands found: {commands:?}");
    for c in &commands {
        page.push_str(&format!("\n## moeplan {c}\n\n"));
        text_block(&mut page, &moeplan(&[c, "--help"]));
    }
    page
}

fn presets_page() -> String {
    let mut page = String::from(
        "# Presets and planners\n\n\
         Generated from the `moeplan` binary by `cargo xtask results`; a test \
         fails when this page and the code differ.\n\n\
         ## Model shapes (`moeplan presets`)\n\n\
         The shapes `--preset` and `--model` accept (the generated traces' \
         and the memory model's):\n\n",
    );
    text_block(&mut page, &moeplan(&["presets"]));
    page.push_str(
        "\n## Hardware (`moeplan hardware`)\n\n\
         The machines `--hardware` names, each figure with its source in \
         `crates/moeplan/src/data/hardware.rs` and \
         [the cost model](../cost.md):\n\n",
    );
    text_block(&mut page, &moeplan(&["hardware"]));
    page.push_str(
        "\n## Planners and their options (`moeplan planners`)\n\n\
         Every planner the CLI, the page and the JS API offer (one registry), \
         what it reads, and its options with their defaults:\n\n",
    );
    text_block(&mut page, &moeplan(&["planners"]));
    page
}

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../book/src/reference")
}

#[test]
fn the_books_reference_pages_are_what_the_cli_prints() {
    let pages = [("cli.md", cli_page()), ("presets.md", presets_page())];
    let dir = reference_dir();
    let bless = std::env::var("MOEPLAN_BLESS").as_deref() == Ok("1");
    let mut stale = Vec::new();
    for (name, text) in &pages {
        let path = dir.join(name);
        if bless {
            std::fs::create_dir_all(&dir).expect("book/src/reference can be made");
            std::fs::write(&path, text).expect("the page can be written");
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if &committed != text {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "the book's reference differs from what the code prints: {stale:?}; \
         run `cargo xtask results` and commit the pages"
    );
}
