//! Contiguous placement: expert `e` on GPU `⌊e · D / E⌋`, no replicas.
//!
//! What an engine does with no load balancer at all — the floor every other
//! planner is measured against. It ignores the loads. O(L · E).

use super::registry::{Needs, Planned, Planner, PlannerId, PlannerSpec, Prepared, Settings};
use crate::data::Workload;
use crate::data::plan::{LayerPlacement, Plan};
use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::Result;

/// Its id in the registry.
pub const ID: PlannerId = PlannerId::new("contiguous");

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
    place(trace.layer_ids(), trace.num_experts(), topology)
}

fn place(layer_ids: &[u32], e: usize, topology: Topology) -> Result<Plan> {
    let d = topology.num_gpus();
    let layers = layer_ids
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

/// The registry's contiguous placement.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ContiguousPlanner;

/// Its registry entry, data only ([`crate::planners::SPECS`] lists it).
pub(crate) const SPEC: PlannerSpec = PlannerSpec {
    id: ID,
    display: "Contiguous",
    about: "Expert e on GPU e·D/E, no replicas, loads ignored (no balancer at all)",
    needs: Needs::Shape,
    options: &[],
    serves_under: None,
};

impl Planner for ContiguousPlanner {
    fn spec(&self) -> &'static PlannerSpec {
        &SPEC
    }
    fn prepare(
        &self,
        work: &Workload,
        topology: Topology,
        _settings: &Settings,
    ) -> Result<Box<dyn Prepared>> {
        let trace = work.trace();
        Ok(Box::new(PreparedContiguous {
            layer_ids: trace.layer_ids().to_vec(),
            experts: trace.num_experts(),
            topology,
        }))
    }
}

#[derive(Debug, Clone)]
struct PreparedContiguous {
    layer_ids: Vec<u32>,
    experts: usize,
    topology: Topology,
}

impl Prepared for PreparedContiguous {
    fn plan(&self, _budget: Option<usize>) -> Result<Planned> {
        Ok(Planned {
            plan: place(&self.layer_ids, self.experts, self.topology)?,
            budget: None,
            predicted: None,
        })
    }
}
