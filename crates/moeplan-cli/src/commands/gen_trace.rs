//! `moeplan gen`: a seeded synthetic trace, written as moeplan trace JSON.

use std::path::Path;

use moeplan::formats::trace_json;

use crate::args::GenArgs;
use crate::error::CliError;
use crate::io::{generated, write_file};

pub fn run(source: &GenArgs, out: &Path) -> Result<(), CliError> {
    let trace = generated(source)?;
    write_file(out, &trace_json::write(&trace))?;
    eprintln!(
        "wrote {}: {} batches × {} MoE layers × {} experts ({}, seed {})",
        out.display(),
        trace.num_batches(),
        trace.num_layers(),
        trace.num_experts(),
        source.preset,
        source.seed
    );
    Ok(())
}
