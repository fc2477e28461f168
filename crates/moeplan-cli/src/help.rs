//! `--help` that fits a screen: clap's command line from `args.rs`, each
//! flag's text cut to its first clause in one line of 100 columns, rarely
//! used flags and long value lists left to `--help-all` (which prints every
//! flag's whole text: the book's CLI reference).

use clap::{Arg, ArgAction};

/// The command line as clap builds it, its help made to fit a screen:
/// `-h` and `--help` print a line per flag (the first clause of its text;
/// flags few need only under `--help-all`) with the command's examples,
/// `--help-all` every flag with its whole text (the book's reference).
pub fn command() -> clap::Command {
    let full = std::env::args_os().any(|a| a == "--help-all");
    command_for(full)
}

/// [`command`], its short help listing a flag's values only when they are
/// few (`full`: all of them, as `--help-all` prints).
pub fn command_for(full: bool) -> clap::Command {
    use clap::CommandFactory;
    concise(crate::args::Cli::command(), full)
}

/// Flags `--help` leaves to `--help-all`: reading limits and the knobs of
/// traces few users have.
const ONLY_IN_HELP_ALL: &[&str] = &[
    "max_trace_mib",
    "token_model",
    "dataset",
    "weights",
    "model_layers",
    "deal",
    // The pricing's assumptions (--hardware's own help points here).
    "phase",
    "context",
    "memory_fraction",
    "kernel",
    "bf16_dispatch",
    "weight_precision",
    "attention_tp",
    "peer_buffer_tokens",
    "overlap",
    // --from's limits.
    "max_moved_experts",
    "min_balancedness",
];

/// Values named in a flag's line of `--help` while they fit this many
/// characters; more are left to `--help-all`.
const VALUES_IN_A_LINE: usize = 44;

/// Short value names (`<N>` for `<TOKENS_PER_BATCH>`), by flag: the
/// flags' column narrow enough that each flag and its text fit a line.
const VALUE_NAMES: &[(&str, &str)] = &[
    ("trace", "PATH"),
    ("tokens-per-batch", "N"),
    ("gpus-per-node", "N"),
    ("nodes", "N"),
    ("batches", "N"),
    ("seed", "N"),
    ("holdout", "F"),
    ("from", "PLAN"),
    ("max-trace-mib", "MIB"),
    ("measurements", "FILE"),
    ("memory-fraction", "F"),
    ("model-layers", "N"),
    ("peer-buffer-tokens", "N"),
    ("token-model", "PRESET"),
    ("weight-precision", "P"),
    ("attention-tp", "N"),
    ("context", "N"),
    ("dispatch", "RULE"),
    ("hardware", "HW"),
    ("algo", "ID"),
    ("format", "FMT"),
    ("every", "K"),
    ("window", "W"),
];

fn concise(cmd: clap::Command, full: bool) -> clap::Command {
    let cmd = match (
        cmd.get_about().map(ToString::to_string),
        cmd.get_long_about(),
    ) {
        (Some(about), None) if about.chars().count() > 60 => {
            let short = summary(&about, 60);
            cmd.long_about(about).about(short)
        }
        _ => cmd,
    };
    cmd.disable_help_flag(true)
        .mut_args(move |a| one_line(a, full))
        .arg(
            Arg::new("help")
                .short('h')
                .long("help")
                .action(ArgAction::HelpShort)
                .help("Print help (--help-all: every flag, in full)"),
        )
        .arg(
            Arg::new("help-all")
                .long("help-all")
                .action(ArgAction::HelpLong)
                .help("Print every flag with its whole text"),
        )
        .mut_subcommands(move |c| concise(c, full))
}

/// Columns of `--help`, and those its flags' columns take at most: the
/// planner options' (`      --extra-experts-per-gpu <N>   `) and the rest.
const COLUMNS: usize = 100;
const PLANNER_FLAG_COLUMN: usize = 36;
const FLAG_COLUMN: usize = 30;

/// A flag's `--help` in one line of [`COLUMNS`]: a short value name, its
/// text's first clause, its values when they fit (else `--help-all` lists
/// them), its default; the whole text stays for `--help-all`.
fn one_line(a: Arg, full: bool) -> Arg {
    let a = if ONLY_IN_HELP_ALL.contains(&a.get_id().as_str()) {
        a.hide_short_help(true)
    } else {
        a
    };
    let a = match VALUE_NAMES.iter().find(|(f, _)| a.get_long() == Some(*f)) {
        Some((_, name)) if a.get_action().takes_values() => a.value_name(*name),
        _ => a,
    };
    if full {
        return a;
    }
    let whole = a
        .get_long_help()
        .or(a.get_help())
        .map(ToString::to_string)
        .unwrap_or_default();
    let values: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    let listed = values.join("|");
    let default_tail: usize = a
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().chars().count() + " [default: ]".len())
        .sum();
    let text = a.get_help().map(ToString::to_string).unwrap_or_default();
    let bracket = text
        .rfind(" [")
        .filter(|_| text.ends_with(']'))
        .map_or(0, |i| text[i..].chars().count());
    let column = match a.get_help_heading() {
        Some("Planner options") => PLANNER_FLAG_COLUMN,
        _ => FLAG_COLUMN,
    };
    let room = COLUMNS.saturating_sub(column + default_tail + bracket);
    // The values when they leave the text room for its first words.
    let values_tail = match () {
        _ if values.is_empty() || !a.get_action().takes_values() => String::new(),
        _ if listed.chars().count() <= VALUES_IN_A_LINE
            && room.saturating_sub(listed.chars().count() + 3) >= 12 =>
        {
            format!(" [{listed}]")
        }
        _ => format!(" ({} choices)", values.len()),
    };
    let width = (COLUMNS - column).saturating_sub(values_tail.chars().count() + default_tail);
    let short = summary(&text, width);
    let a = if values_tail.is_empty() {
        a
    } else {
        a.hide_possible_values(true)
    };
    a.help(short + &values_tail).long_help(whole)
}

/// A flag's text in a line: its first clause (outside parentheses and
/// code), and the `[…]` that closes a planner option's text (who takes it,
/// its default).
fn summary(text: &str, width: usize) -> String {
    let (body, tail) = match text.rfind(" [") {
        Some(i) if text.ends_with(']') => (&text[..i], &text[i..]),
        _ => (text, ""),
    };
    // Byte offsets of the separators outside `(…)` and `` `…` ``.
    let mut depth = 0i32;
    let mut code = false;
    let mut cut = body.len();
    for (i, c) in body.char_indices() {
        match c {
            '`' => code = !code,
            '(' if !code => depth += 1,
            ')' if !code => depth -= 1,
            _ => {}
        }
        if depth == 0
            && !code
            && [". ", "; ", " — ", ": "]
                .iter()
                .any(|sep| body[i..].starts_with(sep))
        {
            cut = i;
            break;
        }
    }
    let width = width.saturating_sub(tail.chars().count()).max(16);
    let mut line = body[..cut].trim_end_matches('.').to_string();
    if line.chars().count() > width
        && line.ends_with(')')
        && let Some(open) = line.rfind(" (")
    {
        line.truncate(open);
    }
    if line.chars().count() > width {
        let end = line
            .char_indices()
            .take_while(|(i, _)| *i < width - 1)
            .filter(|(_, c)| *c == ' ')
            .map(|(i, _)| i)
            .last()
            .unwrap_or(line.len());
        line.truncate(end);
        line = line.trim_end_matches([',', ':']).to_string() + "…";
    }
    line + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both helps' commands pass clap's own checks (every flag of every
    /// command), which a release build would not make.
    #[test]
    fn the_command_line_is_well_formed() {
        command_for(false).debug_assert();
        command_for(true).debug_assert();
    }

    #[test]
    fn a_text_becomes_its_first_clause_in_a_line() {
        assert_eq!(
            summary("Tokens per batch: of a generated trace", 60),
            "Tokens per batch"
        );
        // not inside parentheses or code
        assert_eq!(
            summary(
                "Where to write the plan (`-`: stdout; what plan reports goes to stderr)",
                80
            ),
            "Where to write the plan (`-`: stdout; what plan reports goes to stderr)"
        );
        assert_eq!(
            summary("Where to write the plan (`-`: stdout)", 20),
            "Where to write the…"
        );
        // a planner option's bracket is kept, within the width
        let s = summary(
            "Libra's N: experts each GPU may copy [libra; default: 8]",
            40,
        );
        assert_eq!(s, "Libra's N [libra; default: 8]");
        let long = summary(&"word ".repeat(30), 40);
        assert!(long.chars().count() <= 40 && long.ends_with('…'), "{long}");
    }
}
