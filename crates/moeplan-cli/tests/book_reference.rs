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
         command's `--help-all`, every flag with its whole text, as clap \
         prints it; `--help` prints a line per flag); a test fails when this \
         page and the code differ. What the flags mean in depth, with worked \
         examples: [The CLI](../cli.md).\n\n## moeplan\n\n",
    );
    text_block(&mut page, &moeplan(&["--help-all"]));
    let commands = commands();
    assert!(commands.len() >= 10, "commands found: {commands:?}");
    for c in &commands {
        page.push_str(&format!("\n## moeplan {c}\n\n"));
        text_block(&mut page, &moeplan(&[c, "--help-all"]));
    }
    page
}

/// A screen: `moeplan --help` and every command's fit 50 lines of 100
/// columns, a line per flag, and end with examples.
#[test]
fn every_help_fits_a_screen_and_shows_an_example() {
    let mut checked = 0;
    for c in std::iter::once(String::new()).chain(commands()) {
        let args: Vec<&str> = [c.as_str(), "--help"]
            .into_iter()
            .filter(|a| !a.is_empty())
            .collect();
        let help = moeplan(&args);
        let lines = help.lines().count();
        assert!(lines <= 50, "moeplan {c} --help has {lines} lines:\n{help}");
        let wide: Vec<&str> = help.lines().filter(|l| l.chars().count() > 100).collect();
        assert!(
            wide.is_empty(),
            "moeplan {c} --help: lines over 100 columns: {wide:?}"
        );
        assert!(
            help.lines().any(|l| l.trim_start().starts_with("moeplan ")) || c == "completions",
            "moeplan {c} --help shows no example"
        );
        // Everything is still there, in full, under --help-all.
        let all_args: Vec<&str> = [c.as_str(), "--help-all"]
            .into_iter()
            .filter(|a| !a.is_empty())
            .collect();
        let all = moeplan(&all_args);
        assert!(
            all.lines().count() >= lines,
            "moeplan {c} --help-all is shorter than --help"
        );
        checked += 1;
    }
    assert!(checked >= 11, "{checked} helps checked");
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

/// The published JSON Schemas (`schemas/`), by file name.
fn schemas() -> Vec<(String, serde_json::Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("schemas/ is readable")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("a schema is readable");
            let v = serde_json::from_str(&text).expect("a schema is JSON");
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

/// A schema's type, in a word or two.
fn type_of(v: &serde_json::Value) -> String {
    if let Some(r) = v.get("$ref").and_then(|r| r.as_str()) {
        return format!("see `{}`", r.rsplit('/').next().unwrap_or(r));
    }
    if let Some(c) = v.get("const") {
        return format!("`{c}`");
    }
    if let Some(e) = v.get("enum").and_then(|e| e.as_array()) {
        let words: Vec<String> = e.iter().map(|w| format!("`{w}`")).collect();
        return words.join(" / ");
    }
    match v.get("type") {
        Some(serde_json::Value::String(t)) if t == "array" => match v.get("items") {
            Some(items) => format!("array of {}", type_of(items)),
            None => "array".into(),
        },
        Some(serde_json::Value::String(t)) => t.clone(),
        Some(serde_json::Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(" or "),
        _ if v.get("oneOf").is_some() || v.get("anyOf").is_some() => "one of several".into(),
        _ => "any".into(),
    }
}

/// One line of a table cell: no pipes or line breaks.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The JSON outputs' reference: each schema's title, description and
/// top-level keys, generated from `schemas/`.
fn json_page() -> String {
    let mut page = String::from(
        "# Every JSON file and output\n\n\
         Generated from the JSON Schemas in the repository's `schemas/` folder \
         (draft 2020-12) by `cargo xtask results`; a test fails when this page \
         and the schemas differ, and another validates every command's \
         `--json` output against its schema. Every output carries \
         `schema_version`: a reader refuses a version newer than it knows.\n",
    );
    for (file, schema) in schemas() {
        let title = schema["title"].as_str().unwrap_or(&file);
        page.push_str(&format!("\n## {title}\n\n`schemas/{file}`"));
        if let Some(d) = schema["description"].as_str() {
            page.push_str(&format!(": {d}"));
        }
        page.push('\n');
        let Some(props) = schema["properties"].as_object() else {
            continue;
        };
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(|k| k.as_str()).collect())
            .unwrap_or_default();
        page.push_str("\n| key | type | required | what it is |\n| --- | --- | --- | --- |\n");
        for (key, v) in props {
            page.push_str(&format!(
                "| `{key}` | {} | {} | {} |\n",
                cell(&type_of(v)),
                if required.contains(&key.as_str()) {
                    "yes"
                } else {
                    ""
                },
                cell(v["description"].as_str().unwrap_or(""))
            ));
        }
    }
    page
}

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../book/src/reference")
}

#[test]
fn the_books_reference_pages_are_what_the_cli_prints() {
    let pages = [
        ("cli.md", cli_page()),
        ("presets.md", presets_page()),
        ("json.md", json_page()),
    ];
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
