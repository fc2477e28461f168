//! Capacity-aware placement: given each expert's copy count and each GPU's
//! slot count, which GPU hosts which copy.
//!
//! - [`capacity_aware_placement`] — the CRAFT paper's Step 5 (§4.2,
//!   appendix A, after Algorithm 3): copies in descending load-per-copy
//!   order, each to the least-loaded GPU with a free slot that does not hold
//!   that expert yet. O(S log D) with a heap for `S` slots on `D` GPUs, plus
//!   O(D · S) in the rare case every open GPU already holds the expert.
//! - [`refine_placement`] — beyond the paper: swaps between the busiest GPU
//!   and a lighter one while that lowers the maximum. At most `4 · D` swaps,
//!   O(swaps · S).
//!
//! Shared by the planners that decide copy counts first and placement second
//! (CRAFT today). Slot counts are never changed, so memory stays as assigned.

use std::collections::BinaryHeap;

use crate::error::{Error, Result};

const NAME: &str = "placement";

/// Step 5: places `copies[e]` copies of every expert onto GPUs with
/// `capacity[g]` slots each: copies in descending load-per-copy order, each
/// to the least-loaded GPU that has a free slot and does not hold that expert
/// yet (more free slots, then lower id, on ties). Returns the experts of
/// every GPU.
///
/// ```
/// use moeplan::planners::capacity_aware_placement;
/// let gpus = capacity_aware_placement(&[8.0, 3.0, 2.0, 1.0], &[2, 1, 1, 1], &[3, 2])?;
/// assert_eq!(gpus, vec![vec![0, 1, 3], vec![0, 2]]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn capacity_aware_placement(
    loads: &[f64],
    copies: &[u32],
    capacity: &[usize],
) -> Result<Vec<Vec<u32>>> {
    let d = capacity.len();
    let slots: usize = copies.iter().map(|&c| c as usize).sum();
    if loads.len() != copies.len() {
        return Err(Error::planner(NAME, "one copy count per expert is needed"));
    }
    if slots != capacity.iter().sum::<usize>() {
        return Err(Error::planner(
            NAME,
            format!(
                "{slots} copies for {} slots",
                capacity.iter().sum::<usize>()
            ),
        ));
    }
    if let Some(e) = copies.iter().position(|&c| c == 0 || c as usize > d) {
        return Err(Error::planner(
            NAME,
            format!("expert {e} has {} copies for {d} GPUs", copies[e]),
        ));
    }
    let mut items: Vec<(f64, u32)> = Vec::with_capacity(slots);
    for (e, (&w, &c)) in loads.iter().zip(copies).enumerate() {
        let share = w / c as f64;
        items.extend(std::iter::repeat_n((share, e as u32), c as usize));
    }
    // Heaviest first; copies of one expert stay adjacent (ties by id).
    crate::sort::sort_by(&mut items, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut gpus: Vec<Vec<u32>> = capacity.iter().map(|&c| Vec::with_capacity(c)).collect();
    let mut load = vec![0.0f64; d];
    // Min-heap of GPUs with a free slot, by (load, more free slots, id).
    let mut open: BinaryHeap<Open> = (0..d)
        .filter(|&g| capacity[g] > 0)
        .map(|g| Open {
            load: 0.0,
            free: capacity[g],
            gpu: g,
        })
        .collect();
    let mut skipped: Vec<Open> = Vec::new();
    let mut holding: Vec<usize> = Vec::new(); // GPUs holding the current expert
    let mut current = u32::MAX;
    for &(share, e) in &items {
        if e != current {
            current = e;
            holding.clear();
        }
        // Pop past the (few) GPUs that already hold this expert.
        let mut chosen = None;
        while let Some(top) = open.pop() {
            if holding.contains(&top.gpu) {
                skipped.push(top);
            } else {
                chosen = Some(top);
                break;
            }
        }
        open.extend(skipped.drain(..));
        let g = match chosen {
            Some(mut top) => {
                let g = top.gpu;
                top.load += share;
                top.free -= 1;
                if top.free > 0 {
                    open.push(top);
                }
                g
            }
            None => {
                let g = make_room(&mut gpus, &mut load, loads, copies, capacity, e, &holding)?;
                // The moved expert changed two GPUs' loads: rebuild the heap.
                gpus[g].push(e);
                load[g] += share;
                holding.push(g);
                open = (0..d)
                    .filter(|&x| gpus[x].len() < capacity[x])
                    .map(|x| Open {
                        load: load[x],
                        free: capacity[x] - gpus[x].len(),
                        gpu: x,
                    })
                    .collect();
                continue;
            }
        };
        gpus[g].push(e);
        load[g] += share;
        holding.push(g);
    }
    Ok(gpus)
}

/// A GPU with a free slot, ordered so the max-heap pops the least-loaded
/// (then the one with more free slots, then the lowest id) first.
#[derive(PartialEq)]
struct Open {
    load: f64,
    free: usize,
    gpu: usize,
}

impl Eq for Open {}
impl PartialOrd for Open {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Open {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .load
            .total_cmp(&self.load)
            .then(self.free.cmp(&other.free))
            .then(other.gpu.cmp(&self.gpu))
    }
}

/// Beyond the paper: local search on a placement. While some swap of a copy
/// on the busiest GPU with a lighter copy elsewhere lowers the busiest GPU's
/// load (without putting two copies of an expert on one GPU), take the best
/// such swap. Slot counts never change, so memory stays as assigned. At most
/// `4 · D` swaps; O(swaps · S) for `S` slots.
///
/// ```
/// use moeplan::planners::refine_placement;
/// // greedy-looking start: GPU 0 has 5 + 4, GPU 1 has 3 + 3
/// let mut gpus = vec![vec![0, 1], vec![2, 3]];
/// refine_placement(&[5.0, 4.0, 3.0, 3.0], &[1, 1, 1, 1], &mut gpus);
/// assert_eq!(gpus, vec![vec![2, 1], vec![0, 3]]); // 7 / 8 instead of 9 / 6
/// ```
pub fn refine_placement(loads: &[f64], copies: &[u32], gpus: &mut [Vec<u32>]) {
    let d = gpus.len();
    let share = |e: u32| loads[e as usize] / copies[e as usize] as f64;
    let mut load: Vec<f64> = gpus
        .iter()
        .map(|g| g.iter().map(|&e| share(e)).sum())
        .collect();
    let mut by_load: Vec<usize> = (0..d).collect();
    // Swaps that gain less than 0.1 % of the mean GPU load change
    // balancedness by less than 0.001: not worth their time.
    let min_gain = 1e-3 * load.iter().sum::<f64>() / d.max(1) as f64;
    crate::sort::sort_by(&mut by_load, |&x, &y| load[x].total_cmp(&load[y]));
    for _ in 0..4 * d {
        let Some(&a) = by_load.last() else { return };
        let la = load[a];
        // The lightest partner that admits an improving swap, and its best
        // swap: the pair whose new maximum is lowest.
        let mut found = None;
        for &b in &by_load[..d - 1] {
            let lb = load[b];
            let mut best: Option<(f64, usize, usize)> = None;
            for (i, &x) in gpus[a].iter().enumerate() {
                let sx = share(x);
                for (j, &y) in gpus[b].iter().enumerate() {
                    let sy = share(y);
                    let pair_max = (la - sx + sy).max(lb - sy + sx);
                    // arithmetic first; the duplicate checks only for a winner
                    if sy < sx
                        && pair_max < la - min_gain
                        && best.is_none_or(|(m, ..)| pair_max < m)
                        && !gpus[b].contains(&x)
                        && !gpus[a].contains(&y)
                    {
                        best = Some((pair_max, i, j));
                    }
                }
            }
            if let Some((_, i, j)) = best {
                found = Some((b, i, j));
                break;
            }
        }
        let Some((b, i, j)) = found else { return };
        let (x, y) = (gpus[a][i], gpus[b][j]);
        gpus[a][i] = y;
        gpus[b][j] = x;
        load[a] += share(y) - share(x);
        load[b] += share(x) - share(y);
        // keep `by_load` sorted: only a and b moved
        by_load.retain(|&g| g != a && g != b);
        for g in [a, b] {
            let pos = by_load.partition_point(|&h| load[h] < load[g]);
            by_load.insert(pos, g);
        }
    }
}

/// Moves a placement onto GPUs with the given slot counts: the `i`-th GPU
/// with `n` slots in `placed` becomes the `i`-th GPU with `n` slots in
/// `capacity`.
pub(crate) fn relabel(placed: &[Vec<u32>], capacity: &[usize]) -> Result<Vec<Vec<u32>>> {
    let mut out = vec![Vec::new(); capacity.len()];
    let mut targets: Vec<usize> = (0..capacity.len()).collect();
    crate::sort::sort_by_key(&mut targets, |&g| capacity[g]);
    let mut sources: Vec<usize> = (0..placed.len()).collect();
    crate::sort::sort_by_key(&mut sources, |&g| placed[g].len());
    if placed.len() != capacity.len()
        || sources
            .iter()
            .zip(&targets)
            .any(|(&s, &t)| placed[s].len() != capacity[t])
    {
        return Err(Error::planner(
            NAME,
            "slot counts of a stored placement do not match",
        ));
    }
    for (&s, &t) in sources.iter().zip(&targets) {
        out[t] = placed[s].clone();
    }
    Ok(out)
}

/// Every GPU with a free slot already holds expert `e`: move some expert `x`
/// from a full GPU `h` (that lacks `e`) to a free GPU `f` (that lacks `x`),
/// and return `h` for `e`. Only reachable with very few slots per GPU.
fn make_room(
    gpus: &mut [Vec<u32>],
    load: &mut [f64],
    loads: &[f64],
    copies: &[u32],
    capacity: &[usize],
    e: u32,
    holding: &[usize],
) -> Result<usize> {
    let d = gpus.len();
    for f in (0..d).filter(|&f| gpus[f].len() < capacity[f]) {
        for h in (0..d).filter(|h| !holding.contains(h) && !gpus[*h].contains(&e)) {
            if let Some(pos) = gpus[h].iter().position(|x| !gpus[f].contains(x)) {
                let x = gpus[h].remove(pos);
                let share = loads[x as usize] / copies[x as usize] as f64;
                load[h] -= share;
                load[f] += share;
                gpus[f].push(x);
                return Ok(h);
            }
        }
    }
    Err(Error::planner(
        NAME,
        format!("no GPU can take another copy of expert {e}"),
    ))
}

/// The busiest GPU's load with each expert's load split evenly over its
/// copies.
///
/// ```
/// use moeplan::planners::peak_load;
/// assert_eq!(peak_load(&[4.0, 1.0], &[vec![0, 1], vec![0]]), 3.0);
/// ```
pub fn peak_load(loads: &[f64], gpus: &[Vec<u32>]) -> f64 {
    let mut copies = vec![0usize; loads.len()];
    for &x in gpus.iter().flatten() {
        if let Some(c) = copies.get_mut(x as usize) {
            *c += 1;
        }
    }
    gpus.iter()
        .map(|s| {
            s.iter()
                .filter_map(|&x| {
                    let c = *copies.get(x as usize)?;
                    Some(loads.get(x as usize)? / c.max(1) as f64)
                })
                .sum::<f64>()
        })
        .fold(0.0, f64::max)
}
