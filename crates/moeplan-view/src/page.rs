//! The page's form of a [`View`]: what the worker sends the page. A
//! view travels as a diff ([`Update`]): the worker remembers what it last
//! showed ([`Shown`]) and sends only what changed. A budget change alters
//! the budgeted plan's figures, the load map and the layer's placement,
//! never the trace's frame (layers, BASE, EPLB, the curve), so that is all
//! it carries; a layer change carries only the placement; a new trace or
//! cluster carries everything. Every numeric series travels as numbers
//! ([`Update::to_numbers`]), not JSON; the envelope that carries them is
//! the app's.

use moeplan::TraceStats;
use moeplan::judge::PairTraffic;
use moeplan::judge::cost::Prediction;
use moeplan::planners::CurvePoint;
use serde::{Deserialize, Serialize};

use crate::{PlannerNote, View};

/// The cross-workload matrix: rows are plans (made on one trace, or on
/// all), columns the traces they are judged on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossTable {
    /// The traces' names (columns), in the order loaded.
    pub traces: Vec<String>,
    /// Batches in each trace.
    pub batches: Vec<usize>,
    /// The cluster it was planned on (`1 node(s) × 64 GPU(s)`).
    pub cluster: String,
    /// The rows, in `moeplan::studies::cross_table`'s order.
    pub rows: Vec<CrossLine>,
}

/// One plan of the [`CrossTable`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossLine {
    /// Its name in reports (`CRAFT (R = 8) robust`).
    pub name: String,
    /// Registry id of its planner (`craft-robust` for the robust variant).
    pub planner: String,
    /// Index of the trace it was made on; `None`: all of them.
    pub made_on: Option<usize>,
    /// Replicas it holds.
    pub replicas: usize,
    /// Balancedness on each trace.
    pub balancedness: Vec<f64>,
    /// Whether each figure is in-sample (judged on data it was made on).
    pub in_sample: Vec<bool>,
}

/// The parts of [`TraceStats`] the page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceStatsLite {
    /// Where it came from (file name or generator settings).
    pub source: String,
    /// Model name, when known.
    pub model: Option<String>,
    /// Batches.
    pub batches: usize,
    /// MoE layers.
    pub layers: usize,
    /// Experts per layer.
    pub experts: usize,
    /// Top-k, when known.
    pub top_k: Option<usize>,
    /// Hottest expert / mean per layer.
    pub max_over_mean: Vec<f64>,
}

impl TraceStatsLite {
    /// Summarises full statistics.
    pub fn from_stats(source: String, s: &TraceStats) -> Self {
        TraceStatsLite {
            source,
            model: s.model.clone(),
            batches: s.batches,
            layers: s.layers.len(),
            experts: s.experts,
            top_k: s.top_k,
            max_over_mean: s.layers.iter().map(|l| l.max_over_mean).collect(),
        }
    }
}

/// What changed in the figures since the worker's previous answer; a part
/// left `None` (or a plan not listed) is as it was. With a `frame`, every
/// part is present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Update {
    /// What only a new trace or cluster changes.
    pub frame: Option<Frame>,
    /// The plans whose figures changed (all of them with a `frame`).
    pub plans: Vec<Figures>,
    /// CRAFT's replication factor used.
    pub replicas_per_gpu: usize,
    /// The dispatch rule the plans' figures are measured under.
    #[serde(default)]
    pub rule: String,
    /// CRAFT's load map, when it changed.
    pub heat: Option<Heat>,
    /// The chosen layer under CRAFT, when it changed.
    pub placement: Option<PlacedLayer>,
    /// The chosen layer as GRACE grouped it by affinity, when it changed;
    /// with a `frame`, `None` means the trace has no token routes.
    #[serde(default)]
    pub grouping: Option<Grouping>,
}

/// One layer as GRACE grouped it: its `(S(r), U(r))` curve with the chosen
/// `r`, and its affinity matrix with the experts in group order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Grouping {
    /// The model's layer id.
    pub layer: u32,
    /// The `r` chosen (`None`: grouped by load only).
    pub ratio: Option<f64>,
    /// `(r, S(r), U(r))`, ascending `r`.
    pub curve: Vec<(f64, f64, f64)>,
    /// The experts in drawing order: GPU 0's group, then GPU 1's, ….
    pub order: Vec<u32>,
    /// Each GPU's group size, in that order.
    pub sizes: Vec<usize>,
    /// `A[order[i]][order[j]]` row-major, relative to the largest entry
    /// (travels as numbers).
    #[serde(skip)]
    pub affinity: Vec<f64>,
}

/// The figures that only a new trace or cluster changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    /// The cluster, in words (`8 node(s) × 8 GPU(s)`).
    pub topology: String,
    /// The MoE layers' model ids.
    pub layer_ids: Vec<u32>,
    /// Batches replayed.
    pub batches: usize,
    /// The plans shown, by name, in order (`base`, `eplb`, `craft`).
    pub plans: Vec<String>,
    /// Why a planner is missing.
    pub notes: Vec<String>,
    /// What the planners shown say beside their plans (GRACE with counts
    /// only: grouped by load), in their order.
    #[serde(default)]
    pub planner_notes: Vec<PlannerNote>,
    /// The plan the budget moves and the curve, load map and layer view
    /// are of, by name (`craft`: the workspace's focus).
    #[serde(default)]
    pub focus: String,
    /// CRAFT's automatic choice of R.
    pub auto_replicas_per_gpu: usize,
    /// The model every figure is judged on (the page's ask, else the
    /// trace's, else DeepSeek-V3): its experts price replica memory.
    #[serde(default)]
    pub model: String,
    /// CRAFT's balancedness-vs-R curve.
    pub curve: Vec<CurvePoint>,
}

/// One plan's summary row and per-layer series.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// The planner's id: `base`, `eplb`, `craft`, ….
    pub name: String,
    /// Its title with its budget, from the registry: `BASE`, `EPLB +64`,
    /// `CRAFT R = 8`.
    #[serde(default)]
    pub label: String,
    /// Mean over batches, then layers, of mean / max GPU load.
    pub balancedness: f64,
    /// Mean of max / mean GPU load.
    pub imbalance_ratio: f64,
    /// Replicas in all.
    pub replicas: usize,
    /// Replica slots on the fullest GPU (its replica memory in experts).
    pub replica_slots_per_gpu: usize,
    /// Upper bound for these replica counts.
    pub bound: f64,
    /// The dispatch rule these figures are measured under.
    #[serde(default)]
    pub rule: String,
    /// Shares of the (token, expert) pairs served on their source GPU, on
    /// another GPU of its node, and on another node (they sum to 1).
    #[serde(default)]
    pub traffic: [f64; 3],
    /// Cross-node dispatch bytes over all batches, in GB (10⁹ bytes).
    #[serde(default)]
    pub cross_node_gb: f64,
    /// Per-layer balancedness (travels as numbers).
    #[serde(skip)]
    pub per_layer: Vec<f64>,
    /// Replicas in each layer (travels as numbers).
    #[serde(skip)]
    pub replicas_per_layer: Vec<usize>,
    /// Imbalance ratio of each batch (travels as numbers).
    #[serde(skip)]
    pub per_batch_imbalance: Vec<f64>,
    /// Expert bytes a per-batch planner copies in each batch; empty for a
    /// static plan (travels as numbers).
    #[serde(skip)]
    pub per_batch_bytes: Vec<f64>,
    /// How a per-batch planner serves (`per batch, libra-rebalance, …`);
    /// `None` for a static plan.
    #[serde(default)]
    pub schedule: Option<String>,
    /// Time and memory on the request's hardware; `None` unpriced.
    #[serde(default)]
    pub predicted: Option<Predicted>,
}

/// What the page shows of a plan's prediction
/// (`moeplan::judge::cost::Prediction`, its few scalars).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    /// The hardware preset.
    pub hardware: String,
    /// One step, ms.
    pub step_ms: f64,
    /// Served tokens per second.
    pub tokens_per_s: f64,
    /// Throughput over BASE's.
    pub speedup: Option<f64>,
    /// Where its time goes against BASE: the largest term that makes it
    /// win or lose (`Prediction::reason`).
    #[serde(default)]
    pub reason: Option<String>,
    /// Mean MoE layer time and its terms, µs.
    pub moe_layer_us: f64,
    /// Expert compute per MoE layer, µs.
    pub compute_us: f64,
    /// Dispatch per MoE layer, µs.
    pub dispatch_us: f64,
    /// Combine per MoE layer, µs.
    pub combine_us: f64,
    /// The dense part of a step, µs.
    pub dense_us: f64,
    /// Copies not hidden, per step, µs.
    pub copy_exposed_us: f64,
    /// MoE layers in a step.
    pub moe_layers: usize,
    /// KV cache per GPU, GiB.
    pub kv_cache_gib_per_gpu: f64,
    /// How far to trust it, one sentence (the hardware's calibration, or
    /// the model's error where an uncalibrated preset was checked).
    pub error_band: String,
}

/// CRAFT's load per GPU and layer, relative to the layer's mean GPU load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Heat {
    /// Layers (rows).
    pub layers: usize,
    /// GPUs (columns).
    pub gpus: usize,
    /// `values[layer * gpus + gpu]` (travels as numbers).
    #[serde(skip)]
    pub values: Vec<f64>,
}

impl Heat {
    /// From `rows[layer][gpu]`; `None` if the rows differ in length.
    ///
    /// ```
    /// use moeplan_view::page::Heat;
    /// let h = Heat::from_rows(&[vec![1.0, 2.0], vec![3.0, 4.0]]).unwrap();
    /// assert_eq!((h.layers, h.gpus, h.get(1, 0)), (2, 2, Some(3.0)));
    /// assert!(Heat::from_rows(&[vec![1.0], vec![]]).is_none());
    /// ```
    pub fn from_rows(rows: &[Vec<f64>]) -> Option<Heat> {
        let gpus = rows.first().map_or(0, Vec::len);
        rows.iter().all(|r| r.len() == gpus).then(|| Heat {
            layers: rows.len(),
            gpus,
            values: rows.concat(),
        })
    }

    /// The value of one cell.
    pub fn get(&self, layer: usize, gpu: usize) -> Option<f64> {
        if gpu >= self.gpus {
            return None;
        }
        self.values.get(layer * self.gpus + gpu).copied()
    }
}

/// One hosted expert in a placement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    /// The expert.
    pub expert: u32,
    /// Copies of that expert in the layer.
    pub copies: u32,
    /// Share of the layer's tokens this copy receives.
    pub share: f64,
}

/// One layer under CRAFT: every GPU's experts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlacedLayer {
    /// The model's layer id.
    pub layer: u32,
    /// Per GPU, its slots (travels as numbers).
    #[serde(skip)]
    pub gpus: Vec<Vec<Slot>>,
}

/// Reads the numbers of a message in the order they were written.
struct Numbers<'a>(&'a [f64]);

impl<'a> Numbers<'a> {
    fn next(&mut self) -> Result<f64, String> {
        let (&x, rest) = self.0.split_first().ok_or("a view's numbers end early")?;
        self.0 = rest;
        Ok(x)
    }

    fn count(&mut self) -> Result<usize, String> {
        let x = self.next()?;
        if x.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&x) {
            Ok(x as usize)
        } else {
            Err(format!("{x} is not a count"))
        }
    }

    /// A length-prefixed run.
    fn run(&mut self) -> Result<&'a [f64], String> {
        let n = self.count()?;
        if n > self.0.len() {
            return Err("a view's numbers end early".into());
        }
        let (run, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(run)
    }
}

fn put_run(w: &mut Vec<f64>, xs: impl ExactSizeIterator<Item = f64>) {
    w.push(xs.len() as f64);
    w.extend(xs);
}

fn counts(xs: &[f64]) -> Result<Vec<usize>, String> {
    let mut r = Numbers(xs);
    (0..xs.len()).map(|_| r.count()).collect()
}

impl Update {
    /// Its series as numbers, in a fixed order: each plan's per-layer
    /// balancedness, replicas per layer, per-batch imbalance and bytes,
    /// then the load map, the placement and the affinity map (those
    /// present), each run prefixed by its length.
    pub fn to_numbers(&self) -> Vec<f64> {
        let mut w = Vec::new();
        self.put(&mut w);
        w
    }

    /// Puts back the series [`Update::to_numbers`] wrote into the update
    /// read without them; every number must be used.
    pub fn take_numbers(&mut self, numbers: &[f64]) -> Result<(), String> {
        let mut reader = Numbers(numbers);
        self.take(&mut reader)?;
        if !reader.0.is_empty() {
            return Err(format!("{} numbers left over in a view", reader.0.len()));
        }
        Ok(())
    }

    fn put(&self, w: &mut Vec<f64>) {
        for p in &self.plans {
            put_run(w, p.per_layer.iter().copied());
            put_run(w, p.replicas_per_layer.iter().map(|&x| x as f64));
            put_run(w, p.per_batch_imbalance.iter().copied());
            put_run(w, p.per_batch_bytes.iter().copied());
        }
        if let Some(h) = &self.heat {
            put_run(w, h.values.iter().copied());
        }
        if let Some(p) = &self.placement {
            w.push(p.gpus.len() as f64);
            for g in &p.gpus {
                w.push(g.len() as f64);
                for s in g {
                    w.extend([s.expert as f64, s.copies as f64, s.share]);
                }
            }
        }
        if let Some(g) = &self.grouping {
            put_run(w, g.affinity.iter().copied());
        }
    }

    fn take(&mut self, r: &mut Numbers) -> Result<(), String> {
        for p in &mut self.plans {
            p.per_layer = r.run()?.to_vec();
            p.replicas_per_layer = counts(r.run()?)?;
            p.per_batch_imbalance = r.run()?.to_vec();
            p.per_batch_bytes = r.run()?.to_vec();
        }
        if let Some(h) = &mut self.heat {
            h.values = r.run()?.to_vec();
            if h.values.len() != h.layers * h.gpus {
                return Err(format!(
                    "a load map of {} × {} with {} values",
                    h.layers,
                    h.gpus,
                    h.values.len()
                ));
            }
        }
        if let Some(p) = &mut self.placement {
            let gpus = r.count()?;
            p.gpus = Vec::with_capacity(gpus.min(r.0.len()));
            for _ in 0..gpus {
                let n = r.count()?;
                let mut g = Vec::with_capacity(n.min(r.0.len()));
                for _ in 0..n {
                    let expert = r.count()? as u32;
                    let copies = r.count()? as u32;
                    g.push(Slot {
                        expert,
                        copies,
                        share: r.next()?,
                    });
                }
                p.gpus.push(g);
            }
        }
        if let Some(g) = &mut self.grouping {
            g.affinity = r.run()?.to_vec();
            let n = g.order.len();
            if g.affinity.len() != n * n || g.sizes.iter().sum::<usize>() != n {
                return Err(format!(
                    "an affinity map of {n} experts in groups of {} with {} values",
                    g.sizes.iter().sum::<usize>(),
                    g.affinity.len()
                ));
            }
        }
        Ok(())
    }
}

/// Every figure of one view, in the page's form ([`Update`] with every part).
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    /// What only a new trace or cluster changes.
    pub frame: Frame,
    /// Every plan's figures, in the frame's order.
    pub plans: Vec<Figures>,
    /// CRAFT's R.
    pub replicas_per_gpu: usize,
    /// The dispatch rule of the plans' figures.
    pub rule: String,
    /// CRAFT's load map.
    pub heat: Heat,
    /// The chosen layer under CRAFT.
    pub placement: PlacedLayer,
    /// The chosen layer as GRACE grouped it (token routes only).
    pub grouping: Option<Grouping>,
}

impl Shown {
    /// The page's form of a core [`View`].
    pub fn of(v: &View) -> Result<Shown, String> {
        Ok(Shown {
            frame: Frame {
                topology: v.topology.to_string(),
                layer_ids: v.layer_ids.clone(),
                batches: v.batches,
                plans: v.plans.iter().map(|p| p.name.clone()).collect(),
                notes: v.notes.clone(),
                planner_notes: v.planner_notes.clone(),
                focus: v.focus.clone(),
                auto_replicas_per_gpu: v.auto_replicas_per_gpu,
                model: v.model.clone(),
                curve: v
                    .curve
                    .iter()
                    .map(|p| CurvePoint {
                        replicas_per_gpu: p.replicas_per_gpu,
                        replicas: p.replicas,
                        predicted_balancedness: p.predicted_balancedness,
                        bound: p.bound,
                    })
                    .collect(),
            },
            plans: v
                .plans
                .iter()
                .map(|p| Figures {
                    name: p.name.clone(),
                    label: p.label.clone(),
                    balancedness: p.balancedness,
                    imbalance_ratio: p.imbalance_ratio,
                    replicas: p.replicas,
                    replica_slots_per_gpu: p.replica_slots_per_gpu,
                    bound: p.bound,
                    rule: p.own_rule.clone().unwrap_or_else(|| v.rule.clone()),
                    traffic: shares(&p.traffic),
                    cross_node_gb: p.traffic.cross_node_bytes / 1e9,
                    per_layer: p.per_layer.clone(),
                    replicas_per_layer: p.replicas_per_layer.clone(),
                    per_batch_imbalance: p.per_batch_imbalance.clone(),
                    per_batch_bytes: p.per_batch_bytes.clone(),
                    schedule: p.schedule.clone(),
                    predicted: p.predicted.as_ref().map(predicted),
                })
                .collect(),
            replicas_per_gpu: v.replicas_per_gpu,
            rule: v.rule.clone(),
            heat: Heat::from_rows(&v.heat).ok_or("the load map's layers differ in GPUs")?,
            placement: PlacedLayer {
                layer: v.layer.layer,
                gpus: v
                    .layer
                    .gpus
                    .iter()
                    .map(|g| {
                        g.iter()
                            .map(|&(expert, copies, share)| Slot {
                                expert,
                                copies,
                                share,
                            })
                            .collect()
                    })
                    .collect(),
            },
            grouping: v.grouping.as_ref().map(|g| Grouping {
                layer: g.layer,
                ratio: g.ratio,
                curve: g
                    .curve
                    .iter()
                    .map(|p| (p.ratio, p.size_deviation, p.utilisation))
                    .collect(),
                order: g.order.clone(),
                sizes: g.sizes.clone(),
                affinity: g.affinity.clone(),
            }),
        })
    }

    /// What the page, showing `before` (or nothing), needs to show `self`.
    ///
    /// ```
    /// use moeplan_view::page::Shown;
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let a = Shown::of(&ws.view(Some(2), 0)?)?;
    /// let b = Shown::of(&ws.view(Some(4), 0)?)?;
    /// let full = a.update_from(None);
    /// assert!(full.frame.is_some() && full.plans.len() == a.plans.len() && full.heat.is_some());
    /// let budget = b.update_from(Some(&a));
    /// assert!(budget.frame.is_none() && budget.heat.is_some());
    /// let names: Vec<_> = budget.plans.iter().map(|p| p.name.as_str()).collect();
    /// assert_eq!(names, ["craft"]); // BASE and EPLB stay as they are
    /// assert_eq!(b.update_from(Some(&b)).plans.len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update_from(&self, before: Option<&Shown>) -> Update {
        let before = before.filter(|b| b.frame == self.frame);
        let changed = |old: Option<&Figures>, new: &Figures| old != Some(new);
        Update {
            frame: before.is_none().then(|| self.frame.clone()),
            plans: self
                .plans
                .iter()
                .filter(|p| {
                    changed(
                        before.and_then(|b| b.plans.iter().find(|o| o.name == p.name)),
                        p,
                    )
                })
                .cloned()
                .collect(),
            replicas_per_gpu: self.replicas_per_gpu,
            rule: self.rule.clone(),
            heat: (before.map(|b| &b.heat) != Some(&self.heat)).then(|| self.heat.clone()),
            placement: (before.map(|b| &b.placement) != Some(&self.placement))
                .then(|| self.placement.clone()),
            grouping: match before {
                Some(b) if b.grouping == self.grouping => None,
                _ => self.grouping.clone(),
            },
        }
    }
}

/// The page's few scalars of a core prediction.
fn predicted(p: &Prediction) -> Predicted {
    Predicted {
        hardware: p.hardware.clone(),
        step_ms: p.step_ms,
        tokens_per_s: p.tokens_per_s,
        speedup: p.speedup,
        reason: p.reason.clone(),
        moe_layer_us: p.moe_layer_us,
        compute_us: p.compute_us,
        dispatch_us: p.dispatch_us,
        combine_us: p.combine_us,
        dense_us: p.dense_us,
        copy_exposed_us: p.copy_exposed_us,
        moe_layers: p.moe_layers,
        kv_cache_gib_per_gpu: p.kv_cache_gib_per_gpu,
        error_band: p.error_band.about.clone(),
    }
}

/// Local, intra-node and cross-node shares of a plan's pairs (zeros when
/// it serves none).
fn shares(t: &PairTraffic) -> [f64; 3] {
    let parts = [t.local, t.intra_node, t.cross_node];
    let sum: f64 = parts.iter().sum();
    if sum > 0.0 {
        parts.map(|x| x / sum)
    } else {
        [0.0; 3]
    }
}
