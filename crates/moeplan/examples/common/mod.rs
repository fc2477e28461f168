//! What the examples that read the shared data have in common (included
//! with `#[path]`: Cargo does not build a folder without `main.rs` as an
//! example; each uses some of these).
#![allow(dead_code)]

use std::path::Path;

use moeplan::data::model::{ModelPreset, preset};
use moeplan::formats::dataset::{Dataset, FolderError, FolderOptions, read_folder};
use moeplan::formats::read_esft;
use moeplan::{Deal, Meter, ReadLimits, TokenTrace};

/// An ESFT folder's `expert_weights_<layer>.txt` files, as the CLI reads
/// them.
pub fn read_esft_folder(dir: &Path, model: &ModelPreset) -> Result<TokenTrace, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        format!(
            "cannot read {}: {e} (pass the shared data folder)",
            dir.display()
        )
    })?;
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("expert_weights_") && name.ends_with(".txt") {
            let bytes = std::fs::read(entry.path()).map_err(|e| format!("{name}: {e}"))?;
            files.push((name, bytes));
        }
    }
    let mut meter = Meter::new(ReadLimits::default());
    read_esft(&files, model.experts, model.top_k, &mut meter)
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// A trace folder as `moeplan … --trace FOLDER --tokens-per-batch N` reads it
/// (an ESFT folder: DeepSeek-V2-Lite's token routes in batches of
/// `batch_tokens`, dealt evenly over the ranks).
pub fn read_folder_as_cli(dir: &Path, batch_tokens: usize) -> Result<Dataset, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        format!(
            "cannot read {}: {e} (pass the shared data folder)",
            dir.display()
        )
    })?;
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let options = FolderOptions {
        token_model: preset("deepseek-v2-lite").map_err(|e| e.to_string())?,
        batch_tokens,
        deal: Deal::Even,
        budget: ReadLimits::default(),
    };
    let read = |name: &str| std::fs::read(dir.join(name));
    read_folder(&names, read, &options, &mut Vec::new()).map_err(|e| {
        let why = match e {
            FolderError::Read(e) => e.to_string(),
            FolderError::Data(e) => e.to_string(),
        };
        format!("{}: {why}", dir.display())
    })
}
