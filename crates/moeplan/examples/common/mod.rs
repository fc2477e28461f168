//! What the examples that read the shared data have in common (included
//! with `#[path]`: Cargo does not build a folder without `main.rs` as an
//! example).

use std::path::Path;

use moeplan::data::model::ModelPreset;
use moeplan::formats::esft::read_esft;
use moeplan::{Budget, Meter, TokenTrace};

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
    let mut meter = Meter::new(Budget::default());
    read_esft(&files, model.experts, model.top_k, &mut meter)
        .map_err(|e| format!("{}: {e}", dir.display()))
}
