//! `moeplan inspect`: a trace's shape, totals and per-layer skew, or with
//! `--variation` how its expert loads vary from batch to batch.

use std::fmt::Write as _;
use std::path::PathBuf;

use moeplan::LoadTrace;
use moeplan::studies::{AUTOCORRELATION_MIN_LOAD, VariationStats};

use crate::args::TraceArgs;
use crate::error::CliError;
use crate::io::{emit, emit_json, load_trace};
use crate::report;

pub fn run(
    trace: TraceArgs,
    positional: Option<PathBuf>,
    json: bool,
    variation: bool,
) -> Result<(), CliError> {
    if let Some(p) = positional {
        return Err(moeplan::Error::Argument(format!(
            "name the trace with --trace {}, as every command does",
            p.display()
        ))
        .into());
    }
    let path = trace.trace.clone();
    let t = load_trace(&trace)?;
    if variation {
        let v = VariationStats::of(&t).map_err(|e| match &path {
            Some(p) => CliError::in_file(p)(e),
            None => CliError::Core(e),
        })?;
        if json {
            emit_json(serde_json::to_value(&v).unwrap_or_default());
        } else {
            emit(&variation_report(&t, &v));
        }
        return Ok(());
    }
    let stats = t.stats();
    if json {
        emit_json(serde_json::to_value(&stats).unwrap_or_default());
    } else {
        emit(&report::stats(&stats));
    }
    Ok(())
}

/// The three figures, each with what it means, then the CV by load.
fn variation_report(t: &LoadTrace, v: &VariationStats) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "model {} · {} batches · {} MoE layers · {} experts · {} (layer, expert) pairs with load",
        t.model().unwrap_or("unknown"),
        v.batches,
        t.num_layers(),
        t.num_experts(),
        v.pairs
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "load-weighted CV     {:.3}  batch-to-batch coefficient of variation of each expert's share of its layer, weighted by load: what the tokens see (hot experts)",
        v.weighted_cv
    );
    let _ = writeln!(
        o,
        "median CV            {:.3}  the same CV, unweighted median over (layer, expert) pairs: cold experts count as much as hot ones",
        v.median_cv
    );
    let _ = writeln!(
        o,
        "lag-1 autocorrelation {:+.3}  mean correlation of a share with the next batch's ({} pairs of relative load ≥ {}); independent batches give about −1/B = {:+.3}",
        v.lag1_autocorrelation,
        v.autocorrelation_pairs,
        AUTOCORRELATION_MIN_LOAD,
        -1.0 / v.batches as f64
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:>14} {:>7} {:>10} {:>10} {:>8}",
        "relative load", "pairs", "mean load", "median CV", "rms CV"
    );
    for b in v.by_load.iter().filter(|b| b.pairs > 0) {
        let range = if b.hi.is_finite() {
            format!("{}–{}", b.lo, b.hi)
        } else {
            format!("≥ {}", b.lo)
        };
        let _ = writeln!(
            o,
            "{range:>14} {:>7} {:>10.3} {:>10.3} {:>8.3}",
            b.pairs, b.mean_load, b.median_cv, b.rms_cv
        );
    }
    let _ = write!(
        o,
        "relative load = mean share × experts (1 = an average expert)"
    );
    o
}
