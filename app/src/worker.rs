//! The planning worker's state and request handling, in plain Rust so it is
//! tested natively; `bin/worker.rs` only wires it to `postMessage`.
//!
//! Invariant: a request that fails leaves the state as it was — a broken
//! file never costs the user the trace they had.

use moeplan::formats::{self, ReadOptions};
use moeplan::generator::{GenConfig, generate};
use moeplan::workspace::{View, Workspace};
use moeplan::{Budget, LoadTrace, model};

use crate::protocol::{Request, Response, Source, TraceStatsLite};

/// The page's reading limit in MiB: a file larger than this on disk is
/// refused before it is read, and reading may build no more than this
/// (the file itself, what it decompresses to and the parsed values).
pub const MAX_TRACE_MIB: u64 = 512;

/// Largest trace file the page accepts, in bytes.
pub const MAX_FILE_BYTES: u64 = MAX_TRACE_MIB << 20;

/// Tells a page user what the limit is and where to go past it.
pub const BUDGET_HINT: &str = "the page reads files that expand to at most 512 MiB; \
use the moeplan CLI with --max-trace-mib for larger ones";

/// The phase the worker reports while it reads a file (the page's read
/// deadline runs until a later phase or an answer arrives).
pub const READING_PHASE: &str = "reading the file";

/// The budget the worker reads every file with.
///
/// ```
/// let b = moeplan_app::worker::read_budget();
/// assert_eq!(b.max_bytes, moeplan_app::worker::MAX_FILE_BYTES);
/// assert!(b.raise_hint.contains("--max-trace-mib"));
/// ```
pub fn read_budget() -> Budget {
    Budget::mib(MAX_TRACE_MIB).with_hint(BUDGET_HINT)
}

/// The message for a file of `size` bytes on disk when it is over the
/// page's limit, or `None` when the page may read it.
///
/// ```
/// use moeplan_app::worker::{MAX_FILE_BYTES, too_large};
/// assert!(too_large("a.json", MAX_FILE_BYTES as f64).is_none());
/// let m = too_large("a.json", (600u64 << 20) as f64).unwrap();
/// assert!(m.starts_with("a.json: 600 MiB on disk") && m.contains("512 MiB"), "{m}");
/// ```
pub fn too_large(name: &str, size: f64) -> Option<String> {
    (size > MAX_FILE_BYTES as f64).then(|| {
        format!(
            "{name}: {:.0} MiB on disk is more than the {MAX_TRACE_MIB} MiB the page reads \
(use the moeplan CLI with --max-trace-mib for larger files)",
            (size / (1u64 << 20) as f64).ceil()
        )
    })
}

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
            Ok(Answer::View(view, stats)) => Response::View {
                id: req.id,
                stats,
                view,
                worker_ms: now_ms() - start,
            },
            Ok(Answer::Export(file_name, text, note)) => Response::Export {
                id: req.id,
                file_name,
                text,
                note,
            },
            Err(message) => Response::Error {
                id: req.id,
                message,
            },
        }
    }

    /// Works out the whole answer first and changes the state last, so a
    /// request that fails at any step (reading, planning, the view for its
    /// budget, the export) leaves the state as it was.
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
            (None, Some(ws)) => ws.cluster(),
            (None, None) => return Err("no cluster given yet".into()),
        };
        let changed_cluster = self
            .workspace
            .as_ref()
            .is_none_or(|ws| ws.cluster() != cluster);
        let mut fresh = None;
        if new_trace.is_some() || changed_cluster {
            let (trace, name) = match new_trace {
                Some(t) => t,
                None => match &self.workspace {
                    Some(ws) => (ws.trace().clone(), self.source.clone()),
                    None => return Err("no trace yet".into()),
                },
            };
            let stats = TraceStatsLite::from_stats(name.clone(), &trace.stats());
            let ws = Workspace::with_progress(trace, cluster, &mut *progress)
                .map_err(|e| e.to_string())?;
            fresh = Some((ws, name, stats));
        }
        let ws = match &fresh {
            Some((ws, ..)) => ws,
            None => self.workspace.as_ref().ok_or("no trace yet")?,
        };
        let answer = match &req.export {
            Some(format) => {
                let export = ws
                    .export(req.replicas_per_gpu, format)
                    .map_err(|e| e.to_string())?;
                let ext = if format == "sglang" {
                    "sglang.json"
                } else {
                    "plan.json"
                };
                Answer::Export(format!("moeplan-craft.{ext}"), export.text, export.note)
            }
            None => Answer::View(Box::new(view(ws, req)?), None),
        };
        Ok(match fresh {
            Some((ws, name, stats)) => {
                self.workspace = Some(ws);
                self.source = name;
                match answer {
                    Answer::View(v, _) => Answer::View(v, Some(stats)),
                    export => export,
                }
            }
            None => answer,
        })
    }
}

fn view(ws: &Workspace, req: &Request) -> Result<View, String> {
    let layer = req.layer.min(ws.trace().num_layers().saturating_sub(1));
    ws.view(req.replicas_per_gpu, layer)
        .map_err(|e| e.to_string())
}

enum Answer {
    /// The view, and the new trace's statistics when the trace changed.
    View(Box<View>, Option<TraceStatsLite>),
    Export(String, String, Option<String>),
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
            if let Some(message) = too_large(name, bytes.len() as f64) {
                return Err(message);
            }
            progress(READING_PHASE);
            let options = ReadOptions {
                budget: read_budget(),
                ..ReadOptions::default()
            };
            let t = formats::read_trace(bytes, &options).map_err(|e| format!("{name}: {e}"))?;
            Ok((t, name.clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moeplan::workspace::Cluster;

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
        let big = vec![b' '; MAX_FILE_BYTES as usize + 1];
        let src = Source::File {
            name: "big.json".into(),
        };
        match s.handle(
            &req(1, Some(src), Some(CLUSTER), None),
            Some(&big),
            || 0.0,
            |_| {},
        ) {
            Response::Error { message, .. } => {
                assert!(
                    message.starts_with("big.json: 513 MiB on disk"),
                    "{message}"
                );
                assert!(message.contains("--max-trace-mib"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(s.workspace.is_none());
    }

    fn summary(s: &mut WorkerState) -> moeplan::workspace::View {
        view_of(s.handle(&req(99, None, None, Some(2)), None, || 0.0, |_| {}))
    }

    #[test]
    fn a_failing_step_after_planning_keeps_the_previous_trace() {
        let mut s = WorkerState::default();
        view_of(s.handle(
            &req(1, Some(gen_source()), Some(CLUSTER), Some(2)),
            None,
            || 0.0,
            |_| {},
        ));
        let before = summary(&mut s);
        let other = Source::Generate {
            preset: "olmoe".into(),
            batches: 3,
            seed: 2,
        };
        // The new trace plans, but the export asked with it fails.
        let mut r = req(2, Some(other.clone()), None, Some(2));
        r.export = Some("bogus".into());
        assert!(matches!(
            s.handle(&r, None, || 0.0, |_| {}),
            Response::Error { .. }
        ));
        // The new trace plans, but its view for this budget fails.
        let r = req(3, Some(other), None, Some(usize::MAX));
        assert!(matches!(
            s.handle(&r, None, || 0.0, |_| {}),
            Response::Error { .. }
        ));
        assert_eq!(summary(&mut s), before);
        assert!(s.source.contains("4 batches"), "{}", s.source);
    }

    /// Every hostile file the core knows of, through the worker: one error
    /// naming the file with the words `EXPECTED` gives, and the trace kept.
    #[test]
    fn every_hostile_fixture_keeps_the_previous_trace() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../crates/moeplan/tests/fixtures/broken"
        );
        let expected = std::fs::read_to_string(format!("{dir}/EXPECTED")).unwrap();
        let words: std::collections::HashMap<&str, &str> = expected
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| l.split_once('\t'))
            .collect();
        let mut s = WorkerState::default();
        view_of(s.handle(
            &req(1, Some(gen_source()), Some(CLUSTER), Some(2)),
            None,
            || 0.0,
            |_| {},
        ));
        let before = summary(&mut s);
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != "EXPECTED")
            .collect();
        files.sort();
        assert!(files.len() > 40, "{files:?}");
        for name in files {
            let bytes = std::fs::read(format!("{dir}/{name}")).unwrap();
            let src = Source::File { name: name.clone() };
            match s.handle(
                &req(2, Some(src), None, Some(2)),
                Some(&bytes),
                || 0.0,
                |_| {},
            ) {
                Response::Error { message, .. } => {
                    assert!(message.starts_with(&format!("{name}: ")), "{message}");
                    let w = words
                        .get(name.as_str())
                        .unwrap_or_else(|| panic!("{name} is not in EXPECTED"));
                    assert!(
                        message.to_lowercase().contains(&w.to_lowercase()),
                        "{name}: {message:?} lacks {w:?}"
                    );
                    if message.contains("reading limit") {
                        assert!(message.contains(BUDGET_HINT), "{message}");
                    }
                }
                other => panic!("{name}: {other:?}"),
            }
            assert_eq!(summary(&mut s), before, "{name}");
        }
    }
}
