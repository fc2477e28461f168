//! `micro`: how close the building blocks run to the hardware.
//!
//! (a) Dispatch of `tokens × top_k` rows with a real model's hidden size:
//! replica selection, the dispatch index (histogram, scan, stable scatter)
//! and the row gather, each timed alone; the gather's bytes moved (every
//! row read and written once) over its time, set against the theoretical
//! memory bandwidth and against a plain device-to-device copy of the same
//! bytes.
//!
//! (b) Expert GEMMs at the model's sizes: one expert at several row counts,
//! and one rank of 8 experts × 2048 rows (the bench path: per-copy gate/up
//! GEMMs, SiLU·up, per-copy down GEMMs), in TFLOP/s (`6 · rows · hidden ·
//! inter` FLOPs) against the bf16 dense peak, and an 8192³ bf16 GEMM as the
//! reference of what cuBLAS reaches on this device.
//!
//! (c) One rank's cost per copy against the cost model: a rank holding `c`
//! copies (1, 2, 4, 8, each its own weights) of `r` rows each, from 1 row to
//! 4,096, timed as the bench times a rank, beside the core's `copy_us` for
//! the same BF16 shape on `h100-ib-ndr` — where the model's weight read and
//! GEMM blend misses at the few rows per copy of decode (docs/cuda.md).
//!
//! Every timing is GPU execution: the timed launches are queued behind a
//! spin kernel ([`Gpu::time_queued`]), the median of `repeats`.

use moeplan::data::model::ModelPreset;

use crate::check::{case_load, case_placement};
use crate::error::Result;
use crate::expert::ExpertShape;
use crate::gpu::Gpu;
use crate::routing;
use crate::select::{LayerSlots, Selector, label};
use moeplan::judge::{Rule, SglangVersion};

/// What `micro` runs.
#[derive(Debug, Clone)]
pub struct MicroConfig {
    /// Model whose sizes are used.
    pub preset: &'static ModelPreset,
    /// Tokens of the dispatch test.
    pub tokens: usize,
    /// GPUs the dispatch spreads over (slots: the model's experts plus one
    /// replica per GPU).
    pub gpus: usize,
    /// Timed repetitions (the median is reported).
    pub repeats: usize,
}

fn median_of(gpu: &Gpu, repeats: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..2 {
        f()?;
    }
    let mut t = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        t.push(gpu.time_queued(&mut f)?);
    }
    Ok(crate::bench::median(&t))
}

fn pct(x: f64, of: Option<f64>) -> String {
    match of {
        Some(p) if p > 0.0 => format!("{:.1} %", 100.0 * x / p),
        _ => "n/a".into(),
    }
}

/// Runs both parts, printing lines through `out`.
pub fn run(gpu: &Gpu, cfg: &MicroConfig, out: &mut dyn FnMut(String)) -> Result<()> {
    let p = cfg.preset;
    let shape = ExpertShape::new(p.hidden, p.moe_intermediate)?;
    let peak_bw = gpu.info.peak_bandwidth();
    let peak_fl = gpu.info.peak_bf16();
    out(format!("device: {}", gpu.info.describe()));
    out(format!(
        "peak memory bandwidth: {} · bf16 dense peak: {}",
        peak_bw.map_or("unknown".into(), |b| format!(
            "{:.0} GB/s (2 × memory clock × bus width)",
            b / 1e9
        )),
        peak_fl
            .as_ref()
            .map_or("unknown".into(), |(f, src)| format!(
                "{:.0} TFLOP/s ({src})",
                f / 1e12
            ))
    ));

    // (a) dispatch.
    let (n, k, e) = (cfg.tokens, p.top_k, p.experts);
    let placement = case_placement(e, cfg.gpus, cfg.gpus, false);
    // Nodes of 8 GPUs where the count allows (SGLang's map needs whole
    // nodes), else one node.
    let gpn = if cfg.gpus % 8 == 0 { 8 } else { cfg.gpus };
    let slots = LayerSlots::new(&placement, e, gpn)?;
    let routing = routing::generate(&case_load(e), n, k, 3)?;
    let mut buf = gpu.buffers(n, k, shape, slots.num_slots())?;
    gpu.fill_tokens(&mut buf)?;
    gpu.upload_routing(&mut buf, &routing)?;
    let rows = buf.rows();
    let row_bytes = (shape.hidden * 2) as f64;
    out(format!(
        "(a) dispatch: {n} tokens × top-{k} = {rows} rows of {} bf16 ({} experts, {} slots on {} GPUs)",
        shape.hidden,
        e,
        slots.num_slots(),
        cfg.gpus
    ));
    for rule in [Rule::Vllm, Rule::SglangStatic(SglangVersion::Nearest)] {
        let tables = gpu.selection_tables(&slots, &Selector::single_layer(rule, &slots, &[])?)?;
        let sel = median_of(gpu, cfg.repeats, || gpu.select(&mut buf, &tables))?;
        out(format!(
            "    select ({}): {sel:.4} ms ({:.1} G rows/s)",
            label(rule),
            rows as f64 / sel / 1e6
        ));
    }
    let tables = gpu.selection_tables(&slots, &Selector::Vllm)?;
    gpu.select(&mut buf, &tables)?;
    let idx = median_of(gpu, cfg.repeats, || {
        gpu.dispatch_index(&mut buf, tables.num_slots)
    })?;
    out(format!(
        "    dispatch index (histogram, scan, stable scatter): {idx:.4} ms ({:.1} G rows/s)",
        rows as f64 / idx / 1e6
    ));
    let gat = median_of(gpu, cfg.repeats, || gpu.gather(&buf))?;
    let moved = 2.0 * rows as f64 * row_bytes;
    let gat_bw = moved / (gat * 1e-3);
    // A plain copy of the same bytes (read + write counted the same way).
    let bytes = rows * shape.hidden * 2;
    let src = gpu.zeros::<u8>(bytes)?;
    let mut dst = gpu.zeros::<u8>(bytes)?;
    let cp = median_of(gpu, cfg.repeats, || gpu.copy(&mut dst, &src))?;
    let cp_bw = 2.0 * bytes as f64 / (cp * 1e-3);
    drop((src, dst));
    out(format!(
        "    gather: {gat:.4} ms, {:.2} GB moved (read + write) → {:.0} GB/s = {} of peak, {} of a device copy ({:.0} GB/s)",
        moved / 1e9,
        gat_bw / 1e9,
        pct(gat_bw, peak_bw),
        pct(gat_bw, Some(cp_bw)),
        cp_bw / 1e9
    ));
    let total = idx + gat;
    out(format!(
        "    dispatch total (index + gather): {total:.4} ms → {:.0} GB/s of rows moved = {} of peak",
        moved / (total * 1e-3) / 1e9,
        pct(moved / (total * 1e-3), peak_bw)
    ));
    drop(buf);

    // (b) expert GEMMs.
    out(format!(
        "(b) expert GEMMs, bf16 in/out, f32 accumulate: hidden {}, intermediate {} (gate/up {}×{}, down {}×{})",
        shape.hidden,
        shape.inter,
        2 * shape.inter,
        shape.hidden,
        shape.hidden,
        shape.inter
    ));
    let weights = gpu.weights(shape, 8)?;
    let fl = |x: f64| x / 1e12;
    for m in [64usize, 256, 1024, 4096, 16384] {
        let one = LayerSlots::new(&[vec![0]], 1, 1)?;
        let mut b = gpu.buffers(m, 1, shape, 1)?;
        gpu.fill(&mut b.xp, crate::expert::seeds::X, 1.0)?;
        let offsets = [0, m as u32];
        let t = median_of(gpu, cfg.repeats, || {
            gpu.experts_rank(&b, &weights, &one, &offsets, 0)
        })?;
        let f = shape.flops(m) / (t * 1e-3);
        out(format!(
            "    1 expert × {m:>5} rows: {t:8.4} ms → {:6.1} TFLOP/s = {} of peak",
            fl(f),
            pct(f, peak_fl.as_ref().map(|x| x.0))
        ));
    }
    {
        let (experts, per) = (8usize, 2048usize);
        let gpus = vec![(0..experts as u32).collect::<Vec<_>>()];
        let rank = LayerSlots::new(&gpus, experts, 1)?;
        let mut b = gpu.buffers(experts * per, 1, shape, experts)?;
        gpu.fill(&mut b.xp, crate::expert::seeds::X, 1.0)?;
        let offsets: Vec<u32> = (0..=experts).map(|j| (j * per) as u32).collect();
        let t = median_of(gpu, cfg.repeats, || {
            gpu.experts_rank(&b, &weights, &rank, &offsets, 0)
        })?;
        let f = shape.flops(experts * per) / (t * 1e-3);
        out(format!(
            "    one rank, {experts} experts × {per} rows: {t:8.4} ms → {:6.1} TFLOP/s = {} of peak",
            fl(f),
            pct(f, peak_fl.as_ref().map(|x| x.0))
        ));
    }
    out(
        "(c) one rank's time per copy, measured against the cost model (copy_us on h100-ib-ndr):"
            .into(),
    );
    let model = crate::bench::time_cost(shape)?;
    for copies in [1usize, 2, 4, 8] {
        let gpus = vec![(0..copies as u32).collect::<Vec<_>>()];
        let rank = LayerSlots::new(&gpus, copies, 1)?;
        for per in [1usize, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096] {
            let mut b = gpu.buffers(copies * per, 1, shape, copies)?;
            gpu.fill(&mut b.xp, crate::expert::seeds::X, 1.0)?;
            let offsets: Vec<u32> = (0..=copies).map(|j| (j * per) as u32).collect();
            let t = median_of(gpu, cfg.repeats, || {
                gpu.experts_rank(&b, &weights, &rank, &offsets, 0)
            })?;
            let meas = t * 1e3 / copies as f64;
            let pred = moeplan::judge::cost::copy_us(&model, per as f64);
            out(format!(
                "    per-copy copies={copies} rows={per:>5}: measured {meas:8.2} µs · predicted {pred:8.2} µs · error {:+6.1} %",
                (pred - meas) / meas * 100.0
            ));
        }
    }
    drop(weights);
    let s = 8192usize;
    let mut a = gpu.zeros::<u16>(s * s)?;
    let mut b = gpu.zeros::<u16>(s * s)?;
    let mut c = gpu.zeros::<u16>(s * s)?;
    gpu.fill(&mut a, 1, 1.0)?;
    gpu.fill(&mut b, 2, 1.0)?;
    let t = median_of(gpu, cfg.repeats, || {
        gpu.gemm_plain(&a, &b, &mut c, (s, s, s))
    })?;
    let f = 2.0 * (s as f64).powi(3) / (t * 1e-3);
    out(format!(
        "    reference {s}³ GEMM: {t:8.4} ms → {:6.1} TFLOP/s = {} of peak",
        fl(f),
        pct(f, peak_fl.as_ref().map(|x| x.0))
    ));
    gpu.sync("the micro-benchmarks")
}
