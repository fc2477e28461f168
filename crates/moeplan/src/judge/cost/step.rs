//! One step's time (a batch's MoE layer on every GPU): the slowest GPU's
//! expert compute by its rows, and the dispatch and combine all-to-alls by
//! the bytes each GPU sends and receives ([`Timer`]), from the layer's
//! compute model ([`LayerCompute`]).

use super::*;

/// The busiest GPU's expert compute for one batch of one layer, µs — the
/// compute term of the cost model under the `even` rule (each expert's
/// rows split evenly over its copies) without a memory cap: what a
/// planner that plans for time (CRAFT's `objective = time`) compares
/// placements by. Scratch reused across calls.
#[derive(Debug, Default)]
pub(crate) struct LayerCompute {
    blend: Blend,
    copies: Vec<u32>,
}

impl LayerCompute {
    /// The busiest GPU's compute when `gpus[g]` lists the experts on GPU
    /// `g` and `rows[e]` are expert `e`'s rows in the batch.
    pub(crate) fn busiest_us(&mut self, t: &TimeCost, gpus: &[Vec<u32>], rows: &[f64]) -> f64 {
        self.mean_busiest_us(t, gpus, [rows])
    }

    /// [`LayerCompute::busiest_us`] averaged over `batches` (each expert's
    /// rows in one batch), the placement's copies counted once.
    pub(crate) fn mean_busiest_us<'a>(
        &mut self,
        t: &TimeCost,
        gpus: &[Vec<u32>],
        batches: impl IntoIterator<Item = &'a [f64]>,
    ) -> f64 {
        self.blend.prepare(t.roofline_p);
        let experts = gpus.iter().flatten().max().map_or(0, |&e| e as usize + 1);
        self.copies.clear();
        self.copies.resize(experts, 0);
        for &e in gpus.iter().flatten() {
            self.copies[e as usize] += 1;
        }
        let (mut sum, mut n) = (0.0, 0usize);
        for rows in batches {
            sum += self.busiest(t, gpus, rows);
            n += 1;
        }
        sum / n.max(1) as f64
    }

    fn busiest(&self, t: &TimeCost, gpus: &[Vec<u32>], rows: &[f64]) -> f64 {
        let mut busiest = 0.0f64;
        for slots in gpus {
            let mut us = 0.0;
            for &e in slots {
                let e = e as usize;
                let copies = self.copies.get(e).copied().unwrap_or(1).max(1);
                let r = rows.get(e).copied().unwrap_or(0.0) / f64::from(copies);
                if r > 0.0 {
                    us += self.blend.of(t.weight_read_us, r * t.row_us);
                }
            }
            if us > 0.0 {
                us += t.moe_fixed_us;
            }
            busiest = busiest.max(us);
        }
        busiest
    }
}

/// One (batch, layer)'s time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct StepTime {
    pub compute_us: f64,
    pub dispatch_us: f64,
    pub combine_us: f64,
    /// The fixed parts of the three (paid by each micro-batch in full).
    pub fixed_us: [f64; 3],
}

impl StepTime {
    /// The layer's time: the three in sequence, or under two-batch
    /// overlap (`tbo`) two micro-batches of half the variable work each,
    /// one's dispatch and combine under the other's compute — `d + max(c,
    /// d) + max(c, k) + k` — when that is the shorter.
    pub(crate) fn layer_us(&self, tbo: bool) -> f64 {
        let one = self.compute_us + self.dispatch_us + self.combine_us;
        if !tbo {
            return one;
        }
        let half = |x: f64, f: f64| (x - f).max(0.0) / 2.0 + f;
        let c = half(self.compute_us, self.fixed_us[0]);
        let d = half(self.dispatch_us, self.fixed_us[1]);
        let k = half(self.combine_us, self.fixed_us[2]);
        (d + c.max(d) + c.max(k) + k).min(one)
    }
}

/// Scratch for the per-step timing, reused across steps.
#[derive(Debug, Default)]
pub(crate) struct Timer {
    node_load: Vec<f64>,
    node_in: Vec<f64>,
    node_out: Vec<f64>,
    blend: Blend,
}

/// `(w^p + g^p)^(1/p)` without two `powf` per copy (they made a timed
/// replay 12× slower than the replay): with `u = g / (w + g)` it is `(w +
/// g) · G(u)`, `G(u) = ((1 − u)^p + u^p)^(1/p)`, smooth on [0, 1],
/// tabulated once per `p` and read with linear interpolation (relative
/// error below 1e-6 at 1,024 steps).
#[derive(Debug, Default)]
pub(super) struct Blend {
    p: f64,
    table: Vec<f64>,
}

impl Blend {
    const STEPS: usize = 1024;

    fn prepare(&mut self, p: f64) {
        if self.p == p && !self.table.is_empty() {
            return;
        }
        // One table per `p` and thread, kept: a replay of one batch (the
        // page's, per budget change) would otherwise spend a fifth of its
        // time building it.
        thread_local! {
            static KEPT: std::cell::RefCell<Option<(f64, Vec<f64>)>> =
                const { std::cell::RefCell::new(None) };
        }
        let kept = KEPT.with(|k| {
            k.borrow()
                .as_ref()
                .filter(|(q, _)| *q == p)
                .map(|(_, t)| t.clone())
        });
        self.p = p;
        self.table = kept.unwrap_or_else(|| {
            let t: Vec<f64> = (0..=Self::STEPS)
                .map(|i| {
                    let u = i as f64 / Self::STEPS as f64;
                    ((1.0 - u).powf(p) + u.powf(p)).powf(1.0 / p)
                })
                .collect();
            KEPT.with(|k| *k.borrow_mut() = Some((p, t.clone())));
            t
        });
    }

    #[inline]
    fn of(&self, w: f64, g: f64) -> f64 {
        let sum = w + g;
        if sum <= 0.0 {
            return 0.0;
        }
        let pos = g / sum * Self::STEPS as f64;
        let i = (pos as usize).min(Self::STEPS - 1);
        let frac = pos - i as f64;
        match (self.table.get(i), self.table.get(i + 1)) {
            (Some(a), Some(b)) => sum * (a + (b - a) * frac),
            _ => w.max(g),
        }
    }
}

impl Timer {
    /// Times one (batch, layer): `view` the layer's slots, `row` its expert
    /// loads, `loads` the GPU loads the rule gave, `tally` its traffic,
    /// `messages` its token messages when counted, `share` the part of the
    /// batch served.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn step(
        &mut self,
        t: &TimeCost,
        topology: Topology,
        view: &SlotTable,
        row: &[f64],
        loads: &[f64],
        tally: &Tally,
        messages: Option<&Messages>,
        share: f64,
    ) -> StepTime {
        let d = topology.num_gpus();
        let gpn = topology.gpus_per_node().max(1);
        self.blend.prepare(t.roofline_p);
        // Compute: each copy's even share scaled to the GPU's load.
        let mut compute = 0.0f64;
        for (g, &load) in loads.iter().enumerate().take(d) {
            if load <= 0.0 {
                continue;
            }
            let range = view.gpu_start[g]..view.gpu_start[g + 1];
            let even: f64 = view.slot_expert[range.clone()]
                .iter()
                .zip(&view.slot_share[range.clone()])
                .map(|(&e, &s)| row[e as usize] * s)
                .sum();
            let blend = &self.blend;
            let copy = |r: f64| blend.of(t.weight_read_us, r * t.row_us);
            let mut us = 0.0;
            if even > 0.0 {
                let scale = load * share / even;
                for (&e, &s) in view.slot_expert[range.clone()]
                    .iter()
                    .zip(&view.slot_share[range])
                {
                    let r = row[e as usize] * s * scale;
                    if r > 0.0 {
                        us += copy(r);
                    }
                }
            } else {
                // Rows the even split would not give (a rule's own
                // choice): one copy's worth.
                us = copy(load * share);
            }
            if us > 0.0 {
                us += t.moe_fixed_us;
            }
            compute = compute.max(us);
        }
        // Distinct messages per remote pair, inside a node and across.
        let total: f64 = row.iter().sum();
        let (msg_gpu, msg_node) = match messages {
            _ if t.low_latency_us.is_some() => (1.0, 1.0),
            Some(m) => {
                let remote = tally.intra + tally.cross;
                (ratio(m.cross_gpu, remote), ratio(m.cross_node, tally.cross))
            }
            None => self.expected_messages(t.top_k, topology, loads, total),
        };
        // Each link's busiest side in pair-messages per µs of one byte:
        // dispatch and combine differ only in bytes per message.
        let cross_share = if tally.cross > 0.0 {
            ratio(tally.cross, tally.intra + tally.cross)
        } else {
            0.0
        };
        let nodes = topology.nodes();
        self.node_in.clear();
        self.node_in.resize(nodes, 0.0);
        self.node_out.clear();
        self.node_out.resize(nodes, 0.0);
        let (mut worst, mut intra_used, mut inter_used) = (0.0f64, false, false);
        for g in 0..d.min(tally.ingress.len()) {
            let (ing, eg) = (tally.ingress[g], tally.egress[g]);
            // Per GPU where the replay sent pairs one by one, else the
            // layer's cross-node share (exact for ingress under the even
            // closed form).
            let (ing_x, eg_x) = if tally.by_pair {
                (tally.ingress_cross[g], tally.egress_cross[g])
            } else {
                (ing * cross_share, eg * cross_share)
            };
            let intra = (ing - ing_x).max(eg - eg_x).max(0.0) * msg_gpu;
            let inter = ing_x.max(eg_x) * msg_node;
            intra_used |= intra > 0.0;
            inter_used |= inter > 0.0;
            worst = worst.max(intra / t.intra_bytes_per_us);
            if t.inter_shared {
                // One NIC per node: the node's GPUs share it.
                self.node_in[g / gpn] += ing_x * msg_node;
                self.node_out[g / gpn] += eg_x * msg_node;
            } else {
                worst = worst.max(inter / t.inter_bytes_per_us);
            }
        }
        if t.inter_shared {
            for (i, o) in self.node_in.iter().zip(&self.node_out) {
                worst = worst.max(i.max(*o) / t.inter_bytes_per_us);
            }
        }
        let fixed = match t.low_latency_us {
            Some(overhead) if worst > 0.0 => overhead,
            _ => {
                let mut l = 0.0f64;
                if intra_used {
                    l = l.max(t.intra_latency_us);
                }
                if inter_used {
                    l = l.max(t.inter_latency_us);
                }
                l
            }
        };
        let (dispatch_fixed, combine_fixed) = match t.phase_fixed_us {
            Some([d, c]) if worst > 0.0 => (d, c),
            Some(_) => (0.0, 0.0),
            None => (fixed, fixed),
        };
        let link = |bytes_per_message: f64, fixed: f64| worst * share * bytes_per_message + fixed;
        StepTime {
            compute_us: compute,
            dispatch_us: link(t.dispatch_bytes, dispatch_fixed),
            combine_us: link(t.combine_bytes, combine_fixed),
            fixed_us: [
                if compute > 0.0 { t.moe_fixed_us } else { 0.0 },
                dispatch_fixed,
                combine_fixed,
            ],
        }
    }

    /// Distinct destinations per remote pair when `top_k` pairs of a token
    /// land independently with the GPUs' (nodes') shares of the load.
    fn expected_messages(
        &mut self,
        top_k: usize,
        topology: Topology,
        loads: &[f64],
        total: f64,
    ) -> (f64, f64) {
        if total <= 0.0 {
            return (1.0, 1.0);
        }
        let k = top_k as i32;
        let gpn = topology.gpus_per_node().max(1);
        let distinct = |p: f64| 1.0 - (1.0 - p).powi(k);
        let gpus: f64 = loads.iter().map(|&x| distinct(x / total)).sum();
        self.node_load.clear();
        self.node_load.resize(topology.nodes(), 0.0);
        for (g, &x) in loads.iter().enumerate() {
            if let Some(n) = self.node_load.get_mut(g / gpn) {
                *n += x;
            }
        }
        let nodes: f64 = self.node_load.iter().map(|&x| distinct(x / total)).sum();
        let k = top_k as f64;
        ((gpus / k).min(1.0), (nodes / k).min(1.0))
    }
}

pub(super) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { (a / b).min(1.0) } else { 1.0 }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn layercompute_busiest_us_example() {
        let run = || {
            use moeplan::{
                data::{hardware, model},
                judge::cost::{Assumptions, LayerCompute, TimeCost, copy_us},
            };
            let t = TimeCost::new(
                hardware::preset("h100-ib-ndr")?,
                model::preset("deepseek-v3")?,
                &Assumptions::default(),
            );
            let mut c = LayerCompute::default();
            // expert 0 (800 rows) on both GPUs: 400 rows a copy beside expert 1
            // or 2, and the grouped GEMM's fixed time once
            let us = c.busiest_us(&t, &[vec![0, 1], vec![0, 2]], &[800.0, 100.0, 10.0]);
            assert!(
                (us - t.moe_fixed_us - copy_us(&t, 400.0) - copy_us(&t, 100.0)).abs() < 1e-3 * us
            );
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
