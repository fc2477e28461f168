//! `moeplan`: generate, inspect, plan and evaluate MoE expert placements from
//! the command line. Only argument parsing, file I/O and printing live here;
//! everything else is the `moeplan` core.
//!
//! - `args.rs`: the command line (clap); `planner_args.rs`: the planners'
//!   options as flags; `help.rs`: the help in a screen.
//! - `commands/`: one module per command.
//! - `judge.rs`: a plan judged under a dispatch rule (evaluator + simulator).
//! - `io.rs`: reading within the budget, writing, stdout, progress.
//! - `aiconfigurator.rs`: AIConfigurator's Parquet tables as measurements.
//! - `report.rs`: the tables.
//! - `error.rs`: the one error type.

// The argument structs' doc comments are `--help` text for a terminal
// (`rank<N>.safetensors`), not rustdoc.
#![allow(rustdoc::invalid_html_tags)]

mod aiconfigurator;
mod args;
mod commands;
mod error;
mod help;
mod io;
mod judge;
mod judged;
mod planner_args;
mod report;

use std::process::ExitCode;

use clap::FromArgMatches;

fn main() -> ExitCode {
    let cli = match help::command()
        .try_get_matches()
        .and_then(|m| args::Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    match commands::run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("moeplan: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Help and version print as clap prints them; a usage mistake becomes the
/// same single `moeplan: error:` line, exit code 2, as every other bad input.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    eprintln!("moeplan: error: {}", one_line(&e.to_string()));
    ExitCode::from(2)
}

/// clap's message in one line: the first, and when it ends in a colon the
/// indented lines that complete it (`the following required arguments were
/// not provided: --out <OUT>`).
fn one_line(text: &str) -> String {
    let mut lines = text.lines();
    let mut out = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    if out.ends_with(':') {
        for l in lines.take_while(|l| l.starts_with(' ') && !l.trim().is_empty()) {
            out.push(' ');
            out.push_str(l.trim());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn clap_messages_become_one_line() {
        let text = "error: the following required arguments were not provided:\n  --out <OUT>\n\nUsage: moeplan plan --out <OUT>\n";
        assert_eq!(
            super::one_line(text),
            "the following required arguments were not provided: --out <OUT>"
        );
        assert_eq!(
            super::one_line("error: unexpected argument '--x' found\n\n  tip: …"),
            "unexpected argument '--x' found"
        );
    }
}
