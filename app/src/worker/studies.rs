//! The worker's studies beside the view: plans judged across traces
//! ([`WorkerState::cross`]) and serving with re-planning
//! ([`WorkerState::serving`]).

use moeplan::LoadTrace;
use moeplan::planners::Settings;
use moeplan_view::{ServingAsk, ServingView, Workspace};

use super::{Read, WorkerState, pricing, rule_of};
use crate::protocol::{CrossAsk, Request};
use moeplan_view::page::{CrossLine, CrossTable};

impl WorkerState {
    /// Plans across the workloads `ask` names (`read` from its files, each
    /// within its share of the page's reading budget) or, when it names
    /// none, the ones held; at the request's cluster (else the workspace's)
    /// and budget. The traces are kept only when the matrix is made.
    pub(super) fn cross(
        &mut self,
        req: &Request,
        ask: &CrossAsk,
        read: Option<Read>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<CrossTable, String> {
        let cluster = req
            .cluster
            .or_else(|| self.workspace.as_ref().map(Workspace::cluster))
            .ok_or("no cluster given yet")?;
        let fresh = if ask.names.is_empty() {
            None
        } else {
            let read = read.ok_or("the files' bytes did not arrive")?;
            Some(read.into_iter().unzip::<_, _, Vec<_>, Vec<_>>())
        };
        let (names, traces) = match (&fresh, &self.cross) {
            (Some((n, t)), _) | (None, Some((n, t))) => (n, t),
            (None, None) => return Err("no traces loaded to judge plans across".into()),
        };
        progress("planning on every trace and judging on every trace");
        let topology = moeplan::Topology::new(cluster.nodes, cluster.gpus_per_node)
            .map_err(|e| e.to_string())?;
        let settings = cross_settings(cluster.groups, req.replicas_per_gpu)?;
        let rows = moeplan::studies::cross_table(traces, topology, &settings)
            .map_err(|e| e.to_string())?;
        let table = CrossTable {
            traces: names.clone(),
            batches: traces.iter().map(LoadTrace::num_batches).collect(),
            cluster: topology.to_string(),
            rows: rows
                .iter()
                .map(|r| CrossLine {
                    name: r.name.clone(),
                    planner: r.planner.to_string(),
                    made_on: r.made_on,
                    replicas: r.plan.summary().replicas,
                    balancedness: r.cells.iter().map(|c| c.balancedness).collect(),
                    in_sample: r
                        .cells
                        .iter()
                        .map(|c| c.scope.kind() == "in-sample")
                        .collect(),
                })
                .collect(),
        };
        if let Some(f) = fresh {
            self.cross = Some(f);
        }
        Ok(table)
    }
}

impl WorkerState {
    /// Serves the workspace's trace with EPLB re-planned as `ask` says,
    /// under the request's rule, priced on its hardware; a move's bytes are
    /// the priced (else the workspace's) model's experts.
    pub(super) fn serving(&self, req: &Request, ask: ServingAsk) -> Result<ServingView, String> {
        let ws = self.workspace.as_ref().ok_or("no trace planned yet")?;
        let rule = rule_of(req)?;
        let pricing = pricing(ws, req)?;
        let expert_bytes = match &pricing {
            Some(p) => p.assumptions.expert_bytes(&p.model),
            None => ws.judge().model().preset.expert_bytes() as f64,
        };
        ws.serving(ask, rule, pricing.as_ref(), expert_bytes)
            .map_err(|e| e.to_string())
    }
}

/// EPLB's router groups and CRAFT's budget as the page's other plans get
/// them.
pub(super) fn cross_settings(
    groups: usize,
    replicas_per_gpu: Option<usize>,
) -> Result<Settings, String> {
    use moeplan::planners::Value;
    let budget = replicas_per_gpu.map_or(Value::Auto, Value::Count);
    Settings::new()
        .with("groups", Value::Count(groups))
        .and_then(|s| s.with("replicas_per_gpu", budget))
        .map_err(|e| e.to_string())
}
