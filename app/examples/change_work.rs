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
//! each is dumped under its name (`CALLGRIND_DUMP_STATS_AT`). So is each
//! step of the work ahead of time after opening, as
//! `warm-up step|kind|what`: `cargo xtask` keeps the longest of each kind,
//! the most a change can wait behind (issue 52). Natively it prints each
//! change's wall time and each kind's longest step.

use std::process::ExitCode;
use std::time::Instant;

use crabgrind::callgrind;
use moeplan_app::protocol::{Request, Response, Source};
use moeplan_app::settings::Settings;
use moeplan_app::worker::{Warmed, WorkerState};

/// Steps of Libra's path table counted after the neighbouring clusters:
/// its first batches (one learnt in parts, then a step per layer), whose
/// steps cost what every later batch's do.
const PATH_TABLE_STEPS: usize = 150;

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
    // Between requests the worker prepares the neighbouring clusters
    // (CRAFT's measurements, and GRACE's clusterings with token routes);
    // the e2e times changes once it is idle. Each step is counted alone: a
    // request waits behind one step at most (issue 52), and `cargo xtask`
    // keeps the longest of each kind. Then the first batches of Libra's
    // path table, which does not serve the changes below.
    callgrind::start_instrumentation();
    let mut longest: Vec<(&str, f64, String)> = Vec::new();
    let mut step = |worker: &mut WorkerState| {
        let (kind, what) = worker.next_step().unwrap_or(("", String::new()));
        let t = Instant::now();
        callgrind::zero_stats();
        let done = worker.warm_step(now);
        callgrind::dump_stats(format!("warm-up step|{kind}|{what}").as_str());
        let ms = t.elapsed().as_secs_f64() * 1e3;
        match longest.iter_mut().find(|l| l.0 == kind) {
            Some(l) if l.1 >= ms => {}
            Some(l) => *l = (kind, ms, what),
            None => longest.push((kind, ms, what)),
        }
        done
    };
    while worker.warming() {
        if let Some(Warmed::Clusters(..)) = step(&mut worker) {
            break;
        }
    }
    println!("neighbours prepared: {:.1} ms", now());
    for _ in 0..PATH_TABLE_STEPS {
        if !worker.warming() {
            break;
        }
        step(&mut worker);
    }

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
    // What the changes replaced is freed by the next step ahead of time,
    // a step of its own.
    while worker
        .next_step()
        .is_some_and(|(kind, _)| kind.starts_with("freeing"))
    {
        step(&mut worker);
    }
    for (kind, ms, what) in &longest {
        println!("longest warm-up step, {kind}: {ms:.1} ms ({what})");
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
