//! `moeplan inspect`: a trace's shape, totals and per-layer skew.

use std::path::PathBuf;

use crate::args::{SourceArgs, TraceArgs};
use crate::error::CliError;
use crate::io::{emit, load_trace, to_json};
use crate::report;

pub fn run(trace: Option<PathBuf>, source: SourceArgs, json: bool) -> Result<(), CliError> {
    let t = load_trace(&TraceArgs { trace, source })?;
    let stats = t.stats();
    if json {
        emit(&to_json(&stats));
    } else {
        emit(&report::stats(&stats));
    }
    Ok(())
}
