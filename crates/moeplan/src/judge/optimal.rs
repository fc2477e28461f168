//! The best any dispatch can do for a placement: per batch and layer, the
//! split of each expert's tokens over its copies that minimises the busiest
//! GPU's load.
//!
//! Source: the design's `Optimal` rule (DeepSeek's LPLB and SGLang's `lp`
//! dispatch solve this per batch as a linear program). The optimum has a
//! closed form (Hall's theorem for the fractional transportation problem):
//! `T* = max over expert sets A of w(A) / |N(A)|`, with `w` the tokens and
//! `N(A)` the GPUs hosting a copy of some expert in `A`. It is computed
//! exactly by Dinkelbach's iteration on a max-flow: source → expert
//! (capacity `n_e`) → hosting GPU (unbounded) → sink (capacity `T`). If the
//! flow saturates, `T` is feasible; otherwise the experts still reachable
//! from the source form the set `A` of a minimum cut, and
//! `T ← w(A) / |N(A)|` rises strictly. Every `T` tried is some set's ratio,
//! so the last is `T*` itself (up to rounding), not an ε-approximation.
//! Experts whose copies all sit on one GPU are folded into that GPU's
//! fixed base load first, so only replicated experts enter the flow, and
//! raising `T` keeps the current flow (only sink capacities grow).
//!
//! Cost: per batch and layer, a few Dinic max-flows on `2 + R + D` nodes
//! for `R` replicated experts, O(slots) edges; Dinkelbach needs a handful
//! of rounds in practice.

#[cfg(test)]
use crate::data::plan::LayerPlacement;
#[cfg(test)]
use crate::error::{Error, Result};
#[cfg(test)]
use serde::Serialize;

use super::slots::SlotTable;

const SRC: usize = 0;
const SNK: usize = 1;
/// No flow problem here needs more Dinkelbach rounds; a cap keeps a
/// pathological float case from looping.
const MAX_ROUNDS: usize = 256;

/// The min-max split of one layer's tokens over its copies.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg(test)]
pub(crate) struct OptimalSplit {
    /// The busiest GPU's load under the split, `T*`: no dispatch rule can
    /// do better with this placement.
    pub max_load: f64,
    /// Load of every GPU under the split.
    pub gpu_loads: Vec<f64>,
    /// (expert, GPU, tokens) for every expert with tokens, GPUs ascending.
    pub assignment: Vec<(u32, u32, f64)>,
}

/// The split of `counts[e]` (tokens of logical expert `e` in one layer)
/// over the copies of `layer` that minimises the busiest GPU.
#[cfg(test)]
pub(crate) fn optimal_split(layer: &LayerPlacement, counts: &[f64]) -> Result<OptimalSplit> {
    let e_n = counts.len();
    if let Some((e, v)) = counts
        .iter()
        .enumerate()
        .find(|(_, v)| !v.is_finite() || **v < 0.0)
    {
        return Err(Error::Argument(format!(
            "count {v} of expert {e}: counts must be finite and non-negative"
        )));
    }
    if let Some(&bad) = layer.gpus.iter().flatten().find(|&&x| x as usize >= e_n) {
        return Err(Error::Plan(format!(
            "layer {}: expert {bad} is out of range (0..{e_n})",
            layer.layer
        )));
    }
    let mut view = SlotTable::default();
    view.prepare(layer, e_n);
    if let Some(e) = (0..e_n).find(|&e| counts[e] > 0.0 && view.copies(e).is_empty()) {
        return Err(Error::Plan(format!(
            "layer {}: expert {e} has tokens but no copy",
            layer.layer
        )));
    }
    let mut solver = MinMax::default();
    solver.prepare(&view);
    let max_load = solver.solve(counts);
    let mut assignment = Vec::new();
    for e in 0..e_n {
        if counts[e] > 0.0 {
            solver.targets(e, counts, |g, x| assignment.push((e as u32, g as u32, x)));
        }
    }
    Ok(OptimalSplit {
        max_load,
        gpu_loads: solver.loads.clone(),
        assignment,
    })
}

#[derive(Debug, Clone, Copy)]
struct Edge {
    to: u32,
    rev: u32,
    cap: f64,
}

/// The solver, reused across batches: its graph is built once per layer,
/// its capacities reset per batch, and nothing is allocated per solve.
#[derive(Debug, Default)]
pub(crate) struct MinMax {
    d: usize,
    /// Per expert: its GPU when every copy is on one GPU, else `NONE`.
    fixed: Vec<u32>,
    /// Per expert: its index among the replicated experts, else `NONE`.
    flex_index: Vec<u32>,
    /// GPUs holding at least one slot.
    hosting: usize,
    flex: Vec<u32>,
    edges: Vec<Edge>,
    adj_start: Vec<usize>,
    adj: Vec<u32>,
    /// Edge index of source → flex expert `i`, and of GPU `g` → sink.
    src_edge: Vec<u32>,
    snk_edge: Vec<u32>,
    /// For flex expert `i`, its expert → GPU edges are
    /// `mid_start[i] .. mid_start[i + 1]` in `mid_edge`, GPUs ascending.
    mid_start: Vec<usize>,
    mid_edge: Vec<u32>,
    base: Vec<f64>,
    level: Vec<i32>,
    iter: Vec<usize>,
    queue: Vec<u32>,
    path: Vec<u32>,
    eps: f64,
    /// GPU loads of the last solve.
    pub loads: Vec<f64>,
}

const NONE: u32 = u32::MAX;

impl MinMax {
    pub(crate) fn prepare(&mut self, view: &SlotTable) {
        let d = view.num_gpus();
        let e_n = view.copy_start.len().saturating_sub(1);
        self.d = d;
        self.fixed.clear();
        self.flex_index.clear();
        self.flex.clear();
        self.hosting = (0..d)
            .filter(|&g| view.gpu_start[g + 1] > view.gpu_start[g])
            .count();
        for e in 0..e_n {
            let cand = view.copies(e);
            let first = cand.first().map(|&c| view.slot_gpu[c as usize]);
            let one_gpu = cand
                .iter()
                .all(|&c| Some(view.slot_gpu[c as usize]) == first);
            if one_gpu {
                self.fixed.push(first.unwrap_or(NONE));
                self.flex_index.push(NONE);
            } else {
                self.fixed.push(NONE);
                self.flex_index.push(self.flex.len() as u32);
                self.flex.push(e as u32);
            }
        }
        let f = self.flex.len();
        let gpu_node = |g: usize| 2 + f + g;
        let n_nodes = 2 + f + d;
        // Edges as (from, to) pairs; the reverse of edge 2i is 2i + 1.
        let mut from: Vec<u32> = Vec::new();
        self.edges.clear();
        let mut add = |edges: &mut Vec<Edge>, a: usize, b: usize| -> u32 {
            let i = edges.len() as u32;
            edges.push(Edge {
                to: b as u32,
                rev: i + 1,
                cap: 0.0,
            });
            edges.push(Edge {
                to: a as u32,
                rev: i,
                cap: 0.0,
            });
            from.push(a as u32);
            from.push(b as u32);
            i
        };
        self.src_edge.clear();
        self.mid_start.clear();
        self.mid_edge.clear();
        self.mid_start.push(0);
        for (i, &e) in self.flex.iter().enumerate() {
            let ei = add(&mut self.edges, SRC, 2 + i);
            self.src_edge.push(ei);
            let mut last = NONE;
            for &c in view.copies(e as usize) {
                let g = view.slot_gpu[c as usize];
                // copies are in slot order, so GPUs ascend: skip repeats
                if g != last {
                    let mi = add(&mut self.edges, 2 + i, gpu_node(g as usize));
                    self.mid_edge.push(mi);
                    last = g;
                }
            }
            self.mid_start.push(self.mid_edge.len());
        }
        self.snk_edge.clear();
        for g in 0..d {
            let si = add(&mut self.edges, gpu_node(g), SNK);
            self.snk_edge.push(si);
        }
        self.adj_start.clear();
        self.adj_start.resize(n_nodes + 1, 0);
        for &a in &from {
            self.adj_start[a as usize + 1] += 1;
        }
        for v in 0..n_nodes {
            self.adj_start[v + 1] += self.adj_start[v];
        }
        self.adj.clear();
        self.adj.resize(from.len(), 0);
        let mut next: Vec<usize> = self.adj_start[..n_nodes].to_vec();
        for (i, &a) in from.iter().enumerate() {
            self.adj[next[a as usize]] = i as u32;
            next[a as usize] += 1;
        }
        self.level.resize(n_nodes, -1);
        self.iter.resize(n_nodes, 0);
        self.base.resize(d, 0.0);
        self.loads.resize(d, 0.0);
    }

    /// Solves one row of expert counts; returns `T*` and leaves the GPU
    /// loads in `self.loads` and the split in the flow.
    pub(crate) fn solve(&mut self, row: &[f64]) -> f64 {
        let d = self.d;
        self.base.iter_mut().for_each(|x| *x = 0.0);
        let mut total = 0.0;
        for (e, &n) in row.iter().enumerate() {
            total += n;
            if let Some(&g) = self.fixed.get(e) {
                if g != NONE {
                    self.base[g as usize] += n;
                }
            }
        }
        for e in &mut self.edges {
            e.cap = 0.0;
        }
        if total <= 0.0 {
            self.loads.iter_mut().for_each(|x| *x = 0.0);
            return 0.0;
        }
        self.eps = total * 1e-13;
        let mut need = 0.0;
        for (i, &e) in self.flex.iter().enumerate() {
            let n = row[e as usize];
            need += n;
            self.edges[self.src_edge[i] as usize].cap = n;
        }
        for i in 0..self.mid_edge.len() {
            self.edges[self.mid_edge[i] as usize].cap = f64::INFINITY;
        }
        // Lower bounds that are set ratios: one GPU's fixed load, and all
        // tokens over the GPUs that host anything.
        let hosting = self.hosting.max(1);
        let mut t = self
            .base
            .iter()
            .copied()
            .fold(total / hosting as f64, f64::max);
        for g in 0..d {
            self.edges[self.snk_edge[g] as usize].cap = t - self.base[g];
        }
        let mut flow = 0.0;
        for _ in 0..MAX_ROUNDS {
            flow += self.max_flow();
            if flow >= need - total * 1e-12 {
                break;
            }
            // The last BFS left `level ≥ 0` exactly on the source side of a
            // minimum cut.
            let f = self.flex.len();
            let (mut w, mut gpus) = (0.0, 0usize);
            for (i, &e) in self.flex.iter().enumerate() {
                if self.level[2 + i] >= 0 {
                    w += row[e as usize];
                }
            }
            for g in 0..d {
                if self.level[2 + f + g] >= 0 {
                    w += self.base[g];
                    gpus += 1;
                }
            }
            if gpus == 0 {
                break;
            }
            let ratio = w / gpus as f64;
            if ratio <= t {
                break; // what is left is rounding
            }
            for g in 0..d {
                self.edges[self.snk_edge[g] as usize].cap += ratio - t;
            }
            t = ratio;
        }
        for g in 0..d {
            self.loads[g] = self.base[g];
        }
        for &mi in &self.mid_edge {
            let edge = self.edges[mi as usize];
            let into = self.edges[edge.rev as usize].cap;
            if let Some(l) = self.loads.get_mut(edge.to as usize - 2 - self.flex.len()) {
                *l += into;
            }
        }
        t
    }

    /// Calls `f(gpu, tokens)` for each GPU serving expert `e` in the last
    /// solve, GPUs ascending.
    pub(crate) fn targets(&self, e: usize, row: &[f64], mut f: impl FnMut(usize, f64)) {
        let fixed = self.fixed.get(e).copied().unwrap_or(NONE);
        let flex = self.flex_index.get(e).copied().unwrap_or(NONE);
        if fixed != NONE {
            f(fixed as usize, row[e]);
        } else if flex != NONE {
            let i = flex as usize;
            let off = 2 + self.flex.len();
            for &mi in &self.mid_edge[self.mid_start[i]..self.mid_start[i + 1]] {
                let edge = self.edges[mi as usize];
                let x = self.edges[edge.rev as usize].cap;
                if x > 0.0 {
                    f(edge.to as usize - off, x);
                }
            }
        }
    }

    /// Dinic: augments the current flow to a maximum one; returns what it
    /// added. Leaves `level` as the last BFS set it (the residual
    /// reachability from the source).
    fn max_flow(&mut self) -> f64 {
        let mut added = 0.0;
        while self.bfs() {
            for v in 0..self.iter.len() {
                self.iter[v] = self.adj_start[v];
            }
            loop {
                let f = self.augment();
                if f <= 0.0 {
                    break;
                }
                added += f;
            }
        }
        added
    }

    fn bfs(&mut self) -> bool {
        self.level.iter_mut().for_each(|l| *l = -1);
        self.queue.clear();
        self.level[SRC] = 0;
        self.queue.push(SRC as u32);
        let mut head = 0;
        while let Some(&u) = self.queue.get(head) {
            head += 1;
            let u = u as usize;
            for k in self.adj_start[u]..self.adj_start[u + 1] {
                let e = self.edges[self.adj[k] as usize];
                let v = e.to as usize;
                if e.cap > self.eps && self.level[v] < 0 {
                    self.level[v] = self.level[u] + 1;
                    self.queue.push(v as u32);
                }
            }
        }
        self.level[SNK] >= 0
    }

    /// One augmenting path in the level graph, found without recursion;
    /// returns the amount pushed (0 when none is left in this phase).
    fn augment(&mut self) -> f64 {
        self.path.clear();
        let mut u = SRC;
        loop {
            if u == SNK {
                let f = self
                    .path
                    .iter()
                    .map(|&e| self.edges[e as usize].cap)
                    .fold(f64::INFINITY, f64::min);
                for &e in &self.path {
                    let rev = self.edges[e as usize].rev as usize;
                    self.edges[e as usize].cap -= f;
                    self.edges[rev].cap += f;
                }
                return f;
            }
            let mut advanced = false;
            while self.iter[u] < self.adj_start[u + 1] {
                let ei = self.adj[self.iter[u]];
                let e = self.edges[ei as usize];
                let v = e.to as usize;
                if e.cap > self.eps && self.level[v] == self.level[u] + 1 {
                    self.path.push(ei);
                    u = v;
                    advanced = true;
                    break;
                }
                self.iter[u] += 1;
            }
            if !advanced {
                // a dead end: never visit it again in this phase
                self.level[u] = -1;
                let Some(ei) = self.path.pop() else {
                    return 0.0;
                };
                let back = self.edges[ei as usize].rev as usize;
                u = self.edges[back].to as usize;
                self.iter[u] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// max over expert sets of w(A) / |N(A)|, by enumeration.
    fn brute(layer: &LayerPlacement, counts: &[f64]) -> f64 {
        let e_n = counts.len();
        let mut best = 0.0f64;
        for mask in 1u32..(1 << e_n) {
            let mut w = 0.0;
            let mut gpus = vec![false; layer.gpus.len()];
            for (e, &n) in counts.iter().enumerate() {
                if mask & (1 << e) != 0 {
                    w += n;
                    for (g, s) in layer.gpus.iter().enumerate() {
                        if s.contains(&(e as u32)) {
                            gpus[g] = true;
                        }
                    }
                }
            }
            let n = gpus.iter().filter(|&&x| x).count();
            if n > 0 {
                best = best.max(w / n as f64);
            }
        }
        best
    }

    #[test]
    fn matches_enumeration_on_hand_cases() {
        let cases: Vec<(Vec<Vec<u32>>, Vec<f64>)> = vec![
            (vec![vec![0], vec![0, 1]], vec![6.0, 2.0]),
            (
                vec![vec![0, 1], vec![1, 2], vec![2, 0]],
                vec![9.0, 0.0, 3.0],
            ),
            (vec![vec![0, 0], vec![1], vec![2, 1]], vec![5.0, 7.0, 1.0]),
            (
                vec![vec![0, 1, 2], vec![3], vec![3], vec![3]],
                vec![1.0, 1.0, 1.0, 30.0],
            ),
            (vec![vec![0], vec![1], vec![]], vec![4.0, 2.0]),
        ];
        for (gpus, counts) in cases {
            let layer = LayerPlacement { layer: 0, gpus };
            let s = optimal_split(&layer, &counts).unwrap();
            let b = brute(&layer, &counts);
            assert!(
                (s.max_load - b).abs() <= 1e-9 * b.max(1.0),
                "{layer:?} {counts:?}: {} vs {b}",
                s.max_load
            );
            let sum: f64 = s.gpu_loads.iter().sum();
            assert!((sum - counts.iter().sum::<f64>()).abs() < 1e-9);
            assert!(s.gpu_loads.iter().all(|&l| l <= s.max_load * (1.0 + 1e-12)));
        }
    }

    #[test]
    fn zero_tokens_is_zero() {
        let layer = LayerPlacement {
            layer: 0,
            gpus: vec![vec![0, 1], vec![1]],
        };
        let s = optimal_split(&layer, &[0.0, 0.0]).unwrap();
        assert_eq!((s.max_load, s.gpu_loads), (0.0, vec![0.0, 0.0]));
    }

    #[test]
    fn rejects_bad_input() {
        let layer = LayerPlacement {
            layer: 0,
            gpus: vec![vec![0], vec![0]],
        };
        assert!(optimal_split(&layer, &[1.0, 1.0]).is_err()); // expert 1 has no copy
        assert!(optimal_split(&layer, &[f64::NAN]).is_err());
        assert!(optimal_split(&layer, &[]).is_err()); // expert 0 out of range
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn optimal_optimal_split_example() {
        let run = || {
            use moeplan::LayerPlacement;
            use moeplan::judge::optimal_split;
            // expert 0 (6 tokens) on GPUs 0 and 1, expert 1 (2 tokens) on GPU 1 only
            let layer = LayerPlacement {
                layer: 0,
                gpus: vec![vec![0], vec![0, 1]],
            };
            let s = optimal_split(&layer, &[6.0, 2.0])?;
            assert_eq!(s.max_load, 4.0); // GPU 0 takes 4 of expert 0; GPU 1 takes 2 + 2
            assert_eq!(s.gpu_loads, vec![4.0, 4.0]);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
