//! What the CPU tests share: the bench's routings of a trace's layers as
//! the core simulator's one-batch workload.

use moeplan::data::Workload;
use moeplan::judge::Rule;
use moeplan::{LoadTrace, TokenTrace};
use moeplan_cuda::bench::{BenchConfig, layer_routing};
use moeplan_cuda::expert::ExpertShape;
use moeplan_cuda::routing::{Routing, source_rank};

/// `tokens` generated tokens (bench's routing, seed `seed`) for each of
/// `layers` (indices into `trace`) on `d` ranks, and the same tokens as a
/// one-batch core workload of token routes, token `t` from rank `⌊t·d/n⌋`.
pub fn one_batch(
    trace: &LoadTrace,
    layers: &[usize],
    tokens: usize,
    d: usize,
    seed: u64,
) -> Result<(Vec<Routing>, Workload), Box<dyn std::error::Error>> {
    let top_k = trace.top_k().ok_or("trace without top-k")?;
    let cfg = BenchConfig {
        tokens,
        top_k,
        rule: Rule::Vllm,
        shape: ExpertShape::new(8, 8)?,
        layers: layers.to_vec(),
        repeats: 1,
        warmup: 0,
        source_batch: None,
        seed,
        pool: 1,
        launch_gaps: false,
    };
    let routings = layers
        .iter()
        .map(|&l| layer_routing(trace, &cfg, l))
        .collect::<Result<Vec<_>, _>>()?;
    let ranks: Vec<u32> = (0..tokens)
        .map(|t| source_rank(t, tokens, d) as u32)
        .collect();
    let routes = routings
        .iter()
        .map(|r| ndarray::Array2::from_shape_vec((tokens, top_k), r.ids.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    let ids: Vec<u32> = layers.iter().map(|&l| trace.layer_ids()[l]).collect();
    let work = Workload::from_tokens(
        TokenTrace::new(trace.num_experts(), ids, routes, ranks)?,
        tokens,
    )?;
    Ok((routings, work))
}
