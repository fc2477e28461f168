//! The rebalancer's unit tests.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

/// Random slots on `d` GPUs: every expert of `e_n` once somewhere,
/// then up to `copies · d` more copies anywhere (some twice on a GPU).
fn random_slots(rng: &mut ChaCha8Rng, d: usize, e_n: usize, copies: usize) -> Vec<Vec<u32>> {
    let mut gpus = vec![Vec::new(); d];
    for e in 0..e_n {
        gpus[rng.random_range(0..d)].push(e as u32);
    }
    for _ in 0..rng.random_range(0..copies * d + 1) {
        gpus[rng.random_range(0..d)].push(rng.random_range(0..e_n) as u32);
    }
    gpus
}

/// Under even arrival the replay reads one row (`run_uniform`,
/// `route_uniform`); it must give what `D` copies of the row give
/// through the general path, loads and every traffic figure, up to
/// rounding, for both remote starts, on random layers with copies
/// (some on one GPU twice) and some experts never sent.
#[test]
fn uniform_row_equals_every_gpu_sending_it() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (mut checked, mut moved) = (0, 0);
    for case in 0..400 {
        let nodes = rng.random_range(1..4);
        let gpn = rng.random_range(1..5);
        let topology = Topology::new(nodes, gpn).unwrap_or_else(|e| panic!("{e}"));
        let d = topology.num_gpus();
        let e_n = rng.random_range(d..40);
        let gpus = random_slots(&mut rng, d, e_n, 3);
        let layer = LayerPlacement { layer: 0, gpus };
        let row: Vec<f64> = (0..e_n)
            .map(|_| {
                let u: f64 = rng.random();
                if u < 0.2 { 0.0 } else { u.powi(3) * 100.0 }
            })
            .collect();
        let src: Vec<f64> = (0..d).flat_map(|_| row.clone()).collect();
        let start = RemoteStart::ALL[case % 2];
        let eps = f64::from(rng.random_range(0u32..20)) / 100.0;
        let mut a = Rebalancer::new(&layer, e_n)
            .unwrap_or_else(|e| panic!("{e}"))
            .with_start(start);
        let mut b = a.clone();
        let max_a = a.run(&src, eps);
        let max_b = b.run_uniform(&row, eps);
        let (mut ta, mut tb) = (Tally::default(), Tally::default());
        ta.reset(topology);
        tb.reset(topology);
        a.route(&src, |s, g, x| ta.pair(s, g, x));
        b.route_uniform(&row, topology, &mut tb);
        ta.finish();
        tb.finish();
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0);
        let msg = format!("case {case}: {d} GPUs ({nodes} × {gpn}), {e_n} experts, {start:?}");
        assert!(close(max_a, max_b), "{msg}: max {max_a} vs {max_b}");
        assert_eq!(a.transfers(), b.transfers(), "{msg}");
        for (x, y) in a.gpu_loads().iter().zip(b.gpu_loads()) {
            assert!(
                close(*x, *y),
                "{msg}: loads {:?} vs {:?}",
                a.gpu_loads(),
                b.gpu_loads()
            );
        }
        for (name, x, y) in [
            ("local", ta.local, tb.local),
            ("intra", ta.intra, tb.intra),
            ("cross", ta.cross, tb.cross),
            ("max ingress", ta.max_ingress, tb.max_ingress),
            ("max egress", ta.max_egress, tb.max_egress),
        ] {
            assert!(close(x, y), "{msg}: {name} {x} vs {y}");
        }
        for (name, xs, ys) in [
            ("ingress", &ta.ingress, &tb.ingress),
            ("egress", &ta.egress, &tb.egress),
            ("ingress cross", &ta.ingress_cross, &tb.ingress_cross),
            ("egress cross", &ta.egress_cross, &tb.egress_cross),
        ] {
            for (x, y) in xs.iter().zip(ys) {
                assert!(close(*x, *y), "{msg}: {name} {xs:?} vs {ys:?}");
            }
        }
        assert_eq!(ta.by_pair, tb.by_pair, "{msg}");
        checked += 1;
        moved += a.transfers();
    }
    assert!(
        checked == 400 && moved > 200,
        "{checked} cases, {moved} transfers"
    );
}

/// Algorithm 2 written out plainly, with dense tables and no heap or
/// stuck list: while the busiest GPU is above `(1 + ε) · B`, the
/// busiest source (above `B`) that can give hands its hottest
/// replicated expert's remote pairs to that expert's least-loaded
/// other holder, up to `B`. The sums run in the rebalancer's order, so
/// loads and transfers must match it exactly. Returns (loads, transfers).
fn plain_algorithm_2(
    gpus: &[Vec<u32>],
    e_n: usize,
    src: &[f64],
    eps: f64,
    start: RemoteStart,
) -> (Vec<f64>, usize) {
    let d = gpus.len();
    let mut mult = vec![vec![0u32; e_n]; d];
    for (g, slots) in gpus.iter().enumerate() {
        for &e in slots {
            mult[g][e as usize] += 1;
        }
    }
    let mult = &mult;
    let holders = |e: usize| (0..d).filter(move |&g| mult[g][e] > 0);
    let primary = |e: usize| {
        (0..d)
            .filter_map(|g| {
                gpus[g]
                    .iter()
                    .position(|&x| x as usize == e)
                    .map(|p| (p, g))
            })
            .min()
            .map(|(_, g)| g)
    };
    let flex = |e: usize| holders(e).count() > 1;
    let (mut loads, mut local) = (vec![0.0; d], vec![0.0; d]);
    let mut remote = vec![vec![0.0; e_n]; d];
    for s in 0..src.len() / e_n {
        for e in 0..e_n {
            let n = src[s * e_n + e];
            if n == 0.0 {
                continue;
            }
            if mult[s][e] > 0 {
                local[s] += n;
            } else if flex(e) && start == RemoteStart::Even {
                let copies: u32 = (0..d).map(|g| mult[g][e]).sum();
                for g in holders(e) {
                    let x = n * f64::from(mult[g][e]) / f64::from(copies);
                    loads[g] += x;
                    remote[g][e] += x;
                }
            } else if let Some(p) = primary(e) {
                loads[p] += n;
                remote[p][e] += n;
            }
        }
    }
    for (l, x) in loads.iter_mut().zip(&local) {
        *l += x;
    }
    let target = loads.iter().sum::<f64>() / d as f64;
    let (bound, floor) = ((1.0 + eps) * target, 1e-9 * target);
    let mut transfers = 0;
    loop {
        if loads.iter().copied().fold(0.0, f64::max) <= bound {
            break;
        }
        let mut sources: Vec<usize> = (0..d).filter(|&g| loads[g] > target).collect();
        sources.sort_by(|&a, &b| loads[b].total_cmp(&loads[a]).then(a.cmp(&b)));
        let mut gave = false;
        'sources: for gs in sources {
            let mut hot: Vec<usize> = (0..e_n)
                .filter(|&e| flex(e) && remote[gs][e] > 0.0)
                .collect();
            hot.sort_by(|&a, &b| remote[gs][b].total_cmp(&remote[gs][a]).then(a.cmp(&b)));
            for e in hot {
                let Some(gd) = holders(e)
                    .filter(|&g| g != gs)
                    .min_by(|&a, &b| loads[a].total_cmp(&loads[b]).then(a.cmp(&b)))
                else {
                    continue;
                };
                let room = target - loads[gd];
                if room > floor {
                    let moved = remote[gs][e].min(room);
                    remote[gs][e] -= moved;
                    remote[gd][e] += moved;
                    loads[gs] -= moved;
                    loads[gd] += moved;
                    transfers += 1;
                    gave = true;
                    break 'sources;
                }
            }
        }
        if !gave {
            break;
        }
    }
    (loads, transfers)
}

/// The rebalancer (its heap, its stuck sources woken only by a GPU
/// that holds one of their experts, its copy-indexed tables) takes
/// exactly Algorithm 2's steps: the same loads to the bit and the same
/// transfers as [`plain_algorithm_2`], on random layers with copies
/// (some twice on one GPU), fewer sources than GPUs, both starts.
#[test]
fn the_rebalancer_is_algorithm_2() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (mut checked, mut moved, mut stuck_then_gave) = (0, 0, 0);
    for case in 0..600 {
        let d = rng.random_range(2..10);
        let e_n = rng.random_range(d..30);
        let gpus = random_slots(&mut rng, d, e_n, 5);
        let sources = rng.random_range(1..=d);
        let src: Vec<f64> = (0..sources * e_n)
            .map(|_| {
                let u: f64 = rng.random();
                if u < 0.3 {
                    0.0
                } else {
                    (u.powi(4) * 60.0).round()
                }
            })
            .collect();
        let start = RemoteStart::ALL[case % 2];
        let eps = f64::from(rng.random_range(0u32..10)) / 100.0;
        let layer = LayerPlacement {
            layer: 0,
            gpus: gpus.clone(),
        };
        let mut r = Rebalancer::new(&layer, e_n)
            .unwrap_or_else(|e| panic!("{e}"))
            .with_start(start);
        let max = r.solve(&src, eps).unwrap_or_else(|e| panic!("{e}"));
        let (loads, transfers) = plain_algorithm_2(&gpus, e_n, &src, eps, start);
        let msg =
            format!("case {case}: {d} GPUs, {e_n} experts, {sources} sources, {start:?}, ε {eps}");
        assert_eq!(r.gpu_loads(), loads.as_slice(), "{msg}");
        assert_eq!(r.transfers(), transfers, "{msg}");
        assert_eq!(max, loads.iter().copied().fold(0.0, f64::max), "{msg}");
        checked += 1;
        moved += transfers;
        stuck_then_gave += usize::from(transfers > d);
    }
    assert!(
        checked == 600 && moved > 1000 && stuck_then_gave > 20,
        "{checked} cases, {moved} transfers, {stuck_then_gave} cases with more transfers than GPUs"
    );
}

/// A remote start by its name in options and reports.
#[test]
fn remote_start_names() {
    assert_eq!(RemoteStart::default().name(), "even");
    assert_eq!(
        RemoteStart::from_name("primary").unwrap(),
        RemoteStart::Primary
    );
    assert!(RemoteStart::from_name("home").is_err());
}

/// The examples of items below the door, run as unit tests.
mod examples {
    #[test]
    fn rebalancer_with_start_example() {
        let run = || {
            use moeplan::LayerPlacement;
            use moeplan::judge::{Rebalancer, RemoteStart};
            // expert 0 on GPUs 0 and 1 (GPU 1 also holds expert 1); GPU 2 sends 8 pairs of expert 0
            let layer = LayerPlacement {
                layer: 0,
                gpus: vec![vec![0], vec![1, 0], vec![2]],
            };
            let src = [
                0.0, 0.0, 0.0, /* GPU 1 */ 0.0, 0.0, 0.0, /* GPU 2 */ 8.0, 0.0, 1.0,
            ];
            let mut even = Rebalancer::new(&layer, 3)?;
            even.solve(&src, 0.05)?;
            assert_eq!(even.gpu_loads(), &[4.0, 4.0, 1.0]); // half each, nothing above the mean of 3 can move
            let mut primary = Rebalancer::new(&layer, 3)?.with_start(RemoteStart::Primary);
            primary.solve(&src, 0.05)?;
            assert_eq!(primary.gpu_loads(), &[5.0, 3.0, 1.0]); // all on GPU 0, then 3 to GPU 1
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}

/// More examples once in the public items' docs.
mod more_examples {
    #[test]
    fn rebalance_rebalancer_example() {
        let run = || {
            use moeplan::LayerPlacement;
            use moeplan::judge::Rebalancer;
            // expert 0 on GPUs 0 and 1: GPU 2's 8 pairs of it start 4 and 4;
            // expert 1 only on GPU 0: GPU 1's 4 pairs of it go there
            let layer = LayerPlacement {
                layer: 0,
                gpus: vec![vec![0, 1], vec![2, 0], vec![3]],
            };
            let mut r = Rebalancer::new(&layer, 4)?;
            let src = [
                0.0, 0.0, 0.0, 0.0, /* GPU 1 */ 0.0, 4.0, 0.0, 0.0, /* GPU 2 */ 8.0, 0.0,
                0.0, 3.0,
            ];
            let max = r.solve(&src, 0.05)?;
            // GPU 0 starts at 8, the mean is 5: GPU 1 takes 1 of expert 0, up to the mean
            assert_eq!(r.gpu_loads(), &[7.0, 5.0, 3.0]);
            assert_eq!((max, r.initial_max(), r.transfers()), (7.0, 8.0, 1));
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn rebalancer_solve_example() {
        let run = || {
            use moeplan::{LayerPlacement, judge::Rebalancer};
            // no copies: nothing can move, the loads are where the tokens go
            let layer = LayerPlacement {
                layer: 0,
                gpus: vec![vec![0], vec![1]],
            };
            let mut r = Rebalancer::new(&layer, 2)?;
            assert_eq!(r.solve(&[3.0, 1.0, 3.0, 1.0], 0.0)?, 6.0);
            assert_eq!(r.transfers(), 0);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn rebalancer_route_one_example() {
        let run = || {
            use moeplan::{LayerPlacement, judge::Rebalancer};
            let layer = LayerPlacement {
                layer: 0,
                gpus: vec![vec![0], vec![1, 0], vec![2]],
            };
            let mut r =
                Rebalancer::new(&layer, 3)?.with_start(moeplan::judge::RemoteStart::Primary);
            let src = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0];
            r.solve(&src, 0.0)?;
            let mut to = Vec::new();
            r.route_one(2, 0, 6.0, |g, x| to.push((g, x)));
            assert_eq!(to, [(0, 4.0), (1, 2.0)]);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
