//! `moeplan calibrate`: measured kernel times in, a hardware file out
//! (`crates/moeplan/src/judge/calibrate.rs` fits it), with the fit's
//! residuals printed.

use std::borrow::Cow;
use std::path::Path;

use moeplan::formats::{MEASUREMENTS_MAX_BYTES as MAX_BYTES, read_cuda_bench, read_measurements};
use moeplan::judge::{Residuals, calibrate, residuals};

use crate::args::CalibrateArgs;
use crate::error::CliError;
use crate::io::{emit, hardware, read_file, refuse_over, write_file};

pub fn run(args: CalibrateArgs) -> Result<(), CliError> {
    let base = hardware(&args.hardware)?;
    let (rows, source) = match (&args.measurements, &args.bench, &args.aiconfigurator) {
        (_, _, Some(dir)) => {
            let model = moeplan::data::model::preset(&args.model)?;
            let read = crate::aiconfigurator::read_dir(dir, model, &base)?;
            let source = format!(
                "{} ({} measurements, priced from {})",
                read.source,
                read.measurements.len(),
                base.name
            );
            (read.measurements, source)
        }
        (Some(p), _, None) => json_rows(p, false, &base)?,
        (None, Some(p), None) => json_rows(p, true, &base)?,
        (None, None, None) => {
            return Err(moeplan::Error::Argument(
                "calibrate needs --measurements FILE, --bench FILE or --aiconfigurator DIR".into(),
            )
            .into());
        }
    };
    if args.check {
        let r = residuals(&base, &rows)?;
        if args.json {
            crate::io::emit_json(serde_json::json!({
                "hardware": base.name,
                "fitted": false,
                "source": source,
                "residuals": r,
            }));
        } else {
            emit(&format!(
                "{} as it is, on {source}\n\n{}",
                base.name,
                table(&r)
            ));
        }
        return Ok(());
    }
    let out = args.out.clone().unwrap_or_else(|| "-".into());
    let mut fitted = calibrate(&base, &rows, &source)?;
    fitted.hardware.name = Cow::Owned(
        args.name
            .clone()
            .unwrap_or_else(|| format!("{}-calibrated", base.name)),
    );
    fitted.hardware.about = Cow::Owned(format!("{} — calibrated on {source}", base.about));
    let text = serde_json::to_string_pretty(&fitted.hardware).unwrap_or_default();
    write_file(Path::new(&out), &text)?;
    let report = if args.json {
        let mut v = serde_json::json!({
            "hardware": fitted.hardware.name,
            "fitted": true,
            "source": source,
            "residuals": fitted.residuals,
        });
        v["schema_version"] = crate::io::SCHEMA_VERSION.into();
        v.to_string()
    } else {
        format!(
            "{}\n{}",
            table(&fitted.residuals),
            fitted_line(&fitted.hardware)
        )
    };
    // The file on stdout keeps stdout for it alone.
    if out == "-" {
        eprintln!("{report}");
    } else {
        emit(&report);
    }
    Ok(())
}

/// Measurements from a JSON file (`--measurements`) or moeplan-cuda's
/// bench output (`--bench`), and where they came from.
fn json_rows(
    path: &Path,
    bench: bool,
    base: &moeplan::data::hardware::Hardware,
) -> Result<(Vec<moeplan::judge::Measurement>, String), CliError> {
    refuse_over(path, MAX_BYTES, |len| {
        format!("{len} bytes is more than the {MAX_BYTES}-byte limit for a measurements file")
    })?;
    let bytes = read_file(path)?;
    let rows = if bench {
        read_cuda_bench(&bytes, base.gpu.bf16_tflops)
    } else {
        read_measurements(&bytes)
    }
    .map_err(CliError::in_file(path))?;
    let source = format!(
        "{} ({} measurements, from {})",
        file_name(path),
        rows.len(),
        base.name
    );
    Ok((rows, source))
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The residuals as a table.
fn table(residuals: &[Residuals]) -> String {
    let mut s = String::from(
        "|predicted − measured| / measured\n\n| kernel | measurements | median | worst | median bias |\n| --- | ---: | ---: | ---: | ---: |\n",
    );
    for r in residuals {
        s.push_str(&format!(
            "| {} | {} | {:.1} % | {:.1} % | {:+.1} % |\n",
            r.group, r.rows, r.median_error_pct, r.worst_error_pct, r.median_bias_pct
        ));
    }
    s
}

/// What was fitted, in one line.
fn fitted_line(h: &moeplan::data::hardware::Hardware) -> String {
    let e = h.efficiency;
    let mut s = format!(
        "fitted: HBM {:.3}, GEMM {:.3}, p {:.3}",
        e.hbm, e.gemm, e.roofline_p
    );
    if let Some(k) = h.kernels {
        s.push_str(&format!(
            "; expert compute fixed {:.1} µs; normal dispatch / combine fixed {:.1} / {:.1} µs at {:.0} GB/s (node) {:.0} GB/s (across; 0: the link's); low-latency {:.1} / {:.1} µs at {:.0} / {:.0} GB/s",
            k.moe_fixed_us,
            k.normal.dispatch_fixed_us,
            k.normal.combine_fixed_us,
            k.normal.intra_gb_per_s,
            k.normal.inter_gb_per_s,
            k.low_latency.dispatch_fixed_us,
            k.low_latency.combine_fixed_us,
            k.low_latency.intra_gb_per_s,
            k.low_latency.inter_gb_per_s,
        ));
    }
    s
}
