//! `moeplan gen`: a seeded synthetic trace, written as moeplan trace JSON;
//! with `--tokens`, a token-level trace written as an ESFT folder (the
//! token format `--trace` reads: one `expert_weights_<layer>.txt` per MoE
//! layer, one line per sequence).

use std::fmt::Write as _;
use std::path::Path;

use moeplan::TokenTrace;
use moeplan::data::model;
use moeplan::formats;
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};

use crate::args::{GenArgs, TokenGenArgs};
use crate::error::CliError;
use crate::io::{generated, is_stdout, shown, spinner, write_file};

pub fn run(source: &GenArgs, tokens: &TokenGenArgs, out: &Path) -> Result<(), CliError> {
    if let Some(n) = tokens.tokens {
        return run_tokens(source, n, tokens.ranks, out);
    }
    let trace = generated(source)?;
    write_file(out, &formats::write_trace_json(&trace))?;
    eprintln!(
        "wrote {}: {} batches × {} MoE layers × {} experts ({}, seed {})",
        shown(out),
        trace.num_batches(),
        trace.num_layers(),
        trace.num_experts(),
        source.preset,
        source.seed
    );
    Ok(())
}

fn run_tokens(source: &GenArgs, tokens: usize, ranks: usize, out: &Path) -> Result<(), CliError> {
    if is_stdout(out) {
        return Err(moeplan::Error::Argument(
            "with --tokens, --out is a folder (one file per layer); `-` (stdout) takes one file"
                .into(),
        )
        .into());
    }
    let preset = model::preset(&source.preset)?;
    let cfg = TokenGenConfig {
        ranks,
        seed: source.seed,
        ..TokenGenConfig::new(preset, tokens)
    };
    let bar = spinner("generating tokens");
    let trace = generate_tokens(&cfg);
    bar.finish_and_clear();
    let trace = trace?;
    let in_out = |source| CliError::Write {
        path: out.display().to_string(),
        source,
    };
    std::fs::create_dir_all(out).map_err(in_out)?;
    // Layers of another trace left in the folder would be read as this one's.
    let taken = std::fs::read_dir(out).map_err(in_out)?.flatten().any(|e| {
        e.file_name()
            .to_string_lossy()
            .starts_with("expert_weights_")
    });
    if taken {
        return Err(moeplan::Error::Argument(format!(
            "{} already holds expert_weights_*.txt files: write the token trace to an empty folder",
            out.display()
        ))
        .into());
    }
    for (l, &id) in trace.layer_ids().iter().enumerate() {
        let path = out.join(format!("expert_weights_{id}.txt"));
        write_file(&path, &esft_layer(&trace, l, cfg.sequence_tokens))?;
    }
    eprintln!(
        "wrote {}: {} tokens × {} MoE layers, top-{} of {} experts, {} ranks ({}, seed {}); \
         read it with --trace {} --token-model {}",
        out.display(),
        trace.num_tokens(),
        trace.num_layers(),
        trace.top_k(),
        trace.num_experts(),
        ranks,
        preset.name,
        source.seed,
        out.display(),
        preset.name
    );
    Ok(())
}

/// One layer in ESFT's layout: a line per sequence of `sequence_tokens`
/// tokens (so reading it back and dealing lines round-robin restores the
/// ranks), the expert ids tab-separated, then the empty field that ends
/// them; no gate weights (the generator has none, and the reader takes
/// their absence).
fn esft_layer(trace: &TokenTrace, layer: usize, sequence_tokens: usize) -> String {
    let routes = trace.routes(layer);
    let mut text = String::with_capacity(routes.len() * 4);
    for (i, row) in routes.outer_iter().enumerate() {
        for &e in row {
            let _ = write!(text, "{e}\t");
        }
        if (i + 1) % sequence_tokens == 0 || i + 1 == routes.nrows() {
            text.push_str("\t\n");
        }
    }
    text
}
