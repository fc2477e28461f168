//! Contiguous placement: expert `e` on GPU `⌊e · D / E⌋`, no replicas.
//!
//! What an engine does with no load balancer at all — the floor every other
//! planner is measured against. It ignores the loads. O(L · E).

use crate::error::Result;
use crate::plan::{LayerPlacement, Plan};
use crate::topology::Topology;
use crate::trace::LoadTrace;

/// Places experts in id order, `E / D` consecutive experts per GPU.
///
/// ```
/// use moeplan::{planners::contiguous, LoadTrace, Topology};
/// use ndarray::Array3;
/// let trace = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0])?;
/// let plan = contiguous(&trace, Topology::new(1, 2)?)?;
/// assert_eq!(plan.layers()[0].gpus, vec![vec![0, 1], vec![2, 3]]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn contiguous(trace: &LoadTrace, topology: Topology) -> Result<Plan> {
    let d = topology.num_gpus();
    let e = trace.num_experts();
    let layers = trace
        .layer_ids()
        .iter()
        .map(|&layer| {
            let mut gpus = vec![Vec::new(); d];
            for x in 0..e {
                gpus[x * d / e].push(x as u32);
            }
            LayerPlacement { layer, gpus }
        })
        .collect();
    Plan::new(topology, e, layers, "contiguous")
}
