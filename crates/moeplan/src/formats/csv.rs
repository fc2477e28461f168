//! The wide per-batch CSV: one row per (batch, layer), one column per expert.
//!
//! Header: an optional unnamed index column, an optional `dataset` column, a
//! batch column (`iteration`, `batch` or `step`), a layer column
//! (`layer_idx`, `layer` or `layer_id`), then the experts `0, 1, …, E−1` —
//! the layout of HarMoEny's `expert_freq_*.csv`. Batches are the distinct
//! (dataset, batch) pairs in order of first appearance; every batch must list
//! the same layers.

use std::collections::{BTreeMap, HashMap};

use ndarray::Array3;

use crate::data::plan::{LayerPlacement, Plan};
use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

const FORMAT: &str = "wide per-batch CSV";

/// Reads the wide CSV; with `dataset`, keeps only that dataset's rows.
pub(crate) fn read_wide_csv(bytes: &[u8], dataset: Option<&str>) -> Result<LoadTrace> {
    let mut reader = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(bytes);
    let header = reader
        .headers()
        .map_err(|e| Error::parse(FORMAT, e.to_string()))?
        .clone();
    let find = |names: &[&str]| {
        header
            .iter()
            .position(|h| names.iter().any(|n| h.trim().eq_ignore_ascii_case(n)))
    };
    let batch_col = find(&["iteration", "batch", "step"]).ok_or_else(|| {
        Error::parse(
            FORMAT,
            "header has no batch column (iteration, batch or step)",
        )
    })?;
    let layer_col = find(&["layer_idx", "layer", "layer_id"]).ok_or_else(|| {
        Error::parse(
            FORMAT,
            "header has no layer column (layer_idx, layer or layer_id)",
        )
    })?;
    let dataset_col = find(&["dataset"]);
    let expert_cols: Vec<usize> = header
        .iter()
        .enumerate()
        .filter(|(_, h)| !h.trim().is_empty() && h.trim().bytes().all(|c| c.is_ascii_digit()))
        .map(|(i, _)| i)
        .collect();
    for (x, &col) in expert_cols.iter().enumerate() {
        if header[col].trim().parse::<usize>().ok() != Some(x) {
            return Err(Error::parse(
                FORMAT,
                format!(
                    "expert columns must be numbered 0, 1, 2, …; column {} is named {:?}",
                    col + 1,
                    &header[col]
                ),
            ));
        }
    }
    let e = expert_cols.len();
    if e == 0 {
        return Err(Error::parse(
            FORMAT,
            "header names no expert columns (0, 1, 2, …)",
        ));
    }

    let mut batch_index: Vec<(String, String)> = Vec::new();
    let mut batch_of: HashMap<(String, String), usize> = HashMap::new();
    let mut cells: BTreeMap<(usize, u32), Vec<f64>> = BTreeMap::new();
    for (line, record) in reader.records().enumerate() {
        let line = line + 2;
        let record = record.map_err(|x| Error::parse(FORMAT, format!("line {line}: {x}")))?;
        let ds = dataset_col
            .map(|c| record[c].trim().to_string())
            .unwrap_or_default();
        if dataset.is_some_and(|want| want != ds) {
            continue;
        }
        let key = (ds, record[batch_col].trim().to_string());
        let b = *batch_of.entry(key.clone()).or_insert_with(|| {
            batch_index.push(key);
            batch_index.len() - 1
        });
        let layer: u32 = record[layer_col].trim().parse().map_err(|_| {
            Error::parse(
                FORMAT,
                format!(
                    "line {line}: layer {:?} is not a whole number",
                    &record[layer_col]
                ),
            )
        })?;
        let row = expert_cols
            .iter()
            .map(|&c| {
                record[c].trim().parse::<f64>().map_err(|_| {
                    Error::parse(
                        FORMAT,
                        format!(
                            "line {line}, expert {}: {:?} is not a number",
                            &header[c], &record[c]
                        ),
                    )
                })
            })
            .collect::<Result<Vec<f64>>>()?;
        if cells.insert((b, layer), row).is_some() {
            return Err(Error::parse(
                FORMAT,
                format!(
                    "line {line}: batch {:?} lists layer {layer} twice",
                    batch_index[b].1
                ),
            ));
        }
    }
    if batch_index.is_empty() {
        return Err(match dataset {
            Some(d) => Error::parse(FORMAT, format!("no rows for dataset {d:?}")),
            None => Error::parse(FORMAT, "no data rows"),
        });
    }
    let layers: Vec<u32> = {
        let mut v: Vec<u32> = cells.keys().map(|&(_, l)| l).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let b = batch_index.len();
    let mut counts = Array3::zeros((b, layers.len(), e));
    for bi in 0..b {
        for (li, &layer) in layers.iter().enumerate() {
            let row = cells.get(&(bi, layer)).ok_or_else(|| {
                Error::parse(
                    FORMAT,
                    format!("batch {:?} has no row for layer {layer}", batch_index[bi].1),
                )
            })?;
            for (x, &v) in row.iter().enumerate() {
                counts[[bi, li, x]] = v;
            }
        }
    }
    LoadTrace::new(counts, layers)
}

/// A plan as CSV: `layer,gpu,slot,expert`, one row per slot, GPU ids
/// node-major. Any plan fits (slot counts may vary).
pub(crate) fn write_plan_csv(plan: &Plan) -> String {
    let mut out = String::from("layer,gpu,slot,expert\n");
    for lp in plan.layers() {
        for (g, slots) in lp.gpus.iter().enumerate() {
            for (s, e) in slots.iter().enumerate() {
                out.push_str(&format!("{},{g},{s},{e}\n", lp.layer));
            }
        }
    }
    out
}

/// Reads a plan CSV for `topology` and `num_experts` logical experts.
pub fn read_plan_csv(bytes: &[u8], topology: Topology, num_experts: usize) -> Result<Plan> {
    const F: &str = "plan CSV";
    let mut reader = ::csv::ReaderBuilder::new().from_reader(bytes);
    let header = reader
        .headers()
        .map_err(|e| Error::parse(F, e.to_string()))?
        .clone();
    if header.iter().map(str::trim).collect::<Vec<_>>() != ["layer", "gpu", "slot", "expert"] {
        return Err(Error::parse(F, "header must be layer,gpu,slot,expert"));
    }
    let d = topology.num_gpus();
    let mut layers: BTreeMap<u32, Vec<Vec<(usize, u32)>>> = BTreeMap::new();
    for (i, rec) in reader.records().enumerate() {
        let rec = rec.map_err(|e| Error::parse(F, format!("line {}: {e}", i + 2)))?;
        let num = |k: usize| -> Result<u64> {
            rec[k].trim().parse().map_err(|_| {
                Error::parse(
                    F,
                    format!("line {}: {:?} is not a whole number", i + 2, &rec[k]),
                )
            })
        };
        let (layer, gpu, slot, expert) = (num(0)?, num(1)?, num(2)?, num(3)?);
        if gpu as usize >= d || layer > u32::MAX as u64 || expert > u32::MAX as u64 {
            return Err(Error::parse(
                F,
                format!("line {}: GPU {gpu} / layer / expert out of range", i + 2),
            ));
        }
        layers
            .entry(layer as u32)
            .or_insert_with(|| vec![Vec::new(); d])[gpu as usize]
            .push((slot as usize, expert as u32));
    }
    let layers = layers
        .into_iter()
        .map(|(layer, gpus)| LayerPlacement {
            layer,
            gpus: gpus
                .into_iter()
                .map(|mut g| {
                    crate::sort::sort_by_key(&mut g, |&(s, _)| s);
                    g.into_iter().map(|(_, e)| e).collect()
                })
                .collect(),
        })
        .collect();
    Plan::new(topology, num_experts, layers, "imported")
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn read_wide_csv() -> crate::Result<()> {
        let csv = b",dataset,iteration,layer_idx,0,1\n0,a,0,0,3,1\n1,a,1,0,2,2\n";
        let t = crate::formats::csv::read_wide_csv(csv, None)?;
        assert_eq!(
            (t.num_batches(), t.num_layers(), t.num_experts()),
            (2, 1, 2)
        );
        Ok(())
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {
    #[test]
    fn csv_write_plan_csv_example() {
        let run = || {
            use moeplan::{LayerPlacement, Plan, Topology, formats::csv};
            let plan = Plan::new(
                Topology::new(1, 2)?,
                2,
                vec![LayerPlacement {
                    layer: 3,
                    gpus: vec![vec![0], vec![1, 0]],
                }],
                "x",
            )?;
            assert_eq!(
                csv::write_plan_csv(&plan),
                "layer,gpu,slot,expert\n3,0,0,0\n3,1,0,1\n3,1,1,0\n"
            );
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
