//! `check`: every GPU kernel against its CPU reference on generated data.
//!
//! Integer stages (fill, selection, counts, offsets, permutation, gather)
//! and the combine must match exactly. The bf16 GEMMs and the activation
//! are compared stage by stage — each GPU stage against the CPU reference
//! fed with the GPU's own input to that stage — within a tolerance of about
//! two bf16 rounding steps (`2^-7·|ref| + 2^-8·rms(ref)`), so a mismatch
//! names the stage that broke; the end-to-end result is compared with a
//! looser tolerance. Each line says PASS or FAIL, the largest error, and
//! for a failure the first mismatching positions.
//!
//! Small cases cover the dispatch rules (`vllm`, `sglang-static`,
//! `sglang-static-v0`), replicas, a same-GPU duplicate, a
//! GPU hosting nothing, an odd token count, a hidden size that is not a
//! multiple of 8 (the scalar gather) and a weight pool smaller than the
//! experts. A full-size case (DeepSeek-V3's 7168 × 2048 experts) checks
//! the integer stages completely and the expert and combine stages on
//! sampled rows, where the CPU reference is affordable.

use crate::combine::combine_cpu;
use crate::dispatch::{dispatch_cpu, gather_cpu};
use crate::error::Result;
use crate::expert::{
    ExpertShape, WeightPool, bf16_to_f32, down_cpu, experts_cpu, fill_uniform, gate_up_cpu, seeds,
    silu_mul_cpu,
};
use crate::gpu::Gpu;
use crate::routing;
use crate::select::{self, LayerSlots, Selector, select_cpu};
use moeplan::judge::{Rule, SglangVersion};

/// One comparison's verdict.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What was compared.
    pub name: String,
    /// Whether it matched.
    pub pass: bool,
    /// Sizes, largest error, first mismatches.
    pub detail: String,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "  {} {:<24} {}",
            if self.pass { "PASS" } else { "FAIL" },
            self.name,
            self.detail
        )
    }
}

/// Exact comparison of integer (or bit-pattern) arrays; `at(i)` describes
/// position `i` for the report.
pub fn exact<T: PartialEq + std::fmt::Debug>(
    name: &str,
    gpu: &[T],
    cpu: &[T],
    at: impl Fn(usize) -> String,
) -> Outcome {
    if gpu.len() != cpu.len() {
        return Outcome {
            name: name.into(),
            pass: false,
            detail: format!("length {} on the GPU, {} on the CPU", gpu.len(), cpu.len()),
        };
    }
    let bad: Vec<usize> = (0..gpu.len()).filter(|&i| gpu[i] != cpu[i]).collect();
    let detail = if bad.is_empty() {
        format!("exact ({} values)", gpu.len())
    } else {
        let first: Vec<String> = bad
            .iter()
            .take(4)
            .map(|&i| format!("{}: gpu {:?} cpu {:?}", at(i), gpu[i], cpu[i]))
            .collect();
        format!(
            "{} of {} differ; first: {}",
            bad.len(),
            gpu.len(),
            first.join("; ")
        )
    };
    Outcome {
        name: name.into(),
        pass: bad.is_empty(),
        detail,
    }
}

/// Tolerance comparison: `|g − c| ≤ rtol·|c| + atol·rms(c)` everywhere;
/// values are reported at (row, column) for rows of `cols` values.
pub fn close(name: &str, gpu: &[f32], cpu: &[f32], cols: usize, rtol: f32, atol: f32) -> Outcome {
    if gpu.len() != cpu.len() || cols == 0 {
        return Outcome {
            name: name.into(),
            pass: false,
            detail: format!("length {} on the GPU, {} on the CPU", gpu.len(), cpu.len()),
        };
    }
    let n = cpu.len().max(1) as f64;
    let rms = (cpu.iter().map(|&c| (c as f64) * (c as f64)).sum::<f64>() / n).sqrt() as f32;
    let (mut max_err, mut worst) = (0f32, 0f32);
    let mut bad = Vec::new();
    for (i, (&g, &c)) in gpu.iter().zip(cpu).enumerate() {
        let err = (g - c).abs();
        let tol = rtol * c.abs() + atol * rms;
        let ratio = if tol > 0.0 {
            err / tol
        } else if err > 0.0 {
            f32::INFINITY
        } else {
            0.0
        };
        // NaN on either side is a mismatch.
        if err.is_nan() || err > tol {
            bad.push(i);
        }
        max_err = max_err.max(if err.is_nan() { f32::INFINITY } else { err });
        worst = worst.max(if ratio.is_nan() { f32::INFINITY } else { ratio });
    }
    let mut detail = format!(
        "max |err| {max_err:.3e}, max err/tol {worst:.3} (rms {rms:.3e}, {} values)",
        cpu.len()
    );
    if !bad.is_empty() {
        let first: Vec<String> = bad
            .iter()
            .take(4)
            .map(|&i| {
                format!(
                    "[{}, {}]: gpu {} cpu {}",
                    i / cols,
                    i % cols,
                    gpu[i],
                    cpu[i]
                )
            })
            .collect();
        detail.push_str(&format!(
            "; {} beyond tolerance; first: {}",
            bad.len(),
            first.join("; ")
        ));
    }
    Outcome {
        name: name.into(),
        pass: bad.is_empty(),
        detail,
    }
}

fn f32s(v: &[u16]) -> Vec<f32> {
    v.iter().map(|&x| bf16_to_f32(x)).collect()
}

/// Stage tolerance (about two bf16 steps).
const RTOL: f32 = 1.0 / 128.0;
const ATOL: f32 = 1.0 / 256.0;
/// End-to-end tolerance (intermediate roundings may differ by a step).
const RTOL_E2E: f32 = 1.0 / 32.0;
const ATOL_E2E: f32 = 1.0 / 64.0;

/// A small generated case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Label.
    pub name: &'static str,
    /// Tokens.
    pub tokens: usize,
    /// Experts per token.
    pub top_k: usize,
    /// Logical experts.
    pub experts: usize,
    /// Nodes.
    pub nodes: usize,
    /// GPUs per node.
    pub gpus_per_node: usize,
    /// Expert sizes.
    pub shape: ExpertShape,
    /// Dispatch rule.
    pub rule: Rule,
    /// Replicas added to the contiguous placement.
    pub replicas: usize,
    /// Distinct weight sets.
    pub pool: usize,
    /// Leave the last GPU without any expert.
    pub empty_gpu: bool,
}

/// A placement for a case: experts contiguous over the GPUs (over all but
/// the last when `empty_gpu`), then `replicas` extra copies — expert
/// `7j mod E` on GPU `3j mod D'` — which include same-GPU duplicates.
pub fn case_placement(
    experts: usize,
    gpus: usize,
    replicas: usize,
    empty_gpu: bool,
) -> Vec<Vec<u32>> {
    let used = if empty_gpu && gpus > 1 {
        gpus - 1
    } else {
        gpus
    };
    let mut p = vec![Vec::new(); gpus];
    for e in 0..experts {
        p[e * used / experts].push(e as u32);
    }
    for j in 0..replicas {
        p[(3 * j) % used].push(((7 * j) % experts) as u32);
    }
    p
}

/// Skewed expert loads: `1 / (1 + e)^0.8`, shuffled by a fixed stride.
pub fn case_load(experts: usize) -> Vec<f64> {
    (0..experts)
        .map(|e| 1.0 / (1.0 + ((e * 37) % experts) as f64).powf(0.8))
        .collect()
}

/// The built-in small cases.
pub fn cases() -> Result<Vec<Case>> {
    Ok(vec![
        Case {
            name: "A vllm",
            tokens: 1000,
            top_k: 4,
            experts: 16,
            nodes: 2,
            gpus_per_node: 2,
            shape: ExpertShape::new(64, 32)?,
            rule: Rule::Vllm,
            replicas: 6,
            pool: 16,
            empty_gpu: false,
        },
        Case {
            name: "B sglang-static",
            tokens: 1000,
            top_k: 4,
            experts: 16,
            nodes: 2,
            gpus_per_node: 2,
            shape: ExpertShape::new(64, 32)?,
            rule: Rule::SglangStatic(SglangVersion::Nearest),
            replicas: 6,
            pool: 16,
            empty_gpu: false,
        },
        Case {
            name: "C vllm odd sizes",
            tokens: 4099,
            top_k: 8,
            experts: 64,
            nodes: 2,
            gpus_per_node: 4,
            shape: ExpertShape::new(72, 48)?,
            rule: Rule::Vllm,
            replicas: 24,
            pool: 64,
            empty_gpu: false,
        },
        Case {
            name: "D sglang-static-v0 scalar",
            tokens: 517,
            top_k: 6,
            experts: 60,
            nodes: 1,
            gpus_per_node: 8,
            shape: ExpertShape::new(60, 40)?,
            rule: Rule::SglangStatic(SglangVersion::SameGpu),
            replicas: 10,
            pool: 7,
            empty_gpu: true,
        },
        Case {
            name: "E grace-topology",
            tokens: 1500,
            top_k: 4,
            experts: 32,
            nodes: 2,
            gpus_per_node: 4,
            shape: ExpertShape::new(64, 32)?,
            rule: Rule::GraceTopology,
            replicas: 12,
            pool: 8,
            empty_gpu: false,
        },
        Case {
            name: "F libra",
            tokens: 1500,
            top_k: 4,
            experts: 32,
            nodes: 2,
            gpus_per_node: 4,
            shape: ExpertShape::new(64, 32)?,
            rule: select::libra(moeplan::judge::DEFAULT_TOLERANCE_PERCENT),
            replicas: 12,
            pool: 8,
            empty_gpu: false,
        },
    ])
}

/// Runs one small case; `report` sees each outcome as it is decided.
pub fn run_case(gpu: &Gpu, case: &Case, report: &mut dyn FnMut(&Outcome)) -> Result<Vec<Outcome>> {
    let mut out = Vec::new();
    let mut push = |o: Outcome, out: &mut Vec<Outcome>| {
        report(&o);
        out.push(o);
    };
    let d = case.nodes * case.gpus_per_node;
    let (h, inter, k) = (case.shape.hidden, case.shape.inter, case.top_k);
    let placement = case_placement(case.experts, d, case.replicas, case.empty_gpu);
    let slots = LayerSlots::new(&placement, case.experts, case.gpus_per_node)?;
    let routing = routing::generate(&case_load(case.experts), case.tokens, k, 42)?;
    let selector = Selector::single_layer(case.rule, &slots, &case_load(case.experts))?;

    // CPU reference, end to end.
    let x = fill_uniform(0, case.tokens * h, seeds::X, 1.0);
    let weights = WeightPool::generate(case.shape, case.pool);
    let phys = select_cpu(&routing, &slots, &selector)?;
    let index = dispatch_cpu(&phys, slots.num_slots())?;
    let xp = gather_cpu(&x, h, k, &index.perm);
    let outs = experts_cpu(&xp, &index, &slots, &weights)?;
    let comb = combine_cpu(&outs, h, &index.dest, &routing.weights, k);

    // GPU.
    let mut buf = gpu.buffers(case.tokens, k, case.shape, slots.num_slots())?;
    gpu.fill_tokens(&mut buf)?;
    let w = gpu.weights(case.shape, case.pool)?;
    gpu.upload_routing(&mut buf, &routing)?;
    let tables = if selector.on_host() {
        gpu.host_selection_tables(&slots, &phys)?
    } else {
        gpu.selection_tables(&slots, &selector)?
    };
    gpu.select(&mut buf, &tables)?;
    gpu.dispatch(&mut buf, tables.num_slots)?;
    gpu.sync("select and dispatch")?;
    let rows = buf.rows();
    let at_tk = |i: usize| format!("row (t {}, k {})", i / k, i % k);
    push(
        exact("fill x", &gpu.read(&buf.x, x.len())?, &x, |i| {
            format!("x[{i}]")
        }),
        &mut out,
    );
    push(
        exact(
            "fill w13",
            &gpu.read(&w.w13, weights.w13.len())?,
            &weights.w13,
            |i| format!("w13[{i}]"),
        ),
        &mut out,
    );
    push(
        exact(
            "fill w2",
            &gpu.read(&w.w2, weights.w2.len())?,
            &weights.w2,
            |i| format!("w2[{i}]"),
        ),
        &mut out,
    );
    push(
        exact(
            &format!("select {}", select::label(case.rule)),
            &gpu.read(&buf.phys, rows)?,
            &phys,
            at_tk,
        ),
        &mut out,
    );
    let s = slots.num_slots();
    push(
        exact(
            "dispatch counts",
            &gpu.read(&buf.counts, s)?,
            &index.counts,
            |i| format!("slot {i}"),
        ),
        &mut out,
    );
    let offsets = gpu.read(&buf.offsets, s + 1)?;
    push(
        exact("dispatch offsets", &offsets, &index.offsets, |i| {
            format!("slot {i}")
        }),
        &mut out,
    );
    push(
        exact(
            "dispatch perm",
            &gpu.read(&buf.perm, rows)?,
            &index.perm,
            |i| format!("row {i}"),
        ),
        &mut out,
    );
    push(
        exact(
            "dispatch dest",
            &gpu.read(&buf.dest, rows)?,
            &index.dest,
            at_tk,
        ),
        &mut out,
    );
    push(
        exact("gather", &gpu.read(&buf.xp, rows * h)?, &xp, |i| {
            format!("[{}, {}]", i / h, i % h)
        }),
        &mut out,
    );

    // Experts, rank by rank, then stage by stage against the CPU fed with
    // the GPU's own stage inputs.
    for g in 0..d {
        gpu.experts_rank(&buf, &w, &slots, &offsets, g)?;
    }
    gpu.sync("expert compute")?;
    let gy = gpu.read(&buf.y, rows * 2 * inter)?;
    let gact = gpu.read(&buf.act, rows * inter)?;
    let gout = gpu.read(&buf.out, rows * h)?;
    let (mut ry, mut rdown) = (vec![0u16; rows * 2 * inter], vec![0u16; rows * h]);
    for sl in 0..s {
        let (a, b) = (index.offsets[sl] as usize, index.offsets[sl + 1] as usize);
        if a == b {
            continue;
        }
        let p = slots.slot_expert[sl] as usize % case.pool;
        ry[a * 2 * inter..b * 2 * inter].copy_from_slice(&gate_up_cpu(
            &xp[a * h..b * h],
            weights.w13(p),
            case.shape,
        ));
        rdown[a * h..b * h].copy_from_slice(&down_cpu(
            &gact[a * inter..b * inter],
            weights.w2(p),
            case.shape,
        ));
    }
    push(
        close(
            "gate/up GEMM",
            &f32s(&gy),
            &f32s(&ry),
            2 * inter,
            RTOL,
            ATOL,
        ),
        &mut out,
    );
    push(
        close(
            "silu*up",
            &f32s(&gact),
            &f32s(&silu_mul_cpu(&gy, inter)),
            inter,
            RTOL,
            ATOL,
        ),
        &mut out,
    );
    push(
        close("down GEMM", &f32s(&gout), &f32s(&rdown), h, RTOL, ATOL),
        &mut out,
    );
    push(
        close(
            "experts end-to-end",
            &f32s(&gout),
            &f32s(&outs),
            h,
            RTOL_E2E,
            ATOL_E2E,
        ),
        &mut out,
    );

    gpu.combine(&buf)?;
    gpu.sync("combine")?;
    let gcomb = gpu.read(&buf.comb, case.tokens * h)?;
    let rcomb = combine_cpu(&gout, h, &index.dest, &routing.weights, k);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    push(
        exact("combine (bits)", &bits(&gcomb), &bits(&rcomb), |i| {
            format!("[{}, {}]", i / h, i % h)
        }),
        &mut out,
    );
    push(
        close("layer end-to-end", &gcomb, &comb, h, RTOL_E2E, ATOL_E2E),
        &mut out,
    );
    Ok(out)
}

/// The full-size case: `preset`'s expert shape, `tokens` tokens. Integer
/// stages are compared completely; experts and combine on `samples` rows
/// and tokens spread over the batch.
pub fn run_full_size(
    gpu: &Gpu,
    preset: &moeplan::data::model::ModelPreset,
    tokens: usize,
    samples: usize,
    report: &mut dyn FnMut(&Outcome),
) -> Result<Vec<Outcome>> {
    let mut out = Vec::new();
    let mut push = |o: Outcome, out: &mut Vec<Outcome>| {
        report(&o);
        out.push(o);
    };
    let shape = ExpertShape::new(preset.hidden, preset.moe_intermediate)?;
    let (h, inter, k, e) = (shape.hidden, shape.inter, preset.top_k, preset.experts);
    let (nodes, gpn) = (2, 4);
    let d = nodes * gpn;
    let pool = 8;
    let placement = case_placement(e, d, d * 4, false);
    let slots = LayerSlots::new(&placement, e, gpn)?;
    let routing = routing::generate(&case_load(e), tokens, k, 5)?;
    let selector = Selector::Vllm;
    let phys = select_cpu(&routing, &slots, &selector)?;
    let index = dispatch_cpu(&phys, slots.num_slots())?;

    let mut buf = gpu.buffers(tokens, k, shape, slots.num_slots())?;
    gpu.fill_tokens(&mut buf)?;
    let w = gpu.weights(shape, pool)?;
    gpu.upload_routing(&mut buf, &routing)?;
    let tables = if selector.on_host() {
        gpu.host_selection_tables(&slots, &phys)?
    } else {
        gpu.selection_tables(&slots, &selector)?
    };
    gpu.select(&mut buf, &tables)?;
    gpu.dispatch(&mut buf, tables.num_slots)?;
    let rows = buf.rows();
    let s = slots.num_slots();
    let offsets = gpu.read(&buf.offsets, s + 1)?;
    let at_tk = |i: usize| format!("row (t {}, k {})", i / k, i % k);
    push(
        exact("select vllm", &gpu.read(&buf.phys, rows)?, &phys, at_tk),
        &mut out,
    );
    push(
        exact("dispatch offsets", &offsets, &index.offsets, |i| {
            format!("slot {i}")
        }),
        &mut out,
    );
    push(
        exact(
            "dispatch perm",
            &gpu.read(&buf.perm, rows)?,
            &index.perm,
            |i| format!("row {i}"),
        ),
        &mut out,
    );
    let gxp = gpu.read(&buf.xp, rows * h)?;
    for g in 0..d {
        gpu.experts_rank(&buf, &w, &slots, &offsets, g)?;
    }
    gpu.combine(&buf)?;
    gpu.sync("the full-size layer")?;
    let gy = gpu.read(&buf.y, rows * 2 * inter)?;
    let gact = gpu.read(&buf.act, rows * inter)?;
    let gout = gpu.read(&buf.out, rows * h)?;
    let gcomb = gpu.read(&buf.comb, tokens * h)?;

    // Sampled rows: the first and last row of the batch and rows spread
    // between; weights regenerated on the CPU from the hash.
    let picks: Vec<usize> = (0..samples.max(2))
        .map(|j| j * (rows - 1) / (samples.max(2) - 1))
        .collect();
    let mut cache: Vec<Option<(Vec<u16>, Vec<u16>)>> = vec![None; pool];
    let (mut x_g, mut x_c, mut y_g, mut y_c, mut a_g, mut a_c, mut o_g, mut o_c) = (
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
    );
    for &r in &picks {
        let sl = index.offsets.partition_point(|&o| o as usize <= r) - 1;
        let p = slots.slot_expert[sl] as usize % pool;
        if cache[p].is_none() {
            cache[p] = Some((
                fill_uniform(
                    (p * shape.w13_len()) as u64,
                    shape.w13_len(),
                    seeds::W13,
                    shape.w13_scale(),
                ),
                fill_uniform(
                    (p * shape.w2_len()) as u64,
                    shape.w2_len(),
                    seeds::W2,
                    shape.w2_scale(),
                ),
            ));
        }
        let Some((w13, w2)) = cache[p].as_ref() else {
            continue;
        };
        let t = index.perm[r] as usize / k;
        x_c.extend(fill_uniform((t * h) as u64, h, seeds::X, 1.0));
        x_g.extend_from_slice(&gxp[r * h..(r + 1) * h]);
        let gyr = &gy[r * 2 * inter..(r + 1) * 2 * inter];
        y_g.extend(f32s(gyr));
        y_c.extend(f32s(&gate_up_cpu(&gxp[r * h..(r + 1) * h], w13, shape)));
        let gar = &gact[r * inter..(r + 1) * inter];
        a_g.extend(f32s(gar));
        a_c.extend(f32s(&silu_mul_cpu(gyr, inter)));
        o_g.extend(f32s(&gout[r * h..(r + 1) * h]));
        o_c.extend(f32s(&down_cpu(gar, w2, shape)));
    }
    let n = picks.len();
    push(
        exact(&format!("gather ({n} rows)"), &x_g, &x_c, |i| {
            format!("[{}, {}]", picks[i / h], i % h)
        }),
        &mut out,
    );
    push(
        close(
            &format!("gate/up GEMM ({n} rows)"),
            &y_g,
            &y_c,
            2 * inter,
            RTOL,
            ATOL,
        ),
        &mut out,
    );
    push(
        close(
            &format!("silu*up ({n} rows)"),
            &a_g,
            &a_c,
            inter,
            RTOL,
            ATOL,
        ),
        &mut out,
    );
    push(
        close(&format!("down GEMM ({n} rows)"), &o_g, &o_c, h, RTOL, ATOL),
        &mut out,
    );

    // Sampled tokens of the combine, from the GPU's expert outputs.
    let tok: Vec<usize> = (0..samples.max(2))
        .map(|j| j * (tokens - 1) / (samples.max(2) - 1))
        .collect();
    let (mut c_g, mut c_c) = (Vec::new(), Vec::new());
    for &t in &tok {
        let dest = &index.dest[t * k..(t + 1) * k];
        let mut rows_t = Vec::with_capacity(k * h);
        for &r in dest {
            rows_t.extend_from_slice(&gout[r as usize * h..(r as usize + 1) * h]);
        }
        let local: Vec<u32> = (0..k as u32).collect();
        c_c.extend(combine_cpu(
            &rows_t,
            h,
            &local,
            &routing.weights[t * k..(t + 1) * k],
            k,
        ));
        c_g.extend_from_slice(&gcomb[t * h..(t + 1) * h]);
    }
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    push(
        exact(
            &format!("combine ({} tokens, bits)", tok.len()),
            &bits(&c_g),
            &bits(&c_c),
            |i| format!("[{}, {}]", tok[i / h], i % h),
        ),
        &mut out,
    );
    Ok(out)
}
