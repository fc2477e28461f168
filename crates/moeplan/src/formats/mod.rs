//! Readers and writers, one file per producer, plus detection by content.
//!
//! | format | read | write |
//! | --- | --- | --- |
//! | SGLang expert-distribution JSON (`logical_count`) | `sglang::read_expert_distribution` | — |
//! | SGLang `--init-expert-location` JSON | [`sglang::read_init_expert_location`] | `sglang::write_init_expert_location` |
//! | wide per-batch CSV (HarMoEny) | `csv::read_wide_csv` | — |
//! | SGLang legacy per-rank CSV `layer_id,expert_id,count` | [`sglang::read_rank_csvs`] (summed), `sglang::read_rank_csvs_by_rank` (per-source counts) | — |
//! | vLLM EPLB load window + physical→logical map | `vllm::read_load_window` | — |
//! | SGLang `torch.save` dumps (`.pt`, stat and per-pass modes) | `torch::read_pt` | — |
//! | moeplan trace JSON | [`trace_json::read`] | [`trace_json::write`] |
//! | moeplan plan JSON | [`plan_json::read`] | [`plan_json::write`] |
//! | NumPy `.npy` / `.npz` (`B × L × E` or `L × E`) | `npy::read_npy`, `npy::read_npz` | — |
//! | ESFT token-level `expert_weights_<layer>.txt` | [`esft::read_esft`] | — |
//! | vLLM `physical_to_logical_map` list | [`vllm::read_physical_to_logical`] | `vllm::write_physical_to_logical` |
//! | vllm-ascend expert map | [`vllm::read_ascend_expert_map`] | `vllm::write_ascend_expert_map` |
//! | plan CSV `layer,gpu,slot,expert` | [`csv::read_plan_csv`] | `csv::write_plan_csv` |
//! | TensorRT-LLM expert statistics (`rank<r>.safetensors`, `"{iteration}_{layer}"`) | `trtllm::read_statistics`, co-occurrence as affinity `trtllm::read_cooccurrence` | — |
//! | TensorRT-LLM load-balancer YAML (`initial_global_assignments`) | [`trtllm::read_placement`] | [`trtllm::write_placement`] |
//! | any plan file above, detected by content | [`plan_any::read_any_plan`] | — |
//! | measured kernel times for calibration | [`measurements::read_measurements`] | — |

pub(crate) mod csv;
pub mod dataset;
pub(crate) mod esft;
pub(crate) mod hardware;
pub(crate) mod measurements;
pub(crate) mod npy;
pub(crate) mod plan_any;
pub(crate) mod plan_json;
pub(crate) mod sglang;
pub(crate) mod torch;
pub(crate) mod trace_json;
pub(crate) mod trtllm;
pub(crate) mod vllm;

// The door: a format's module is its own; what front ends, tests and the
// fuzz targets call is named here (a folder of files is `dataset`'s).
pub use csv::read_plan_csv;
pub use esft::read_esft;
pub use hardware::{MAX_BYTES as HARDWARE_MAX_BYTES, read_hardware};
pub use measurements::{MAX_BYTES as MEASUREMENTS_MAX_BYTES, read_cuda_bench, read_measurements};
pub use npy::fuzz_header;
pub use plan_any::{PlanContext, PlanFile, detect_plan, read_any_plan};
pub use plan_json::{PlanMeta, read as read_plan_json, write as write_plan_json};
pub use sglang::{read_init_expert_location, read_rank_csvs};
pub use torch::read_pickle;
pub use trace_json::{read as read_trace_json, write as write_trace_json};
pub use trtllm::{PLACEMENT, Placement, read_placement, write_placement};
pub use vllm::{read_ascend_expert_map, read_physical_to_logical};

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

/// The trace formats [`read_trace`] recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TraceFormat {
    /// `{"logical_count": ...}` or a bare `[L][E]` / `[N][L][E]` array.
    SglangJson,
    /// moeplan's own trace JSON.
    MoeplanTrace,
    /// The wide per-batch CSV.
    WideCsv,
    /// A NumPy `.npy` array.
    Npy,
    /// A NumPy `.npz` archive.
    Npz,
    /// vLLM's EPLB load window with its physical→logical map (JSON).
    VllmLoadWindow,
    /// SGLang's legacy per-rank `layer_id,expert_id,count` CSV.
    SglangRankCsv,
    /// SGLang's `torch.save` dump (zip, or the legacy pickle stream).
    TorchPt,
    /// One TensorRT-LLM `rank<r>.safetensors` statistics file.
    TrtllmStatistics,
}

/// How to read a trace.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// For multi-dataset CSVs: keep only this dataset's rows.
    pub dataset: Option<String>,
    /// What reading may build (the input itself included).
    pub budget: crate::ReadLimits,
}

#[derive(Deserialize)]
struct Probe {
    logical_count: Option<IgnoredAny>,
    expert_load_window: Option<IgnoredAny>,
    format: Option<String>,
    counts: Option<IgnoredAny>,
    layers: Option<IgnoredAny>,
}

/// Tells which format `bytes` hold, by content.
pub(crate) fn detect(bytes: &[u8]) -> Result<TraceFormat> {
    if trtllm::is_safetensors(bytes) {
        return Ok(TraceFormat::TrtllmStatistics);
    }
    if bytes.starts_with(npy::NPY_MAGIC) {
        return Ok(TraceFormat::Npy);
    }
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return zip_kind(bytes);
    }
    if torch::is_legacy(bytes) {
        return Ok(TraceFormat::TorchPt);
    }
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    match first {
        None => Err(Error::parse("trace", "the file is empty")),
        Some(b'[') => Ok(TraceFormat::SglangJson),
        Some(b'{') => {
            let probe: Probe =
                serde_json::from_slice(body).map_err(|e| Error::parse("JSON", e.to_string()))?;
            if probe.logical_count.is_some() {
                Ok(TraceFormat::SglangJson)
            } else if probe.expert_load_window.is_some() {
                Ok(TraceFormat::VllmLoadWindow)
            } else if probe.format.as_deref() == Some(trace_json::TRACE_FORMAT)
                || probe.counts.is_some()
            {
                Ok(TraceFormat::MoeplanTrace)
            } else if probe.layers.is_some() {
                Err(Error::parse(
                    "trace",
                    "this is a plan file (it has \"layers\"), not an expert-load trace",
                ))
            } else {
                Err(Error::parse(
                    "trace",
                    "JSON object with neither \"logical_count\" (SGLang) nor \"counts\" (moeplan)",
                ))
            }
        }
        Some(_) => {
            let head = &body[..body.len().min(4096)];
            let line = head.split(|&b| b == b'\n').next().unwrap_or(head);
            if line.contains(&0) || std::str::from_utf8(line).is_err() {
                Err(Error::parse(
                    "trace",
                    "binary data, not a JSON or CSV trace",
                ))
            } else if line.starts_with(b"layer_id,expert_id,count") {
                Ok(TraceFormat::SglangRankCsv)
            } else if line.contains(&b',') {
                // (a CSV is told by its header line before any pass over the
                // whole text)
                Ok(TraceFormat::WideCsv)
            } else if trtllm::is_placement(body) {
                Err(Error::parse(
                    "trace",
                    "this is a TensorRT-LLM load-balancer placement (a plan), not an expert-load trace",
                ))
            } else {
                Err(Error::parse(
                    "trace",
                    "neither JSON nor a comma-separated header line",
                ))
            }
        }
    }
}

/// A zip is an `.npz` when it holds `.npy` members; PyTorch's `.pt`
/// (`torch.save`) is a zip with a `data.pkl`.
fn zip_kind(bytes: &[u8]) -> Result<TraceFormat> {
    // Member names sit in the zip's local headers as plain bytes.
    let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    if has(b".npy") {
        Ok(TraceFormat::Npz)
    } else if has(b"data.pkl") {
        Ok(TraceFormat::TorchPt)
    } else {
        Err(Error::parse(
            "zip",
            "a zip archive with no .npy arrays in it",
        ))
    }
}

/// Reads a trace in any supported format, detected by content.
///
/// ```
/// let t = moeplan::formats::read_trace(b"[[1, 2], [3, 4]]", &Default::default())?;
/// assert_eq!((t.num_layers(), t.num_experts()), (2, 2));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_trace(bytes: &[u8], options: &ReadOptions) -> Result<LoadTrace> {
    let mut meter = crate::Meter::new(options.budget);
    meter.bytes(bytes.len() as u64, "the file")?;
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let json = crate::data::limits::json_first(&meter, body, "the JSON")?;
    let format = detect(body)?;
    charge_text(format, body, json, &mut meter)?;
    match format {
        TraceFormat::SglangJson => {
            if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
                let v: serde_json::Value = serde_json::from_slice(body)
                    .map_err(|e| Error::parse("JSON", e.to_string()))?;
                sglang::from_counts_value(&v)
            } else {
                sglang::read_expert_distribution(body)
            }
        }
        TraceFormat::MoeplanTrace => trace_json::read(body),
        TraceFormat::WideCsv => csv::read_wide_csv(body, options.dataset.as_deref()),
        TraceFormat::Npy => npy::read_npy(bytes, &mut meter),
        TraceFormat::Npz => npy::read_npz(bytes, &mut meter),
        TraceFormat::VllmLoadWindow => vllm::read_load_window(body, &mut meter),
        TraceFormat::SglangRankCsv => {
            sglang::read_rank_csvs(&[("trace".into(), body.to_vec())], None, &mut meter)
        }
        TraceFormat::TorchPt => torch::read_pt(bytes, &mut meter),
        TraceFormat::TrtllmStatistics => {
            trtllm::read_statistics(&[("rank.safetensors", bytes)], &mut meter).map(|s| s.trace)
        }
    }
}

/// Text formats are parsed into values whose number the text itself bounds:
/// charge that bound (and the nesting) before parsing, so a reader never
/// builds more than the budget allows.
fn charge_text(
    format: TraceFormat,
    body: &[u8],
    json: Option<(u64, u32)>,
    meter: &mut crate::Meter,
) -> Result<()> {
    match format {
        TraceFormat::SglangJson | TraceFormat::MoeplanTrace | TraceFormat::VllmLoadWindow => {
            crate::data::limits::charge_json_shape(meter, body, json, "the JSON")
        }
        TraceFormat::WideCsv | TraceFormat::SglangRankCsv => {
            crate::data::limits::charge_fields(meter, body, 8, "the CSV")
        }
        TraceFormat::Npy
        | TraceFormat::Npz
        | TraceFormat::TorchPt
        | TraceFormat::TrtllmStatistics => Ok(()),
    }
}

/// A plan file format moeplan writes and reads: the one list
/// (`PlanFormat::ALL`) the CLI's `--format` is parsed from, the page's
/// export filters and [`plan_any::read_any_plan`] tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlanFormat {
    /// moeplan's plan JSON.
    Moeplan,
    /// SGLang's `--init-expert-location` JSON.
    Sglang,
    /// vLLM's `physical_to_logical_map`.
    Vllm,
    /// vllm-ascend's expert map.
    VllmAscend,
    /// The plan CSV.
    Csv,
    /// TensorRT-LLM's load-balancer YAML.
    Trtllm,
}

impl PlanFormat {
    /// Every plan file, in the order front ends list them.
    pub const ALL: [PlanFormat; 6] = [
        PlanFormat::Moeplan,
        PlanFormat::Sglang,
        PlanFormat::Vllm,
        PlanFormat::VllmAscend,
        PlanFormat::Csv,
        PlanFormat::Trtllm,
    ];

    /// The name `--format` and the page take.
    pub fn name(self) -> &'static str {
        match self {
            PlanFormat::Moeplan => "moeplan",
            PlanFormat::Sglang => "sglang",
            PlanFormat::Vllm => "vllm",
            PlanFormat::VllmAscend => "vllm-ascend",
            PlanFormat::Csv => "csv",
            PlanFormat::Trtllm => "trtllm",
        }
    }

    /// One line on what it is, for help texts.
    pub fn about(self) -> &'static str {
        match self {
            PlanFormat::Moeplan => "moeplan's plan JSON (eval reads it).",
            PlanFormat::Sglang => "SGLang's --init-expert-location JSON.",
            PlanFormat::Vllm => {
                "vLLM's physical_to_logical_map as a JSON list, one row per MoE layer; vLLM loads \
                 no such file: set it in EplbState yourself (docs/formats.md)."
            }
            PlanFormat::VllmAscend => "vllm-ascend's expert-map JSON.",
            PlanFormat::Csv => "CSV: layer,gpu,slot,expert.",
            PlanFormat::Trtllm => {
                "TensorRT-LLM's MoE load-balancer YAML (initial_global_assignments)."
            }
        }
    }

    /// The format's name in messages.
    ///
    /// ```
    /// use moeplan::formats::PlanFormat;
    /// assert_eq!(PlanFormat::Csv.describe(), "plan CSV");
    /// ```
    pub fn describe(self) -> &'static str {
        match self {
            PlanFormat::Moeplan => "moeplan plan JSON",
            PlanFormat::Sglang => "SGLang --init-expert-location",
            PlanFormat::Vllm => "vLLM physical_to_logical_map",
            PlanFormat::VllmAscend => "vllm-ascend expert map",
            PlanFormat::Csv => "plan CSV",
            PlanFormat::Trtllm => trtllm::PLACEMENT,
        }
    }

    /// The plan file named `name` ([`PlanFormat::name`]).
    ///
    /// ```
    /// use moeplan::formats::PlanFormat;
    /// assert_eq!(PlanFormat::from_name("vllm-ascend")?, PlanFormat::VllmAscend);
    /// assert!(PlanFormat::from_name("yaml").is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn from_name(name: &str) -> Result<PlanFormat> {
        PlanFormat::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = PlanFormat::ALL.iter().map(|f| f.name()).collect();
                Error::Argument(format!(
                    "unknown plan format {name:?}: one of {}",
                    names.join(", ")
                ))
            })
    }

    /// Whether the engine needs the same slot count on every GPU in every
    /// layer (all but moeplan's own JSON and the CSV).
    pub fn needs_uniform_slots(self) -> bool {
        !matches!(self, PlanFormat::Moeplan | PlanFormat::Csv)
    }

    /// How the file names layers, when by model layer ([`ModelKeyed`]).
    pub fn model_keyed(self) -> Option<ModelKeyed> {
        match self {
            PlanFormat::Sglang => Some(ModelKeyed::Rows),
            PlanFormat::Trtllm => Some(ModelKeyed::Keys),
            _ => None,
        }
    }

    /// `plan` in this format; `meta` is what moeplan's JSON records, and its
    /// `model_layers` what files keyed by model layer need.
    ///
    /// ```
    /// use moeplan::formats::{PlanFormat, PlanMeta};
    /// use moeplan::{LoadTrace, Topology, planners::contiguous};
    /// let t = LoadTrace::new(ndarray::Array3::from_elem((1, 1, 4), 1.0), vec![0])?;
    /// let plan = contiguous(&t, Topology::new(1, 2)?)?;
    /// let csv = PlanFormat::Csv.write(&plan, &PlanMeta::default())?;
    /// assert!(csv.starts_with("layer,gpu,slot,expert"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write(self, plan: &crate::Plan, meta: &plan_json::PlanMeta) -> Result<String> {
        match self {
            PlanFormat::Moeplan => Ok(plan_json::write(plan, meta)),
            PlanFormat::Sglang => sglang::write_init_expert_location(plan, meta.model_layers),
            PlanFormat::Vllm => vllm::write_physical_to_logical(plan),
            PlanFormat::VllmAscend => vllm::write_ascend_expert_map(plan),
            PlanFormat::Csv => Ok(csv::write_plan_csv(plan)),
            PlanFormat::Trtllm => trtllm::write_placement(plan, meta.model_layers),
        }
    }
}

/// An engine file that names layers by model (decoder) layer id, not by
/// MoE position (vLLM's and vllm-ascend's rows are positions and need no
/// check).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKeyed {
    /// SGLang's `--init-expert-location`: a row per model layer, dense ones
    /// included, so the model's layer count must be known.
    Rows,
    /// TensorRT-LLM's YAML: keys are decoder layer indices, so ids `0..L` of
    /// a trace that does not know its model (they may be positions) are
    /// refused; ids that do not start at 0 were named by their source.
    Keys,
}

/// [`check_model_layers`] for `plan`'s layers and experts: what the writers
/// call.
pub(crate) fn check_plan_model_layers(
    file: ModelKeyed,
    plan: &crate::Plan,
    model_layers: Option<usize>,
) -> Result<()> {
    let ids: Vec<u32> = plan.layers().iter().map(|l| l.layer).collect();
    check_model_layers(file, &ids, plan.num_experts(), model_layers)
}

/// Whether a `file` keyed by model layer can be written for MoE layers
/// `layer_ids` of `num_experts` experts when the model's layer count is
/// `model_layers` (`None`: the trace knows only its MoE layers): the one
/// check every writer of such a file and the CLI (before planning) share.
/// The refusal says what the engine would do with a wrong key and how to
/// name the model.
///
/// ```
/// use moeplan::formats::{check_model_layers, ModelKeyed};
/// assert!(check_model_layers(ModelKeyed::Keys, &[3, 4], 8, None).is_ok());
/// assert!(check_model_layers(ModelKeyed::Keys, &[0, 1], 8, None).is_err());
/// assert!(check_model_layers(ModelKeyed::Rows, &[3, 4], 8, None).is_err());
/// assert!(check_model_layers(ModelKeyed::Rows, &[0, 1], 8, Some(2)).is_ok());
/// ```
pub fn check_model_layers(
    file: ModelKeyed,
    layer_ids: &[u32],
    num_experts: usize,
    model_layers: Option<usize>,
) -> Result<()> {
    let positions = layer_ids.iter().enumerate().all(|(i, &l)| l as usize == i);
    let (format, why) = match file {
        ModelKeyed::Rows => (
            "SGLang --init-expert-location",
            "SGLang indexes rows by model layer: a short file loads silently and serves every \
             layer another layer's experts",
        ),
        ModelKeyed::Keys => (
            trtllm::PLACEMENT,
            "TensorRT-LLM looks layers up by decoder layer index: a file keyed by MoE position \
             gives each layer another layer's slots and stops the engine at the first index \
             past them",
        ),
    };
    let refused = model_layers.is_none() && (file == ModelKeyed::Rows || positions);
    if !refused {
        return Ok(());
    }
    let moe = layer_ids.len();
    let (first, last) = (
        layer_ids.first().copied().unwrap_or(0),
        layer_ids.last().copied().unwrap_or(0),
    );
    let name = crate::data::model::PRESETS
        .iter()
        .find(|p| p.experts == num_experts && p.moe_layers() == moe)
        .map_or("deepseek-v3", |p| p.name);
    // Ids 0..L may be positions (dense layers somewhere else) or the
    // model's own ids (no dense layer among them); other ids are the model's.
    let ids_are_the_models = if positions {
        format!("--model-layers {moe} if ids 0..{last} are already the model's layer ids")
    } else {
        format!(
            "--model-layers N (at least {}) for a model of N layers",
            last + 1
        )
    };
    Err(Error::Export {
        format,
        message: format!(
            "the model's layer count is unknown (the trace holds only its {moe} MoE layers, \
             numbered {first}..{last}) and {why}; name the model with --model {name} (it says \
             where the dense layers are), or {ids_are_the_models}"
        ),
    })
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn formats_detect_example() {
        let run = || {
            use moeplan::formats::{TraceFormat, detect};
            assert_eq!(
                detect(br#"{"logical_count": [[1]]}"#)?,
                TraceFormat::SglangJson
            );
            assert_eq!(
                detect(b"dataset,iteration,layer_idx,0\n")?,
                TraceFormat::WideCsv
            );
            assert!(detect(b"").is_err());
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
