//! The work of the page's heaviest changes, each counted alone: what
//! `cargo xtask test` holds to the ceilings in docs/speed.md ("Instructions
//! per change"), in instructions, which a slower or busier machine does not
//! move (issue 46: no wall-clock gate in the test command).
//!
//! ```text
//! cargo run --release -p moeplan-app --no-default-features --example change_work -- routes|counts
//! valgrind --tool=callgrind --instr-atstart=no target/release/examples/change_work routes
//! ```
//!
//! It opens the page's default as the page does (the trace, then the
//! timeline's follow-up), lets the worker prepare GRACE's neighbouring
//! clusters as it does between requests, then makes each change of
//! [`CHANGES`] through the worker's own entry point
//! ([`WorkerState::handle`]) with the requests the page sends
//! ([`Request::from_settings`]); a cluster change's follow-up (Libra, and
//! GRACE on a cluster it has not clustered) is counted on its own row.
//! Under callgrind with `--instr-atstart=no` only the changes are counted:
//! each is dumped under its name (`CALLGRIND_DUMP_STATS_AT`). Natively it
//! prints each change's wall time.

use std::process::ExitCode;
use std::time::Instant;

use crabgrind::callgrind;
use moeplan_app::protocol::{Request, Response, Source};
use moeplan_app::settings::Settings;
use moeplan_app::worker::{Warmed, WorkerState};

/// One change the page's controls make.
#[derive(Clone, Copy)]
enum Change {
    GpusPerNode(usize),
    Nodes(usize),
    LibraN(usize),
    Predictor(&'static str),
}

/// The changes counted, in order, as the e2e's change timings make them:
/// each cluster change there and back, then Libra's two options.
const CHANGES: &[(&str, Change)] = &[
    ("GPUs per node 8 → 4", Change::GpusPerNode(4)),
    ("GPUs per node 4 → 8", Change::GpusPerNode(8)),
    ("nodes 8 → 4", Change::Nodes(4)),
    ("nodes 4 → 8", Change::Nodes(8)),
    ("Libra's N 8 → 4", Change::LibraN(4)),
    ("Libra's predictor → oracle", Change::Predictor("oracle")),
];

fn main() -> ExitCode {
    let which = std::env::args().nth(1).unwrap_or_default();
    let routes = match which.as_str() {
        "routes" => true,
        "counts" => false,
        _ => {
            eprintln!("usage: change_work routes|counts");
            return ExitCode::from(2);
        }
    };
    match run(routes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("change_work {which}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(routes: bool) -> Result<(), String> {
    let mut s = Settings {
        routes,
        ..Settings::default()
    };
    let t0 = Instant::now();
    let now = move || t0.elapsed().as_secs_f64() * 1e3;
    let mut worker = WorkerState::default();
    let mut id = 0;
    let ask = |worker: &mut WorkerState, req: Request| -> Result<(), String> {
        match worker.handle(&req, None, now, |_| {}) {
            Response::Error { message, .. } => Err(message),
            _ => Ok(()),
        }
    };
    let mut next = || {
        id += 1;
        id
    };
    // The page opens: the trace on the default cluster, then the timeline.
    let open = Request::from_settings(
        next(),
        &s,
        Some(Source::generated(&s)),
        Some(s.cluster()),
        None,
        false,
    );
    ask(&mut worker, open)?;
    println!("opened: {:.1} ms", now());
    ask(
        &mut worker,
        Request::from_settings(next(), &s, None, None, None, true),
    )?;
    println!("timeline: {:.1} ms", now());
    // Between requests the worker prepares GRACE's neighbouring clusters
    // (token routes only); the e2e times changes once it is idle. Libra's
    // path table, made after them, does not serve these changes.
    while worker.warming() {
        if let Some(Warmed::Clusters(..)) = worker.warm_step(now) {
            break;
        }
    }
    println!("GRACE's neighbours prepared: {:.1} ms", now());
    callgrind::start_instrumentation();
    for &(name, change) in CHANGES {
        let cluster_change = match change {
            Change::GpusPerNode(g) => {
                s.gpus_per_node = g;
                true
            }
            Change::Nodes(n) => {
                s.nodes = n;
                true
            }
            Change::LibraN(n) => {
                s.libra_n = n;
                false
            }
            Change::Predictor(p) => {
                s.predictor = p.to_string();
                false
            }
        };
        let cluster = cluster_change.then(|| s.cluster());
        let req = Request::from_settings(next(), &s, None, cluster, None, false);
        counted(name, || ask(&mut worker, req))?;
        if cluster_change {
            // The page asks for the timeline once the static plans are drawn.
            let req = Request::from_settings(next(), &s, None, None, None, true);
            counted(&format!("{name}, follow-up"), || ask(&mut worker, req))?;
        }
    }
    Ok(())
}

/// Runs `work` counted alone (under callgrind: its counts zeroed first,
/// then dumped under `name`) and prints its wall time. Instrumentation,
/// started before the first change, is never stopped: callgrind drops what
/// it counted in code it stops instrumenting, and the dumps after such a
/// stop came out wrong (totals that wrapped below zero).
fn counted(name: &str, work: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    callgrind::zero_stats();
    let t = Instant::now();
    let done = work();
    callgrind::dump_stats(name);
    println!("{name}: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    done
}
