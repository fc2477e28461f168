//! Work ahead of time between requests: CRAFT's measurements and GRACE's
//! clusterings for the clusters a person is likely to pick next, then
//! Libra's path-table predictions ([`WorkerState::warm_step`]).

use moeplan_view::{Cluster, Workspace};

use super::WorkerState;

/// What one step ahead of time prepares for a neighbouring cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ahead {
    /// CRAFT's measurements of one layer (the step after the last layer:
    /// its budget bound), kept with the trace.
    Craft,
    /// GRACE's clusterings of one layer (token routes only).
    Grace,
}

/// Work ahead of time that [`WorkerState::warm_step`] finished.
#[derive(Debug, Clone, PartialEq)]
pub enum Warmed {
    /// CRAFT's measurements and (token routes) GRACE's clusterings of these
    /// clusters (`N × G`), in this many ms.
    Clusters(Vec<String>, f64),
    /// Libra's path-table predictions for the trace, in this many ms.
    PathTable(f64),
}

/// What the work ahead of time is preparing, for the page to say
/// ([`WorkerState::preparing`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Preparing {
    /// What for, in a few words.
    pub what: String,
    /// The fraction of it done, 0 to 1.
    pub done: f64,
}

/// The clusters a person is likely to try next from `c`, for GRACE's
/// clusterings ahead of time: half and twice the GPUs per node first — they
/// keep the node groupings as a rule, so they cost little — then half and
/// twice the nodes; at most `experts` GPUs, none twice, not `c` itself.
///
/// ```
/// use moeplan_view::Cluster;
/// use moeplan_app::worker::neighbours;
/// let c = |nodes, gpus_per_node| Cluster { nodes, gpus_per_node, groups: 8 };
/// let n: Vec<_> = neighbours(c(8, 8), 256).iter().map(|c| (c.nodes, c.gpus_per_node)).collect();
/// assert_eq!(n, vec![(8, 4), (8, 16), (4, 8), (16, 8)]);
/// let n: Vec<_> = neighbours(c(1, 8), 8).iter().map(|c| (c.nodes, c.gpus_per_node)).collect();
/// assert_eq!(n, vec![(1, 4)]);
/// ```
pub fn neighbours(c: Cluster, experts: usize) -> Vec<Cluster> {
    let (n, g) = (c.nodes, c.gpus_per_node);
    let mut out: Vec<Cluster> = Vec::new();
    for (nodes, gpus_per_node) in [(n, g / 2), (n, g * 2), (n / 2, g), (n * 2, g)] {
        let next = Cluster {
            nodes,
            gpus_per_node,
            ..c
        };
        let fits =
            nodes >= 1 && gpus_per_node >= 1 && nodes.saturating_mul(gpus_per_node) <= experts;
        if fits && next != c && !out.contains(&next) {
            out.push(next);
        }
    }
    out
}

impl WorkerState {
    /// Queues the work ahead of time for `ws`'s [`neighbours`], the first
    /// neighbour first: CRAFT's measurements of every layer (most of a
    /// cluster change's work, whatever the trace), then GRACE's
    /// clusterings of every layer when `ws` groups by token routes (a
    /// count-only trace groups by load, which costs nothing to re-plan).
    pub(super) fn warm_around(&mut self, ws: &Workspace) {
        self.warm.clear();
        self.warming = (Vec::new(), 0.0);
        let clusters = neighbours(ws.cluster(), ws.trace().num_experts());
        let layers = ws.trace().num_layers();
        let grace = if ws.workload().tokens().is_some() {
            layers
        } else {
            0
        };
        // Popped from the end: the first neighbour's first step last.
        for &c in clusters.iter().rev() {
            for layer in (0..grace).rev() {
                self.warm.push((Ahead::Grace, c, layer));
            }
            for layer in (0..layers).rev() {
                self.warm.push((Ahead::Craft, c, layer));
            }
        }
        self.warming.0 = clusters;
        self.queued = self.warm.len();
    }

    /// What the work ahead of time prepares now, and how far it is: the
    /// neighbouring clusters' steps, then Libra's path table; `None` when
    /// nothing is left.
    pub fn preparing(&self) -> Option<Preparing> {
        if !self.warm.is_empty() {
            let names: Vec<String> = self
                .warming
                .0
                .iter()
                .map(|c| format!("{} × {}", c.nodes, c.gpus_per_node))
                .collect();
            let grace = self.warm.iter().any(|(w, ..)| *w == Ahead::Grace);
            let what = if grace {
                "GRACE's clusterings and CRAFT's measurements"
            } else {
                "CRAFT's measurements"
            };
            return Some(Preparing {
                what: format!("{what} for {}, a GPU or node change away", names.join(", ")),
                done: 1.0 - self.warm.len() as f64 / self.queued.max(1) as f64,
            });
        }
        self.memo.as_ref().map(|(build, _)| Preparing {
            what: "Libra's path-table predictions, for its path-table predictor".into(),
            done: build.progress(),
        })
    }

    /// One step of the work ahead of time: CRAFT's measurements or GRACE's
    /// clusterings of one layer for one neighbouring cluster, then, once
    /// those are done, one step of Libra's path-table predictions. Returns
    /// what this step finished (with the milliseconds its work took, by
    /// `now_ms`), `None` while that work goes on or when there was none.
    /// The page's worker runs steps only between requests, so they never
    /// delay an answer by more than one step.
    pub fn warm_step(&mut self, now_ms: impl Fn() -> f64) -> Option<Warmed> {
        // What the last answers replaced is freed first, a step of its own.
        if self.retired.pop().is_some() {
            return None;
        }
        let ws = self.workspace.as_ref()?;
        let start = now_ms();
        if let Some((what, cluster, layer)) = self.warm.pop() {
            // A cluster that cannot be prepared (checked again when asked
            // for) is left to be planned from scratch then.
            let failed = match what {
                Ahead::Craft => ws.warm_craft(cluster, layer).is_err(),
                Ahead::Grace => ws.warm_grace(cluster, layer).is_err(),
            };
            if failed {
                self.warm.retain(|(w, c, _)| (*w, *c) != (what, cluster));
            }
            self.warming.1 += now_ms() - start;
            if !self.warm.is_empty() {
                return None;
            }
            let done = self
                .warming
                .0
                .iter()
                .map(|c| format!("{} × {}", c.nodes, c.gpus_per_node))
                .collect();
            return Some(Warmed::Clusters(done, self.warming.1));
        }
        let (build, ms) = self.memo.as_mut()?;
        let done = build.step(ws.workload());
        *ms += now_ms() - start;
        match done {
            Ok(false) => None,
            Ok(true) => {
                let ms = *ms;
                self.memo = None;
                Some(Warmed::PathTable(ms))
            }
            // Asked for, the path table says why in Libra's row.
            Err(_) => {
                self.memo = None;
                None
            }
        }
    }

    /// The kind of the next step of the work ahead of time, and what it is
    /// on (the instruction counts of `change_work` name each step they
    /// count with it); `None` when nothing is queued.
    pub fn next_step(&self) -> Option<(&'static str, String)> {
        if !self.retired.is_empty() {
            return Some(("freeing a replaced workspace", String::new()));
        }
        if let Some((what, c, layer)) = self.warm.last() {
            let kind = match what {
                Ahead::Craft => "CRAFT's measurements of a layer",
                Ahead::Grace => "GRACE's clusterings of a layer",
            };
            return Some((
                kind,
                format!("{} × {}, layer {layer}", c.nodes, c.gpus_per_node),
            ));
        }
        self.memo.as_ref().map(|(build, _)| {
            (
                "Libra's path table, a step",
                format!("{:.1} % made", build.progress() * 100.0),
            )
        })
    }

    /// Whether the neighbouring clusters' steps are still queued (before
    /// Libra's path table).
    pub fn preparing_neighbours(&self) -> bool {
        !self.warm.is_empty()
    }

    /// Whether work ahead of time is queued.
    pub fn warming(&self) -> bool {
        !self.warm.is_empty() || self.memo.is_some() || !self.retired.is_empty()
    }
}
