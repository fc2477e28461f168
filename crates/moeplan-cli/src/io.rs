//! Reading and writing: traces (files, folders, the generated default),
//! plan files, all within the reading budget; stdout that tolerates a closed
//! pipe; progress on stderr.

use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use moeplan::LoadTrace;
use moeplan::data::model;
use moeplan::formats::dataset::{self, Dataset, FolderError, FolderOptions, Sources};
use moeplan::formats::{self, ReadOptions};
use moeplan::synth::generator::{GenConfig, generate};

use crate::args::{GenArgs, SourceArgs, TraceArgs};
use crate::error::CliError;

pub fn generated(g: &GenArgs) -> Result<LoadTrace, moeplan::Error> {
    let preset = model::preset(&g.preset)?;
    let bar = spinner("generating");
    let trace = generate(&GenConfig {
        preset,
        batches: g.batches,
        tokens_per_batch: g
            .tokens_per_batch
            .unwrap_or(crate::args::GEN_TOKENS_PER_BATCH),
        seed: g.seed,
    });
    bar.finish_and_clear();
    trace
}

/// The trace alone (counts; sources, if read, dropped: even arrival).
pub fn load_trace(args: &TraceArgs) -> Result<LoadTrace, CliError> {
    load(args).map(|l| l.trace)
}

/// The trace and, where the input records them, its sources.
pub fn load(args: &TraceArgs) -> Result<Dataset, CliError> {
    let trace = match &args.trace {
        Some(path) if path.is_dir() => return read_folder(path, &args.source),
        Some(path) => {
            let bytes = read_limited(path, args.source.max_trace_mib)?;
            let options = ReadOptions {
                dataset: args.source.dataset.clone(),
                budget: budget(args.source.max_trace_mib),
            };
            let bar = spinner("reading trace");
            let trace = formats::read_trace(&bytes, &options);
            bar.finish_and_clear();
            trace.map_err(CliError::in_file(path))?
        }
        None => {
            let g = &args.source.generated;
            eprintln!(
                "no --trace given: using a generated {} trace ({} batches, seed {})",
                g.preset, g.batches, g.seed
            );
            generated(g)?
        }
    };
    Ok(Dataset {
        trace,
        sources: Sources::Even,
    })
}

/// Runs `f` with a list the core adds its notes to (what it left out of a
/// workload, one line each), and prints them on stderr.
pub fn noted<T>(
    f: impl FnOnce(&mut Vec<String>) -> Result<T, moeplan::Error>,
) -> Result<T, CliError> {
    let mut notes = Vec::new();
    let out = f(&mut notes);
    print_notes(None, &notes);
    Ok(out?)
}

/// What the core left out, one line each on stderr, after the folder's
/// name when they are about its files.
fn print_notes(dir: Option<&Path>, notes: &[String]) {
    for note in notes {
        match dir {
            Some(d) => eprintln!("{}: {note}", d.display()),
            None => eprintln!("{note}"),
        }
    }
}

/// The reading limit: what a file may expand to, not only its size on disk.
pub fn budget(max_mib: u64) -> moeplan::ReadLimits {
    moeplan::ReadLimits::mib(max_mib).with_hint("raise it with --max-trace-mib")
}

/// A file's bytes, refused before reading when it is over the limit.
pub fn read_limited(path: &Path, max_mib: u64) -> Result<Vec<u8>, CliError> {
    check_size(path, max_mib)?;
    read_file(path)
}

/// Refuses a file over the limit before reading it.
fn check_size(path: &Path, max_mib: u64) -> Result<(), CliError> {
    refuse_over(path, max_mib << 20, |len| {
        format!(
            "{} MiB is more than the {max_mib} MiB limit (raise it with --max-trace-mib)",
            len >> 20
        )
    })
}

/// Refuses a file of more than `limit` bytes before reading it, with
/// `say(its length)`.
pub fn refuse_over(
    path: &Path,
    limit: u64,
    say: impl FnOnce(u64) -> String,
) -> Result<(), CliError> {
    let len = std::fs::metadata(path)
        .map_err(|source| CliError::Read {
            path: path.display().to_string(),
            source,
        })?
        .len();
    if len > limit {
        return Err(CliError::in_file(path)(moeplan::Error::Argument(say(len))));
    }
    Ok(())
}

/// A folder of an engine's files ([`dataset::read_folder`] says which and
/// what they mean): listed here, each file read within `--max-trace-mib`,
/// one budget for the whole folder.
fn read_folder(dir: &Path, source: &SourceArgs) -> Result<Dataset, CliError> {
    let options = FolderOptions {
        token_model: model::preset(&source.token_model)?,
        batch_tokens: source
            .generated
            .tokens_per_batch
            .unwrap_or(crate::args::TOKEN_TRACE_TOKENS_PER_BATCH),
        deal: moeplan::Deal::from_name(&source.deal)?,
        budget: budget(source.max_trace_mib),
    };
    let entries = std::fs::read_dir(dir).map_err(|e| CliError::Read {
        path: dir.display().to_string(),
        source: e,
    })?;
    let names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let read = |name: &str| read_limited(&dir.join(name), source.max_trace_mib);
    let mut notes = Vec::new();
    let read = dataset::read_folder(&names, read, &options, &mut notes);
    print_notes(Some(dir), &notes);
    read.map_err(|e| match e {
        FolderError::Read(e) => e,
        FolderError::Data(e) => CliError::in_file(dir)(e),
    })
}

pub fn read_file(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|source| CliError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Writes `text` to the file `path`, or to stdout when `path` is `-`.
pub fn write_file(path: &Path, text: &str) -> Result<(), CliError> {
    if is_stdout(path) {
        emit(text);
        return Ok(());
    }
    std::fs::write(path, text).map_err(|source| CliError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// Whether `--out` names stdout (`-`).
pub fn is_stdout(path: &Path) -> bool {
    path == Path::new("-")
}

/// Where `--out` wrote, for a status line on stderr.
pub fn shown(path: &Path) -> String {
    if is_stdout(path) {
        "stdout".into()
    } else {
        path.display().to_string()
    }
}

/// Writes to stdout; a reader that went away (`| head`) ends output quietly.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

/// The version every `--json` output carries as `schema_version`, each
/// output described by its JSON Schema in `schemas/` (the book's "Every
/// JSON file and output"): a reader refuses a version newer than it knows.
pub const SCHEMA_VERSION: u32 = 1;

/// Prints `v` (an object) as one line of JSON with `schema_version`.
pub fn emit_json(mut v: serde_json::Value) {
    if let Some(o) = v.as_object_mut() {
        o.insert("schema_version".into(), SCHEMA_VERSION.into());
    }
    emit(&v.to_string());
}

/// Prints `items` under `key` as one JSON object with `schema_version`
/// (a list printed alone could carry no version).
pub fn emit_json_list<T: serde::Serialize>(key: &str, items: &T) {
    emit_json(serde_json::json!({ key: items }));
}

pub fn spinner(what: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_message(what.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

pub fn progress_bar(len: usize, what: &'static str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) = ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} layers") {
        bar.set_style(style);
    }
    bar.set_message(what);
    bar
}

/// Turns a progress bar into a spinner for a step of unknown length.
pub fn spin(bar: &ProgressBar, what: &str) {
    bar.set_style(ProgressStyle::default_spinner());
    bar.set_message(format!("dispatching ({what})"));
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
}

/// `--hardware NAME|FILE`: a preset by name, else a JSON file
/// (schemas/moeplan.hardware.schema.json), refused over its size limit
/// before it is read.
pub fn hardware(arg: &str) -> Result<moeplan::data::hardware::Hardware, CliError> {
    use moeplan::formats::{HARDWARE_MAX_BYTES as MAX_BYTES, read_hardware};
    let path = Path::new(arg);
    match moeplan::data::hardware::preset(arg) {
        Ok(h) => return Ok(h.clone()),
        // Neither a preset nor a file: the preset error lists the names.
        Err(e) if !path.exists() => return Err(e.into()),
        Err(_) => {}
    }
    refuse_over(path, MAX_BYTES, |len| {
        format!("{len} bytes is more than the {MAX_BYTES}-byte limit for a hardware file")
    })?;
    let bytes = read_file(path)?;
    read_hardware(&bytes).map_err(CliError::in_file(path))
}
