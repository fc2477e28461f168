//! What moving from the plan an engine serves to a new one costs, and the
//! new plan written onto the GPUs so that it moves the fewest bytes.
//!
//! **Migration.** Per layer, a GPU that must host an expert it does not
//! hold receives one copy of its weights: from a GPU of its own node when
//! one there holds it (NVLink / PCIe), else across nodes. Each copy has a
//! sender: of the GPUs holding the expert (on the receiver's node when one
//! there does), the one that has sent least so far, so an expert's
//! receivers are spread over its holders as vLLM spreads them
//! (`vllm/distributed/eplb/rebalance_execute.py`: `num_dst_per_sender`
//! receivers per rank holding it), and one holder feeding many new copies
//! sends them all. [`migration`] counts the copies per link kind and per GPU,
//! received and sent; [`Migration::time_us`] turns them into time on a
//! hardware (each GPU sends and receives over its links, each direction at
//! the link's rate; the slowest GPU, or node's NIC, sets the pause).
//!
//! **Relabelling** ([`relabel`]). A planner numbers its GPUs as it likes:
//! DeepSeek's EPLB may put an expert group on another node than last time
//! (deepseek-ai/EPLB issue #25, where a maintainer suggests permuting the
//! new plan to minimise the weights moved — an assignment problem). Per
//! layer, the new plan's nodes are matched to the current plan's nodes and,
//! inside each matched pair, its GPUs to GPUs, by minimum-cost assignment
//! (Kuhn–Munkres, the `pathfinding` crate): the cost of putting a new GPU's
//! experts on a current GPU is its copies, an inter-node copy weighted by
//! how much slower that link is ([`MoveCost`]). Only GPUs with the same
//! slot count in that layer are matched, so every GPU keeps the new plan's
//! memory. It minimises those weighted copies, not the pause: a report
//! gives both. Nodes stay whole and GPUs stay in their node's group, so every
//! (GPU, node) grouping of experts — hence balance under every rule and
//! the traffic — is the new plan's exactly. Within a GPU, an expert it
//! already holds keeps its slot. The two-level assignment is optimal among
//! such relabellings (tested against brute force); the identity is one of
//! them, so relabelling never moves more than the new plan as numbered.
//!
//! Complexity per layer: O(D · s) to build the costs for `D` GPUs of `s`
//! slots, O(N² · G³ + N³) for `N` nodes of `G` GPUs — checked against
//! `MAX_RELABEL_WORK` before any is done (one node of thousands of GPUs
//! would take hours).

use pathfinding::kuhn_munkres::kuhn_munkres_min;
use pathfinding::matrix::Matrix;
use serde::Serialize;

use crate::data::hardware::Hardware;
use crate::data::plan::{LayerPlacement, Plan};
use crate::error::{Error, Result};

/// What one copy costs in the assignment, per link kind (integers: the
/// assignment is exact on them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MoveCost {
    /// One copy from a GPU of the same node.
    pub intra: i64,
    /// One copy from another node.
    pub inter: i64,
}

impl MoveCost {
    /// An inter-node copy weighted by the intra-node link's bandwidth over
    /// the inter-node one's (at least 1), from `hardware`'s links.
    ///
    /// ```
    /// use moeplan::{data::hardware, judge::MoveCost};
    /// let c = MoveCost::for_hardware(hardware::preset("h100-ib-ndr")?);
    /// assert_eq!(c.intra, 1);
    /// assert!(c.inter > 1); // NVLink is faster than the NIC
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn for_hardware(hardware: &Hardware) -> MoveCost {
        let e = hardware.efficiency;
        let intra = hardware.intra_node.gb_per_s * e.intra_node;
        let inter = hardware.inter_node.gb_per_s * e.inter_node;
        let ratio = if inter > 0.0 { intra / inter } else { 1.0 };
        MoveCost {
            intra: 1,
            inter: (ratio.round() as i64).clamp(1, 1_000),
        }
    }
}

/// Expert copies a move from one plan to another makes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Migration {
    /// Copies a GPU receives from a GPU of its own node.
    pub copies_intra_node: usize,
    /// Copies a GPU receives from another node (no GPU of its node held
    /// the expert).
    pub copies_inter_node: usize,
    /// Layers in which some GPU receives a copy.
    pub layers_changed: usize,
    /// Per GPU, copies received from its own node, all layers.
    pub per_gpu_intra_node: Vec<usize>,
    /// Per GPU, copies received from other nodes, all layers.
    pub per_gpu_inter_node: Vec<usize>,
    /// Per GPU, copies sent to GPUs of its own node, all layers.
    pub per_gpu_sent_intra_node: Vec<usize>,
    /// Per GPU, copies sent to other nodes, all layers.
    pub per_gpu_sent_inter_node: Vec<usize>,
    /// GPUs per node (which GPUs share a NIC).
    pub gpus_per_node: usize,
}

impl Migration {
    /// Copies in all.
    pub fn copies(&self) -> usize {
        self.copies_intra_node + self.copies_inter_node
    }

    /// Bytes moved when one expert's weights are `expert_bytes`: `(intra-node,
    /// inter-node)`.
    pub fn bytes(&self, expert_bytes: f64) -> (f64, f64) {
        (
            self.copies_intra_node as f64 * expert_bytes,
            self.copies_inter_node as f64 * expert_bytes,
        )
    }

    /// The pause the move takes on `hardware`, µs: each GPU sends and
    /// receives its copies over its intra-node link and its share of the
    /// inter-node link (a NIC shared by the node: its GPUs' copies
    /// together) at the sustained bandwidths, each direction at the full
    /// rate (the links are full duplex), the two kinds in parallel; the
    /// busiest direction of the slowest GPU sets it — a sender feeding
    /// many new copies as much as a receiver. 0 when nothing moves.
    ///
    /// ```
    /// use moeplan::{data::hardware, judge::Migration};
    /// let m = Migration { copies_intra_node: 2, per_gpu_intra_node: vec![2, 0], per_gpu_inter_node: vec![0, 0], ..Default::default() };
    /// let h = hardware::preset("h100-ib-ndr")?;
    /// let us = m.time_us(h, 1e6);
    /// // 2 MB over NVLink at its sustained rate, and its latency
    /// let rate = h.intra_node.gb_per_s * 1e3 * h.efficiency.intra_node;
    /// assert!((us - 2e6 / rate - h.intra_node.latency_us).abs() < 1e-9);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn time_us(&self, hardware: &Hardware, expert_bytes: f64) -> f64 {
        let e = hardware.efficiency;
        let intra = hardware.intra_node.gb_per_s * 1e3 * e.intra_node;
        let inter = hardware.inter_node.gb_per_s * 1e3 * e.inter_node;
        let gpn = self.gpus_per_node.max(1);
        let at = |v: &[usize], g: usize| v.get(g).copied().unwrap_or(0);
        // A GPU's inter-node copies in one direction: its own, or its
        // node's when the node's GPUs share one NIC.
        let nic = |v: &[usize], g: usize| -> usize {
            if hardware.inter_node.shared_by_node {
                let start = g / gpn * gpn;
                (start..start + gpn).map(|h| at(v, h)).sum()
            } else {
                at(v, g)
            }
        };
        let gpus = self
            .per_gpu_intra_node
            .len()
            .max(self.per_gpu_sent_intra_node.len());
        let mut worst = 0.0f64;
        for g in 0..gpus {
            let a = at(&self.per_gpu_intra_node, g).max(at(&self.per_gpu_sent_intra_node, g));
            let x = nic(&self.per_gpu_inter_node, g).max(nic(&self.per_gpu_sent_inter_node, g));
            worst = worst
                .max(a as f64 * expert_bytes / intra)
                .max(x as f64 * expert_bytes / inter);
        }
        let latency = match (self.copies_intra_node, self.copies_inter_node) {
            (0, 0) => 0.0,
            (_, 0) => hardware.intra_node.latency_us,
            _ => hardware
                .intra_node
                .latency_us
                .max(hardware.inter_node.latency_us),
        };
        worst + latency
    }
}

/// The copies moving from `current` to `next` makes (same topology,
/// experts and layers, else an error).
///
/// ```
/// use moeplan::data::{LayerPlacement, Plan};
/// use moeplan::{judge::migration, Topology};
/// let topo = Topology::new(2, 1)?; // two nodes of one GPU
/// let a = Plan::new(topo, 2, vec![LayerPlacement { layer: 0, gpus: vec![vec![0], vec![1]] }], "x")?;
/// let b = Plan::new(topo, 2, vec![LayerPlacement { layer: 0, gpus: vec![vec![1], vec![0]] }], "x")?;
/// let m = migration(&a, &b)?;
/// assert_eq!((m.copies_intra_node, m.copies_inter_node), (0, 2));
/// assert_eq!(migration(&a, &a)?.copies(), 0);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn migration(current: &Plan, next: &Plan) -> Result<Migration> {
    check_alike(current, next)?;
    let topology = current.topology();
    let d = topology.num_gpus();
    let mut m = Migration {
        per_gpu_intra_node: vec![0; d],
        per_gpu_inter_node: vec![0; d],
        per_gpu_sent_intra_node: vec![0; d],
        per_gpu_sent_inter_node: vec![0; d],
        gpus_per_node: topology.gpus_per_node(),
        ..Migration::default()
    };
    let mut held = Held::new(current.num_experts(), topology);
    // The GPUs holding each expert in the current layer.
    let mut holders: Vec<Vec<usize>> = vec![Vec::new(); current.num_experts()];
    // Inter-node copies each node has sent (its NIC's load).
    let mut node_sent = vec![0usize; topology.nodes()];
    for (cur, new) in current.layers().iter().zip(next.layers()) {
        held.load(&cur.gpus);
        holders.iter_mut().for_each(Vec::clear);
        for (g, slots) in cur.gpus.iter().enumerate() {
            for e in distinct(slots) {
                if let Some(h) = holders.get_mut(e as usize) {
                    h.push(g);
                }
            }
        }
        let mut changed = false;
        for (g, slots) in new.gpus.iter().enumerate() {
            let node = topology.node_of(g);
            for e in distinct(slots) {
                let from = holders.get(e as usize).map_or(&[][..], Vec::as_slice);
                match held.source(e, g) {
                    Source::Here => {}
                    Source::Node => {
                        m.copies_intra_node += 1;
                        m.per_gpu_intra_node[g] += 1;
                        let sender = from
                            .iter()
                            .filter(|&&h| topology.node_of(h) == node)
                            .min_by_key(|&&h| (m.per_gpu_sent_intra_node[h], h));
                        if let Some(&h) = sender {
                            m.per_gpu_sent_intra_node[h] += 1;
                        }
                        changed = true;
                    }
                    Source::Elsewhere => {
                        m.copies_inter_node += 1;
                        m.per_gpu_inter_node[g] += 1;
                        let sender = from.iter().min_by_key(|&&h| {
                            (
                                node_sent[topology.node_of(h)],
                                m.per_gpu_sent_inter_node[h],
                                h,
                            )
                        });
                        if let Some(&h) = sender {
                            m.per_gpu_sent_inter_node[h] += 1;
                            node_sent[topology.node_of(h)] += 1;
                        }
                        changed = true;
                    }
                }
            }
        }
        m.layers_changed += usize::from(changed);
    }
    Ok(m)
}

/// `next` with its GPUs renumbered, per layer, so that moving to it from
/// `current` costs the least under `cost` (see the module documentation):
/// the same balance, traffic and slots per GPU as `next`.
///
/// ```
/// use moeplan::data::{LayerPlacement, Plan};
/// use moeplan::judge::{migration, relabel, MoveCost};
/// use moeplan::Topology;
/// let topo = Topology::new(2, 1)?;
/// let a = Plan::new(topo, 2, vec![LayerPlacement { layer: 0, gpus: vec![vec![0], vec![1]] }], "x")?;
/// let b = Plan::new(topo, 2, vec![LayerPlacement { layer: 0, gpus: vec![vec![1], vec![0]] }], "x")?;
/// let r = relabel(&a, &b, MoveCost { intra: 1, inter: 8 })?;
/// assert_eq!(migration(&a, &r)?.copies(), 0); // b is a with its nodes swapped
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn relabel(current: &Plan, next: &Plan, cost: MoveCost) -> Result<Plan> {
    check_alike(current, next)?;
    let topology = current.topology();
    let (n, g, d) = (
        topology.nodes() as u128,
        topology.gpus_per_node() as u128,
        topology.num_gpus() as u128,
    );
    let work = (d * d + n * n * g * g * g + n * n * n) * current.layers().len() as u128;
    if work > MAX_RELABEL_WORK {
        return Err(Error::Argument(format!(
            "relabelling {} layers on {topology} would take about {work:.2e} assignment steps, more than the {MAX_RELABEL_WORK:.1e} allowed (fewer GPUs per node keep it small)",
            current.layers().len()
        )));
    }
    let one = |held: &mut Held, cur: &LayerPlacement, new: &LayerPlacement| {
        held.load(&cur.gpus);
        let to = assign(held, &new.gpus, cost)?;
        let mut gpus = vec![Vec::new(); new.gpus.len()];
        for (h, &g) in to.iter().enumerate() {
            gpus[g] = keep_slots(&cur.gpus[g], &new.gpus[h]);
        }
        Ok(LayerPlacement {
            layer: new.layer,
            gpus,
        })
    };
    let pairs = current.layers().iter().zip(next.layers());
    // Each layer is matched alone: on every core with the `parallel`
    // feature (a serving replay relabels every re-plan).
    #[cfg(feature = "parallel")]
    let layers = {
        use rayon::prelude::*;
        pairs
            .collect::<Vec<_>>()
            .into_par_iter()
            .map_init(
                || Held::new(current.num_experts(), topology),
                |held, (cur, new)| one(held, cur, new),
            )
            .collect::<Result<Vec<_>>>()?
    };
    #[cfg(not(feature = "parallel"))]
    let layers = {
        let mut held = Held::new(current.num_experts(), topology);
        pairs
            .map(|(cur, new)| one(&mut held, cur, new))
            .collect::<Result<Vec<_>>>()?
    };
    Plan::new(topology, next.num_experts(), layers, next.algorithm())?
        .with_provenance(next.provenance().cloned())
        .with_profile(next.profile().map(|p| p.to_owned()))
}

/// Most assignment steps one [`relabel`] may take (D² + N²·G³ + N³ per
/// layer, summed over layers): 64 nodes of 8 GPUs over 61 layers take
/// 1.6e8, one node of 2,048 GPUs (8.6e9 for one layer) is refused.
pub(crate) const MAX_RELABEL_WORK: u128 = 1 << 32;

fn check_alike(current: &Plan, next: &Plan) -> Result<()> {
    let refuse = |what: String| Err(Error::Plan(format!("the current plan {what}")));
    if current.topology() != next.topology() {
        return refuse(format!(
            "is for {}, the new one for {}",
            current.topology(),
            next.topology()
        ));
    }
    if current.num_experts() != next.num_experts() {
        return refuse(format!(
            "has {} experts per layer, the new one {} (another model?)",
            current.num_experts(),
            next.num_experts()
        ));
    }
    let ids = |p: &Plan| p.layers().iter().map(|l| l.layer).collect::<Vec<_>>();
    if ids(current) != ids(next) {
        return refuse(format!(
            "has MoE layers {}, the new one {} (another model, or placed differently in it?)",
            span(&ids(current)),
            span(&ids(next))
        ));
    }
    Ok(())
}

fn span(ids: &[u32]) -> String {
    match (ids.first(), ids.last()) {
        (Some(a), Some(b)) => format!("{a}..={b} ({} layers)", ids.len()),
        _ => "none".into(),
    }
}

/// Where a GPU gets an expert from.
enum Source {
    Here,
    Node,
    Elsewhere,
}

/// Which GPUs and nodes hold each expert in the current layer.
struct Held {
    topology: crate::data::topology::Topology,
    experts: usize,
    on_gpu: Vec<bool>,
    on_node: Vec<bool>,
}

impl Held {
    fn new(experts: usize, topology: crate::data::topology::Topology) -> Held {
        Held {
            topology,
            experts,
            on_gpu: vec![false; topology.num_gpus() * experts],
            on_node: vec![false; topology.nodes() * experts],
        }
    }

    fn load(&mut self, gpus: &[Vec<u32>]) {
        self.on_gpu.fill(false);
        self.on_node.fill(false);
        for (g, slots) in gpus.iter().enumerate() {
            let n = self.topology.node_of(g);
            for &e in slots {
                let e = e as usize;
                if e < self.experts {
                    self.on_gpu[g * self.experts + e] = true;
                    self.on_node[n * self.experts + e] = true;
                }
            }
        }
    }

    fn source(&self, e: u32, g: usize) -> Source {
        let e = e as usize;
        let n = self.topology.node_of(g);
        if self
            .on_gpu
            .get(g * self.experts + e)
            .copied()
            .unwrap_or(false)
        {
            Source::Here
        } else if self
            .on_node
            .get(n * self.experts + e)
            .copied()
            .unwrap_or(false)
        {
            Source::Node
        } else {
            Source::Elsewhere
        }
    }

    /// What putting `slots` on current GPU `g` costs.
    fn cost(&self, slots: &[u32], g: usize, cost: MoveCost) -> i64 {
        distinct(slots)
            .map(|e| match self.source(e, g) {
                Source::Here => 0,
                Source::Node => cost.intra,
                Source::Elsewhere => cost.inter,
            })
            .sum()
    }
}

/// The experts of `slots` once each, in slot order.
fn distinct(slots: &[u32]) -> impl Iterator<Item = u32> + '_ {
    slots
        .iter()
        .enumerate()
        .filter(|(i, e)| !slots[..*i].contains(e))
        .map(|(_, &e)| e)
}

/// A pairing that must not be chosen: its slot counts differ. Far above
/// any real cost (at most D · slots · 1,000), far below overflow.
const FORBIDDEN: i64 = 1 << 40;

/// `to[h]`: the current GPU the new plan's GPU `h` goes to.
fn assign(held: &Held, new: &[Vec<u32>], cost: MoveCost) -> Result<Vec<usize>> {
    let t = held.topology;
    let (nodes, gpn) = (t.nodes(), t.gpus_per_node());
    if new.len() != t.num_gpus() {
        return Err(Error::Plan(
            "a layer does not have one entry per GPU".into(),
        ));
    }
    let pair = |h: usize, g: usize| {
        if new[h].len() == new[g].len() {
            held.cost(&new[h], g, cost)
        } else {
            FORBIDDEN
        }
    };
    // Inside every (new node a, current node b): the best GPU matching.
    let mut inner = vec![(0i64, Vec::new()); nodes * nodes];
    for a in 0..nodes {
        for b in 0..nodes {
            let weights: Vec<i64> = (0..gpn)
                .flat_map(|i| (0..gpn).map(move |j| (i, j)))
                .map(|(i, j)| pair(a * gpn + i, b * gpn + j))
                .collect();
            inner[a * nodes + b] = solve(gpn, weights)?;
        }
    }
    let outer: Vec<i64> = inner.iter().map(|(c, _)| *c).collect();
    let (_, node_to) = solve(nodes, outer)?;
    let mut to = vec![0; t.num_gpus()];
    for (a, &b) in node_to.iter().enumerate() {
        for (i, &j) in inner[a * nodes + b].1.iter().enumerate() {
            to[a * gpn + i] = b * gpn + j;
        }
    }
    Ok(to)
}

/// Experts a GPU hosts in `to` but not in `from`, summed over the GPUs of
/// one layer: the copies moving from `from` to `to` makes, without
/// [`migration`]'s split by link kind (the incremental re-plan's budget).
pub(crate) fn layer_copies(from: &[Vec<u32>], to: &[Vec<u32>]) -> usize {
    to.iter()
        .zip(from)
        .map(|(t, f)| distinct(t).filter(|e| !f.contains(e)).count())
        .sum()
}

/// Minimum-cost assignment of an `n × n` matrix (row-major).
fn solve(n: usize, weights: Vec<i64>) -> Result<(i64, Vec<usize>)> {
    if n == 0 {
        return Ok((0, Vec::new()));
    }
    let m = Matrix::from_vec(n, n, weights).map_err(|e| Error::Plan(format!("assignment: {e}")))?;
    Ok(kuhn_munkres_min(&m))
}

/// The new slots of a GPU with the experts it keeps in the slots they
/// occupy, the others in the freed ones in the new plan's order.
fn keep_slots(current: &[u32], new: &[u32]) -> Vec<u32> {
    let n = new.len();
    let mut left: Vec<u32> = new.to_vec();
    let mut out: Vec<Option<u32>> = vec![None; n];
    for (k, &e) in current.iter().enumerate().take(n) {
        if let Some(i) = left.iter().position(|&x| x == e) {
            out[k] = Some(left.remove(i));
        }
    }
    let mut rest = left.into_iter();
    out.into_iter()
        .map(|slot| slot.or_else(|| rest.next()).unwrap_or(0))
        .collect()
}

#[cfg(test)]
mod tests {
    /// One GPU holds the only copy of an expert that four GPUs of its node
    /// newly need: it sends four copies, and the pause is its four, not a
    /// receiver's one. Two holders split the four (two each), as vLLM
    /// splits an expert's receivers over the ranks holding it.
    #[test]
    fn one_holder_feeding_four_sets_the_pause() {
        use super::*;
        use crate::data::hardware;
        use crate::data::topology::Topology;
        let topo = Topology::new(1, 6).unwrap();
        let layer = |gpus: Vec<Vec<u32>>| LayerPlacement { layer: 0, gpus };
        // Experts 0..6, one a GPU; then GPUs 1..=4 each also host expert 0.
        let cur = Plan::new(topo, 6, vec![layer((0..6).map(|e| vec![e]).collect())], "a").unwrap();
        let mut gpus: Vec<Vec<u32>> = (0..6).map(|e| vec![e]).collect();
        for g in gpus.iter_mut().take(5).skip(1) {
            g.push(0);
        }
        let next = Plan::new(topo, 6, vec![layer(gpus)], "b").unwrap();
        let m = migration(&cur, &next).unwrap();
        assert_eq!(m.per_gpu_intra_node, [0, 1, 1, 1, 1, 0]);
        assert_eq!(m.per_gpu_sent_intra_node[0], 4, "{m:?}");
        let h = hardware::preset("h100-ib-ndr").unwrap();
        let rate = h.intra_node.gb_per_s * 1e3 * h.efficiency.intra_node;
        let one = 1e6 / rate;
        let pause = m.time_us(h, 1e6) - h.intra_node.latency_us;
        assert!(
            (pause - 4.0 * one).abs() < 1e-9,
            "{pause} µs, one copy {one} µs"
        );
        // receivers alone (the old model) would say one copy's time
        let receivers_only = Migration {
            per_gpu_sent_intra_node: Vec::new(),
            per_gpu_sent_inter_node: Vec::new(),
            ..m.clone()
        };
        let old = receivers_only.time_us(h, 1e6) - h.intra_node.latency_us;
        assert!((old - one).abs() < 1e-9);
        // A second holder of expert 0 (GPU 5) halves the fan-out.
        let mut two = cur.layers()[0].gpus.clone();
        two[5].push(0);
        let cur2 = Plan::new(topo, 6, vec![layer(two)], "c").unwrap();
        let m2 = migration(&cur2, &next).unwrap();
        assert_eq!(
            (m2.per_gpu_sent_intra_node[0], m2.per_gpu_sent_intra_node[5]),
            (2, 2),
            "{m2:?}"
        );
    }

    /// Across nodes the NIC a node's GPUs share sends for all of them: the
    /// holder's node sending to three nodes is the pause.
    #[test]
    fn a_nic_sending_to_many_nodes_sets_the_pause() {
        use super::*;
        use crate::data::hardware;
        use crate::data::topology::Topology;
        let topo = Topology::new(4, 1).unwrap();
        let layer = |gpus: Vec<Vec<u32>>| LayerPlacement { layer: 0, gpus };
        let cur = Plan::new(
            topo,
            4,
            vec![layer(vec![vec![0], vec![1], vec![2], vec![3]])],
            "a",
        )
        .unwrap();
        let next = Plan::new(
            topo,
            4,
            vec![layer(vec![vec![0, 1], vec![1, 0], vec![2, 0], vec![3, 0]])],
            "b",
        )
        .unwrap();
        let m = migration(&cur, &next).unwrap();
        assert_eq!(m.per_gpu_sent_inter_node, vec![3, 1, 0, 0], "{m:?}");
        let h = hardware::preset("h100-ib-ndr").unwrap();
        let rate = h.inter_node.gb_per_s * 1e3 * h.efficiency.inter_node;
        let pause = m.time_us(h, 1e6) - h.intra_node.latency_us.max(h.inter_node.latency_us);
        assert!((pause - 3e6 / rate).abs() < 1e-6, "{pause}");
    }
    use super::*;

    #[test]
    fn a_relabelling_too_large_is_refused_before_any_work() {
        let t = crate::data::topology::Topology::new(1, 2048).unwrap();
        let mut gpus = vec![Vec::new(); 2048];
        gpus[0].push(0);
        let p = Plan::new(t, 1, vec![LayerPlacement { layer: 0, gpus }], "x").unwrap();
        let e = relabel(&p, &p, MoveCost { intra: 1, inter: 1 }).unwrap_err();
        assert!(e.to_string().contains("more than the"), "{e}");
    }

    #[test]
    fn kept_experts_keep_their_slots() {
        assert_eq!(keep_slots(&[3, 1, 2], &[2, 5, 3]), vec![3, 5, 2]);
        assert_eq!(keep_slots(&[3, 1], &[1, 4, 3]), vec![3, 1, 4]);
        assert_eq!(keep_slots(&[3, 1, 2], &[2]), vec![2]);
        assert_eq!(keep_slots(&[], &[7, 7]), vec![7, 7]);
    }
}
