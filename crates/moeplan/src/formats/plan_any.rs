//! Every plan format moeplan writes, read back through one door: the format
//! is detected by content, and what the file does not hold (the topology,
//! the MoE layers' model ids, the expert count) comes from a
//! [`PlanContext`] — the trace the plan is judged on and the cluster the
//! user names.
//!
//! | format | told by | holds the topology | layers |
//! | --- | --- | --- | --- |
//! | moeplan plan JSON | an object with `layers` | yes (missing: one node) | model ids, in the file |
//! | SGLang `--init-expert-location` | an object with `physical_to_logical_map` (and no `expert_load_window`, which a vLLM load window has) | no | a row per model layer, dense ones included: the rows of the context's MoE layer ids are read |
//! | vLLM `physical_to_logical_map` list | a JSON array | no | a row per MoE layer, in the context's order |
//! | vllm-ascend expert map | an object with `layer_list` | its device count, not its nodes (missing: one node) | entry `i` is the context's `i`-th MoE layer |
//! | plan CSV `layer,gpu,slot,expert` | that header line | no | model ids, in the file |
//! | TensorRT-LLM load-balancer YAML | a top-level `initial_global_assignments:` or `num_slots:` line (or a JSON object with them) | its `ep_size` when written (missing: from the context) | model ids, in the file; must be the context's |
//!
//! A file that is a trace (`logical_count`, `counts`, a load window, a
//! wide or per-rank CSV) is refused as such. Everything read is charged to
//! the context's [`crate::ReadLimits`] before it is parsed.
//!
//! SGLang's rows are indexed by model layer; when the context only knows
//! MoE positions `0..L` (a trace without its dense layers) and the file has
//! more rows, which rows are dense is unknown and the file is refused with
//! the preset that would place the trace (`--model`), never read off the
//! dense rows.
//!
//! Cost: one parse of the file for detection and one for the reader.

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::data::plan::Plan;
use crate::data::topology::Topology;
use crate::error::{Error, Result};

use super::plan_json::{self, PlanMeta};
use super::{PlanFormat, csv, sglang, vllm};

impl PlanFormat {
    /// Whether the file says how many GPUs there are (moeplan JSON also
    /// says how they form nodes). Files that do not need a topology from
    /// the context.
    #[cfg(test)]
    pub(crate) fn holds_gpu_count(&self) -> bool {
        matches!(self, PlanFormat::Moeplan | PlanFormat::VllmAscend)
    }
}

/// What a plan file may not hold, from the trace and the user.
#[derive(Debug, Clone, Copy)]
pub struct PlanContext<'a> {
    /// The cluster; needed by the formats that list slots without saying
    /// which GPU owns them (SGLang, vLLM, CSV). A moeplan JSON that holds
    /// its own topology must agree with it.
    pub topology: Option<Topology>,
    /// The trace's MoE layer ids — model layer ids when the trace knows its
    /// model ([`crate::LoadTrace::known_model_layers`]), positions `0..L`
    /// otherwise.
    pub layer_ids: &'a [u32],
    /// Logical experts per layer.
    pub num_experts: usize,
    /// The model's layer count, dense layers included, when known.
    pub model_layers: Option<usize>,
    /// What reading may build (the file included).
    pub budget: crate::ReadLimits,
}

impl<'a> PlanContext<'a> {
    /// The context a trace gives, with the user's topology if any.
    ///
    /// ```
    /// use moeplan::{formats::PlanContext, LoadTrace};
    /// use ndarray::Array3;
    /// let t = LoadTrace::new(Array3::from_elem((1, 2, 4), 1.0), vec![1, 2])?.with_model_layers(3);
    /// let ctx = PlanContext::for_trace(&t, None);
    /// assert_eq!((ctx.layer_ids, ctx.num_experts, ctx.model_layers), (&[1, 2][..], 4, Some(3)));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn for_trace(trace: &'a crate::LoadTrace, topology: Option<Topology>) -> Self {
        PlanContext {
            topology,
            layer_ids: trace.layer_ids(),
            num_experts: trace.num_experts(),
            model_layers: trace.known_model_layers(),
            budget: crate::ReadLimits::default(),
        }
    }
}

/// A plan read from a file, and what the file said about it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanFile {
    /// The plan (algorithm `imported` unless the file names it).
    pub plan: Plan,
    /// The format it was read as.
    pub format: PlanFormat,
    /// What the file recorded: all of it for moeplan JSON; the model's
    /// layer count (its row count) for SGLang; nothing otherwise.
    pub meta: PlanMeta,
    /// The topology was neither in the file nor in the context: the
    /// file's devices were taken as one node (vllm-ascend; a moeplan JSON
    /// without `topology`).
    pub topology_assumed: bool,
}

#[derive(Deserialize)]
struct Probe {
    layers: Option<IgnoredAny>,
    topology: Option<IgnoredAny>,
    physical_to_logical_map: Option<IgnoredAny>,
    expert_load_window: Option<IgnoredAny>,
    layer_list: Option<IgnoredAny>,
    logical_count: Option<IgnoredAny>,
    counts: Option<IgnoredAny>,
    initial_global_assignments: Option<IgnoredAny>,
    num_slots: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct SglangRows {
    physical_to_logical_map: Vec<IgnoredAny>,
}

const NOT_A_PLAN: &str = "a plan file is moeplan plan JSON (\"layers\"), SGLang --init-expert-location (\"physical_to_logical_map\"), a vLLM physical_to_logical_map list, a vllm-ascend expert map (\"layer_list\"), a plan CSV (layer,gpu,slot,expert) or a TensorRT-LLM load-balancer YAML (initial_global_assignments)";

/// Tells which plan format `bytes` hold, by content.
///
/// ```
/// use moeplan::formats::{PlanFormat, detect_plan};
/// assert_eq!(
///     detect_plan(br#"{"physical_to_logical_map": [[0, 1]]}"#)?,
///     PlanFormat::Sglang
/// );
/// assert_eq!(detect_plan(b"[[0, 1]]")?, PlanFormat::Vllm);
/// assert_eq!(
///     detect_plan(b"layer,gpu,slot,expert\n0,0,0,0\n")?,
///     PlanFormat::Csv
/// );
/// let trace = detect_plan(br#"{"logical_count": [[1, 2]]}"#).unwrap_err();
/// assert!(trace.to_string().contains("not a plan"));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn detect_plan(bytes: &[u8]) -> Result<PlanFormat> {
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        None => Err(Error::parse("plan", "the file is empty")),
        Some(b'[') => Ok(PlanFormat::Vllm),
        Some(b'{') => {
            let p: Probe =
                serde_json::from_slice(body).map_err(|e| Error::parse("JSON", e.to_string()))?;
            if p.layers.is_some() {
                Ok(PlanFormat::Moeplan)
            } else if p.expert_load_window.is_some() {
                Err(trace_not_plan("a vLLM expert load window"))
            } else if p.physical_to_logical_map.is_some() {
                Ok(PlanFormat::Sglang)
            } else if p.layer_list.is_some() {
                Ok(PlanFormat::VllmAscend)
            } else if p.initial_global_assignments.is_some() || p.num_slots.is_some() {
                Ok(PlanFormat::Trtllm)
            } else if p.logical_count.is_some() {
                Err(trace_not_plan(
                    "an SGLang expert distribution (\"logical_count\")",
                ))
            } else if p.counts.is_some() {
                Err(trace_not_plan("a moeplan trace (\"counts\")"))
            } else {
                Err(Error::parse(
                    "plan",
                    format!("unknown JSON object: {NOT_A_PLAN}"),
                ))
            }
        }
        Some(_) => {
            // A CSV is told by its header line, before any pass over the
            // whole text.
            let head = &body[..body.len().min(4096)];
            let line = head.split(|&b| b == b'\n').next().unwrap_or(head);
            let line = String::from_utf8_lossy(line);
            let fields: Vec<&str> = line.trim().split(',').map(str::trim).collect();
            if fields == ["layer", "gpu", "slot", "expert"] {
                Ok(PlanFormat::Csv)
            } else if fields.starts_with(&["layer_id", "expert_id", "count"])
                || fields.contains(&"layer_idx")
            {
                Err(trace_not_plan("an expert-count CSV"))
            } else if super::trtllm::is_placement(body) {
                Ok(PlanFormat::Trtllm)
            } else {
                Err(Error::parse(
                    "plan",
                    format!("unknown content: {NOT_A_PLAN}"),
                ))
            }
        }
    }
}

fn trace_not_plan(what: &str) -> Error {
    Error::parse(
        "plan",
        format!("this is {what}, an expert-load trace, not a plan; {NOT_A_PLAN}"),
    )
}

/// Reads any plan file moeplan writes ([`PlanFormat`]), detected by
/// content, for the trace and cluster in `ctx`.
pub fn read_any_plan(bytes: &[u8], ctx: &PlanContext<'_>) -> Result<PlanFile> {
    let mut meter = crate::Meter::new(ctx.budget);
    meter.bytes(bytes.len() as u64, "the plan file")?;
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    // (YAML's nesting is charged first thing by its reader, a CSV has none)
    let json = crate::data::limits::json_first(&meter, body, "the plan JSON")?;
    let format = detect_plan(body)?;
    if format == PlanFormat::Csv {
        crate::data::limits::charge_fields(&mut meter, body, 8, "the plan CSV")?;
    } else if format == PlanFormat::Trtllm {
        // charged by its reader, number by number
    } else {
        crate::data::limits::charge_json_shape(&mut meter, body, json, "the plan JSON")?;
    }
    let needs_topology = || {
        ctx.topology.ok_or_else(|| {
            Error::Argument(format!(
                "the {} file lists slots but not which GPU holds them: give the cluster \
                 (--gpus-per-node, and --nodes for more than one node)",
                format.describe()
            ))
        })
    };
    let (ids, e) = (ctx.layer_ids, ctx.num_experts);
    let mut meta = PlanMeta::default();
    let mut topology_assumed = false;
    let plan = match format {
        PlanFormat::Moeplan => {
            let (plan, file_meta) = plan_json::read(body)?;
            meta = file_meta;
            let p: Probe =
                serde_json::from_slice(body).map_err(|x| Error::parse("JSON", x.to_string()))?;
            match (p.topology.is_some(), ctx.topology) {
                (true, Some(t)) if t != plan.topology() => {
                    return Err(Error::Mismatch(format!(
                        "the plan file is for {}, the cluster given is {t}",
                        plan.topology()
                    )));
                }
                // no topology in the file: the given one splits its GPUs
                (false, Some(t)) => Plan::new(
                    t,
                    plan.num_experts(),
                    plan.layers().to_vec(),
                    plan.algorithm(),
                )?,
                (false, None) => {
                    topology_assumed = true;
                    plan
                }
                (true, _) => plan,
            }
        }
        PlanFormat::Sglang => {
            let rows: SglangRows = serde_json::from_slice(body)
                .map_err(|x| Error::parse(format.describe(), x.to_string()))?;
            let rows = rows.physical_to_logical_map.len();
            check_sglang_rows(rows, ctx)?;
            meta.model_layers = Some(rows);
            sglang::read_init_expert_location(body, needs_topology()?, ids, e)?
        }
        PlanFormat::Vllm => vllm::read_physical_to_logical(body, needs_topology()?, ids, e)?,
        PlanFormat::VllmAscend => {
            topology_assumed = ctx.topology.is_none();
            vllm::read_ascend_expert_map(body, ctx.topology, ids, e)?
        }
        PlanFormat::Csv => csv::read_plan_csv(body, needs_topology()?, e)?,
        PlanFormat::Trtllm => {
            let (plan, assumed) =
                super::trtllm::read_placement(body, ctx.topology, ids, e, &mut meter)?;
            topology_assumed = assumed;
            plan
        }
    };
    Ok(PlanFile {
        plan,
        format,
        meta,
        topology_assumed,
    })
}

/// SGLang's rows are model layers: the count must be the model's, and MoE
/// positions cannot be matched to rows without knowing which are dense.
fn check_sglang_rows(rows: usize, ctx: &PlanContext<'_>) -> Result<()> {
    const F: &str = "SGLang --init-expert-location";
    let l = ctx.layer_ids.len();
    if let Some(m) = ctx.model_layers {
        if rows != m {
            return Err(Error::Mismatch(format!(
                "the {F} file has {rows} rows (one per model layer), the trace's model {m} layers"
            )));
        }
        return Ok(());
    }
    let positions = ctx
        .layer_ids
        .iter()
        .enumerate()
        .all(|(i, &id)| id as usize == i);
    if positions && rows > l {
        let name = crate::data::model::PRESETS
            .iter()
            .find(|p| p.experts == ctx.num_experts && p.total_layers == rows && p.moe_layers() == l)
            .map_or("PRESET".to_string(), |p| p.name.to_string());
        return Err(Error::Argument(format!(
            "the {F} file has {rows} rows, one per model layer with the dense ones, but the \
             trace holds only its {l} MoE layers numbered 0..{} and not which model layers \
             they are: name the model with --model {name} (or use a trace that keeps the dense \
             layers, as SGLang's dump does)",
            l.saturating_sub(1)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::{EplbConfig, eplb};
    use crate::{LoadTrace, data::model, synth::generator};

    fn olmoe() -> LoadTrace {
        generator::generate(&generator::GenConfig::new(
            model::preset("olmoe").unwrap(),
            2,
        ))
        .unwrap()
    }

    fn plan_of(trace: &LoadTrace, t: Topology) -> Plan {
        eplb(
            trace,
            t,
            EplbConfig {
                redundant_experts: 8,
                groups: 1,
            },
        )
        .unwrap()
    }

    #[test]
    fn every_written_format_reads_back_to_the_same_layers() {
        let trace = olmoe();
        let t = Topology::new(2, 4).unwrap();
        let plan = plan_of(&trace, t);
        let ctx = PlanContext::for_trace(&trace, Some(t));
        let fixed = plan
            .without_same_gpu_duplicates(trace.summed().view())
            .unwrap();
        let files = [
            (
                PlanFormat::Moeplan,
                plan_json::write(&plan, &PlanMeta::default()),
                &plan,
            ),
            (
                PlanFormat::Sglang,
                sglang::write_init_expert_location(&plan, Some(16)).unwrap(),
                &plan,
            ),
            (
                PlanFormat::Vllm,
                vllm::write_physical_to_logical(&plan).unwrap(),
                &plan,
            ),
            (
                PlanFormat::VllmAscend,
                vllm::write_ascend_expert_map(&fixed).unwrap(),
                &fixed,
            ),
            (PlanFormat::Csv, csv::write_plan_csv(&plan), &plan),
            (
                PlanFormat::Trtllm,
                super::super::trtllm::write_placement(&plan, Some(16)).unwrap(),
                &plan,
            ),
        ];
        for (format, text, want) in files {
            let got = read_any_plan(text.as_bytes(), &ctx).unwrap();
            assert_eq!(got.format, format);
            assert_eq!(got.plan.layers(), want.layers(), "{format:?}");
            assert_eq!(got.plan.topology(), t, "{format:?}");
            assert!(!got.topology_assumed);
        }
    }

    #[test]
    fn formats_without_gpus_need_the_topology() {
        let trace = olmoe();
        let plan = plan_of(&trace, Topology::new(1, 8).unwrap());
        let ctx = PlanContext::for_trace(&trace, None);
        for text in [
            sglang::write_init_expert_location(&plan, Some(16)).unwrap(),
            vllm::write_physical_to_logical(&plan).unwrap(),
            csv::write_plan_csv(&plan),
        ] {
            let err = read_any_plan(text.as_bytes(), &ctx).unwrap_err();
            assert!(err.to_string().contains("--gpus-per-node"), "{err}");
        }
        // the moeplan JSON and the ascend map hold their GPUs
        let json = plan_json::write(&plan, &PlanMeta::default());
        assert_eq!(read_any_plan(json.as_bytes(), &ctx).unwrap().plan, plan);
    }

    #[test]
    fn a_moeplan_topology_must_agree_with_the_given_one() {
        let trace = olmoe();
        let plan = plan_of(&trace, Topology::new(1, 8).unwrap());
        let json = plan_json::write(&plan, &PlanMeta::default());
        let ctx = PlanContext::for_trace(&trace, Some(Topology::new(2, 4).unwrap()));
        let err = read_any_plan(json.as_bytes(), &ctx).unwrap_err();
        assert!(err.to_string().contains("1 node(s) × 8 GPU(s)"), "{err}");
        // a file without one takes the given split
        let bare = format!(
            r#"{{"layers": {}}}"#,
            serde_json::to_string(plan.layers()).unwrap()
        );
        let read = read_any_plan(bare.as_bytes(), &ctx).unwrap();
        assert_eq!(read.plan.topology(), Topology::new(2, 4).unwrap());
        let alone = PlanContext::for_trace(&trace, None);
        assert!(
            read_any_plan(bare.as_bytes(), &alone)
                .unwrap()
                .topology_assumed
        );
    }

    #[test]
    fn sglang_rows_follow_model_layers_never_dense_rows() {
        // DeepSeek-V3's shape: 3 dense layers, MoE layers 3..60
        let p = model::preset("deepseek-v3").unwrap();
        let counts = ndarray::Array3::from_elem((1, 58, 256), 1.0);
        let placed = LoadTrace::new(counts.clone(), (3..61).collect())
            .unwrap()
            .with_model_layers(61);
        let t = Topology::new(1, 8).unwrap();
        let plan = crate::planners::contiguous(&placed, t).unwrap();
        let file = sglang::write_init_expert_location(&plan, Some(p.total_layers)).unwrap();
        let read =
            read_any_plan(file.as_bytes(), &PlanContext::for_trace(&placed, Some(t))).unwrap();
        assert_eq!(read.plan.layers()[0].layer, 3);
        assert_eq!(read.plan.layers(), plan.layers());
        // MoE positions 0..57: which rows are dense is unknown
        let moe_only = LoadTrace::new(counts, (0..58).collect()).unwrap();
        let err = read_any_plan(file.as_bytes(), &PlanContext::for_trace(&moe_only, Some(t)))
            .unwrap_err();
        assert!(err.to_string().contains("--model deepseek-v3"), "{err}");
        // a model of another layer count
        let other = moe_only.with_model_layers(59);
        let err =
            read_any_plan(file.as_bytes(), &PlanContext::for_trace(&other, Some(t))).unwrap_err();
        assert!(err.to_string().contains("61 rows"), "{err}");
    }

    #[test]
    fn traces_are_not_plans() {
        for text in [
            &br#"{"logical_count": [[1, 2]]}"#[..],
            br#"{"format": "moeplan.trace", "counts": [[[1]]]}"#,
            br#"{"expert_load_window": [], "physical_to_logical_map": []}"#,
            b"layer_id,expert_id,count\n0,0,1\n",
            b",dataset,iteration,layer_idx,0\n",
        ] {
            let err = detect_plan(text).unwrap_err().to_string();
            assert!(err.contains("not a plan"), "{err}");
        }
        assert!(detect_plan(br#"{"hello": 1}"#).is_err());
        assert!(detect_plan(b"").is_err());
        assert!(detect_plan(b"\x00\x01").is_err());
    }

    #[test]
    fn reading_is_within_the_budget() {
        let trace = olmoe();
        let plan = plan_of(&trace, Topology::new(1, 8).unwrap());
        let json = plan_json::write(&plan, &PlanMeta::default());
        let mut ctx = PlanContext::for_trace(&trace, None);
        ctx.budget = crate::ReadLimits::mib(0);
        let err = read_any_plan(json.as_bytes(), &ctx).unwrap_err();
        assert!(matches!(err, Error::Limit(_)), "{err}");
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn holds_gpu_count() {
        use crate::formats::PlanFormat;
        assert!(PlanFormat::Moeplan.holds_gpu_count());
        assert!(!PlanFormat::Sglang.holds_gpu_count());
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {

    #[test]
    fn plan_any_read_any_plan_example() {
        let run = || {
            use moeplan::formats::PlanFormat;
            use moeplan::formats::sglang;
            use moeplan::formats::{PlanContext, read_any_plan};
            use moeplan::{LoadTrace, Topology, planners::eplb};
            use ndarray::Array3;
            // MoE layers 1 and 2 of a 3-layer model (layer 0 dense), 4 experts, 2 GPUs
            let trace =
                LoadTrace::new(Array3::from_elem((1, 2, 4), 1.0), vec![1, 2])?.with_model_layers(3);
            let plan = eplb::base(&trace, Topology::new(1, 2)?, 1)?;
            let file = sglang::write_init_expert_location(&plan, Some(3))?;
            // the file has three rows and no topology: the cluster comes from the context
            let ctx = PlanContext::for_trace(&trace, Some(Topology::new(1, 2)?));
            let read = read_any_plan(file.as_bytes(), &ctx)?;
            assert_eq!(read.format, PlanFormat::Sglang);
            assert_eq!(read.plan.layers(), plan.layers());
            assert_eq!(read.meta.model_layers, Some(3));
            let none = PlanContext::for_trace(&trace, None);
            assert!(
                read_any_plan(file.as_bytes(), &none)
                    .unwrap_err()
                    .to_string()
                    .contains("--gpus-per-node")
            );
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
