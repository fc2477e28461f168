//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// `../shared/data/<rel>` beside the repository, or `None` with a printed
/// reason so a skipped check is visible in the test output. Under CI
/// (`CI=true`) the data is always there, so its absence fails the test
/// instead of passing silently.
pub fn shared_data(rel: &str) -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let candidates = [
        std::env::var_os("MOEPLAN_SHARED_DATA").map(PathBuf::from),
        Some(root.join("shared/data")),
    ];
    for dir in candidates.into_iter().flatten() {
        let p = dir.join(rel);
        if p.exists() {
            return Some(p);
        }
    }
    let reason =
        format!("real data {rel} not found (looked in ../shared/data and $MOEPLAN_SHARED_DATA)");
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true but {reason}: tests on real data must run in CI"
    );
    eprintln!("SKIP: {reason}");
    None
}

pub fn read_shared_trace(rel: &str) -> Option<crate::LoadTrace> {
    let p = shared_data(rel)?;
    let bytes = std::fs::read(&p).expect("shared data is readable");
    Some(crate::formats::read_trace(&bytes, &Default::default()).expect("shared data parses"))
}

/// EPLB with `k` redundant experts on 1 node × 64 GPUs, one group — the
/// reference setting of the real DeepSeek-V3 checks — and its evaluation.
pub fn eplb_on_64(trace: &crate::LoadTrace, k: usize) -> (crate::Plan, crate::EvalReport) {
    let cfg = crate::planners::EplbConfig {
        redundant_experts: k,
        groups: 1,
    };
    let plan = crate::planners::eplb(trace, crate::Topology::new(1, 64).unwrap(), cfg).unwrap();
    let report = crate::evaluate(trace, &plan).unwrap();
    (plan, report)
}

/// The real ESFT token routes of `rel` (a folder under `../shared/data`,
/// DeepSeek-V2-Lite: 64 experts, top-6), or `None` as [`shared_data`] says.
#[allow(dead_code)] // not every test file reads token routes
pub fn esft_tokens(rel: &str) -> Option<crate::TokenTrace> {
    let dir = shared_data(rel)?;
    let files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    let mut meter = crate::Meter::new(Default::default());
    Some(crate::formats::esft::read_esft(&files, 64, 6, &mut meter).unwrap())
}

/// A random small instance for the simulator's property tests: 1–3 nodes
/// of 1–3 GPUs, 1–7 experts (each placed once, plus up to 2·D random extra
/// copies), 1–2 layers, 1–3 batches, and per-source counts (30 % zeros).
pub struct SourcedCase {
    pub trace: crate::LoadTrace,
    pub plan: crate::Plan,
    pub by_source: ndarray::Array4<f64>,
}

/// The instance of `seed` (the same draws on every platform).
pub fn random_sourced_case(seed: u64) -> SourcedCase {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let nodes = rng.random_range(1..=3);
    let gpn = rng.random_range(1..=3);
    let d = nodes * gpn;
    let e = rng.random_range(1..=7);
    let l = rng.random_range(1..=2);
    let b = rng.random_range(1..=3);
    let layers = (0..l)
        .map(|li| {
            let mut gpus = vec![Vec::new(); d];
            for x in 0..e {
                gpus[rng.random_range(0..d)].push(x as u32);
            }
            for _ in 0..rng.random_range(0..=2 * d) {
                let g = rng.random_range(0..d);
                gpus[g].push(rng.random_range(0..e) as u32);
            }
            crate::LayerPlacement {
                layer: li as u32,
                gpus,
            }
        })
        .collect();
    let topo = crate::Topology::new(nodes, gpn).unwrap();
    let plan = crate::Plan::new(topo, e, layers, "random").unwrap();
    let s = rng.random_range(1..=d);
    let by_source = ndarray::Array4::from_shape_fn((b, l, s, e), |_| {
        if rng.random_bool(0.3) {
            0.0
        } else {
            rng.random_range(0..20) as f64
        }
    });
    let counts = by_source.sum_axis(ndarray::Axis(2));
    let trace = crate::LoadTrace::new(counts, (0..l as u32).collect()).unwrap();
    SourcedCase {
        trace,
        plan,
        by_source,
    }
}

/// Equal within 1e-9, relative to the larger (absolute below 1): what sums
/// of the same pairs taken in another order may differ by.
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}
