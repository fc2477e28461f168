//! The planning worker's state and request handling, in plain Rust so it is
//! tested natively; `bin/worker.rs` only wires it to `postMessage`.
//!
//! Invariant: a request that fails leaves the state as it was — a broken
//! file never costs the user the trace they had.

use moeplan::formats::{self, ReadOptions};
use moeplan::generator::{GenConfig, generate};
use moeplan::workspace::{Cluster, Workspace};
use moeplan::{LoadTrace, model};

use crate::protocol::{Request, Response, Source, TraceStatsLite};

/// Largest trace file the page accepts.
pub const MAX_FILE_BYTES: usize = 256 << 20;

/// What the worker holds between requests.
#[derive(Default)]
pub struct WorkerState {
    workspace: Option<Workspace>,
    source: String,
}

impl WorkerState {
    /// Answers one request. `progress` is called with each long phase.
    pub fn handle(
        &mut self,
        req: &Request,
        bytes: Option<&[u8]>,
        now_ms: impl Fn() -> f64,
        mut progress: impl FnMut(&str),
    ) -> Response {
        let start = now_ms();
        match self.try_handle(req, bytes, &mut progress) {
            Ok(r) => match r {
                Answer::View(stats) => match self.view(req) {
                    Ok(view) => Response::View {
                        id: req.id,
                        stats,
                        view: Box::new(view),
                        worker_ms: now_ms() - start,
                    },
                    Err(message) => Response::Error {
                        id: req.id,
                        message,
                    },
                },
                Answer::Export(file_name, text, note) => Response::Export {
                    id: req.id,
                    file_name,
                    text,
                    note,
                },
            },
            Err(message) => Response::Error {
                id: req.id,
                message,
            },
        }
    }

    fn view(&self, req: &Request) -> Result<moeplan::workspace::View, String> {
        let ws = self.workspace.as_ref().ok_or("no trace yet")?;
        let layer = req.layer.min(ws.trace().num_layers().saturating_sub(1));
        ws.view(req.replicas_per_gpu, layer)
            .map_err(|e| e.to_string())
    }

    fn try_handle(
        &mut self,
        req: &Request,
        bytes: Option<&[u8]>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Answer, String> {
        let new_trace = match &req.source {
            Some(source) => Some(load(source, bytes, progress)?),
            None => None,
        };
        let cluster = match (req.cluster, &self.workspace) {
            (Some(c), _) => c,
            (None, Some(ws)) => current_cluster(ws),
            (None, None) => return Err("no cluster given yet".into()),
        };
        let changed_cluster = self
            .workspace
            .as_ref()
            .is_none_or(|ws| current_cluster(ws) != cluster);
        let mut stats = None;
        if new_trace.is_some() || changed_cluster {
            let (trace, name) = match new_trace {
                Some(t) => t,
                None => match &self.workspace {
                    Some(ws) => (ws.trace().clone(), self.source.clone()),
                    None => return Err("no trace yet".into()),
                },
            };
            let s = TraceStatsLite::from_stats(name.clone(), &trace.stats());
            // Build first, replace after: a failure keeps the old workspace.
            let ws = Workspace::with_progress(trace, cluster, &mut *progress)
                .map_err(|e| e.to_string())?;
            self.workspace = Some(ws);
            self.source = name;
            stats = Some(s);
        }
        if let Some(format) = &req.export {
            let ws = self.workspace.as_ref().ok_or("no plan to export yet")?;
            let export = ws
                .export(req.replicas_per_gpu, format)
                .map_err(|e| e.to_string())?;
            let ext = if format == "sglang" {
                "sglang.json"
            } else {
                "plan.json"
            };
            return Ok(Answer::Export(
                format!("moeplan-craft.{ext}"),
                export.text,
                export.note,
            ));
        }
        Ok(Answer::View(stats))
    }
}

enum Answer {
    View(Option<TraceStatsLite>),
    Export(String, String, Option<String>),
}

/// The cluster a workspace was built for (groups are not recoverable from a
/// topology, so the workspace remembers them through its EPLB plans; here we
/// keep them alongside).
fn current_cluster(ws: &Workspace) -> Cluster {
    ws.cluster()
}

fn load(
    source: &Source,
    bytes: Option<&[u8]>,
    progress: &mut dyn FnMut(&str),
) -> Result<(LoadTrace, String), String> {
    match source {
        Source::Generate {
            preset,
            batches,
            seed,
        } => {
            progress("generating the trace");
            let p = model::preset(preset).map_err(|e| e.to_string())?;
            let cfg = GenConfig {
                seed: (*seed).into(),
                ..GenConfig::new(p, *batches)
            };
            let t = generate(&cfg).map_err(|e| e.to_string())?;
            Ok((
                t,
                format!("generated {preset}, {batches} batches, seed {seed}"),
            ))
        }
        Source::File { name } => {
            let bytes = bytes.ok_or_else(|| format!("{name}: no file content arrived"))?;
            if bytes.len() > MAX_FILE_BYTES {
                return Err(format!(
                    "{name}: {} MiB is more than the {} MiB the page reads",
                    bytes.len() >> 20,
                    MAX_FILE_BYTES >> 20
                ));
            }
            progress("reading the file");
            let t = formats::read_trace(bytes, &ReadOptions::default())
                .map_err(|e| format!("{name}: {e}"))?;
            Ok((t, name.clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64, source: Option<Source>, cluster: Option<Cluster>, r: Option<usize>) -> Request {
        Request {
            id,
            source,
            cluster,
            replicas_per_gpu: r,
            layer: 0,
            export: None,
        }
    }

    fn gen_source() -> Source {
        Source::Generate {
            preset: "olmoe".into(),
            batches: 4,
            seed: 1,
        }
    }

    const CLUSTER: Cluster = Cluster {
        nodes: 1,
        gpus_per_node: 8,
        groups: 1,
    };

    fn view_of(r: Response) -> moeplan::workspace::View {
        match r {
            Response::View { view, .. } => *view,
            other => panic!("expected a view, got {other:?}"),
        }
    }

    #[test]
    fn broken_file_keeps_the_previous_trace() {
        let mut s = WorkerState::default();
        let v1 = view_of(s.handle(
            &req(1, Some(gen_source()), Some(CLUSTER), Some(2)),
            None,
            || 0.0,
            |_| {},
        ));
        let bad = Source::File {
            name: "bad.json".into(),
        };
        let r = s.handle(
            &req(2, Some(bad), None, Some(2)),
            Some(b"{\"logical_count\": [[1, -2]]}"),
            || 0.0,
            |_| {},
        );
        match r {
            Response::Error { message, .. } => {
                assert!(message.starts_with("bad.json:"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        let v2 = view_of(s.handle(&req(3, None, None, Some(2)), None, || 0.0, |_| {}));
        assert_eq!(v1, v2);
    }

    #[test]
    fn budget_change_keeps_the_workspace_and_changes_craft() {
        let mut s = WorkerState::default();
        let mut phases = Vec::new();
        let v0 = view_of(s.handle(
            &req(1, Some(gen_source()), Some(CLUSTER), Some(0)),
            None,
            || 0.0,
            |p| phases.push(p.to_string()),
        ));
        assert!(!phases.is_empty());
        phases.clear();
        let v4 = view_of(s.handle(
            &req(2, None, None, Some(4)),
            None,
            || 0.0,
            |p| phases.push(p.to_string()),
        ));
        assert!(
            phases.is_empty(),
            "a budget change must not re-plan: {phases:?}"
        );
        assert_eq!(v0.plans[0], v4.plans[0]); // BASE unchanged
        assert!(v4.plans[2].replicas > v0.plans[2].replicas);
    }

    #[test]
    fn export_formats() {
        let mut s = WorkerState::default();
        s.handle(
            &req(1, Some(gen_source()), Some(CLUSTER), Some(2)),
            None,
            || 0.0,
            |_| {},
        );
        let mut r = req(2, None, None, Some(2));
        r.export = Some("sglang".into());
        match s.handle(&r, None, || 0.0, |_| {}) {
            Response::Export {
                text, file_name, ..
            } => {
                assert!(text.starts_with("{\"physical_to_logical_map\""));
                assert!(file_name.ends_with("sglang.json"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn huge_file_is_refused_before_parsing() {
        let mut s = WorkerState::default();
        let big = vec![b' '; MAX_FILE_BYTES + 1];
        let src = Source::File {
            name: "big.json".into(),
        };
        match s.handle(
            &req(1, Some(src), Some(CLUSTER), None),
            Some(&big),
            || 0.0,
            |_| {},
        ) {
            Response::Error { message, .. } => assert!(message.contains("MiB"), "{message}"),
            other => panic!("{other:?}"),
        }
    }
}
