//! Serving with re-planning on the workspace's trace, as the page draws it
//! (the CLI's `moeplan replay`, `moeplan::studies::serving`): EPLB with the
//! workspace's expert groups re-planned every `K` batches on the last `W`,
//! each new plan relabelled onto the served one's GPUs, beside the first
//! plan kept. With a sweep, the same over every interval of
//! [`sweep_intervals`]. With an engine (`ServingAsk::engine`), `K` and `W`
//! are in its forward passes, refused as it refuses them, re-planned with
//! its move and transfer, and the answer carries its flags
//! ([`moeplan::studies::engines`], what `moeplan replay --engine` reads).
//! One replay costs a plan per re-plan and two replays of the served
//! batches; the sweep about the sum over its intervals.

use serde::{Deserialize, Serialize};

use moeplan::error::{Error, Result};
use moeplan::judge::Rule;
use moeplan::judge::cost::Pricing;
use moeplan::planners::{self, GROUPS};
use moeplan::planners::{Settings, Value};
use moeplan::studies::{ENGINES, Engine, tokens_per_batch};
use moeplan::studies::{Migrate, Serving, ServingReport, Transfer, serve};

use crate::Workspace;

/// What a replay is asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServingAsk {
    /// Re-plan every this many batches (`K`), or forward passes with an
    /// engine.
    pub every: usize,
    /// On the last this many batches (`W`), or forward passes with an
    /// engine; the first plan is made on the first `W`.
    pub window: usize,
    /// Also the curve over [`sweep_intervals`].
    pub sweep: bool,
    /// The engine whose knobs `K` and `W` are (`--engine`'s names); none:
    /// trace batches and moeplan's relabelled move.
    #[serde(default)]
    pub engine: Option<String>,
    /// With an engine, the tokens one forward pass serves over the cluster
    /// (none: a pass is a trace batch).
    #[serde(default)]
    pub tokens_per_pass: Option<usize>,
}

/// An engine's knobs as the replay ran them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineKnobs {
    /// The engine, as printed.
    pub engine: String,
    /// Tokens a forward pass serves.
    pub tokens_per_pass: usize,
    /// `K` and `W` in trace batches.
    pub every_batches: usize,
    /// See [`EngineKnobs::every_batches`].
    pub window_batches: usize,
    /// Its flags for `K` and `W`, to copy onto its command line.
    pub flags: String,
}

/// A replay of serving with re-planning.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServingView {
    /// The planner re-planning (registry id).
    pub planner: String,
    /// `K` and `W`.
    pub every: usize,
    /// See [`ServingAsk::window`].
    pub window: usize,
    /// The first batch served (the trace's batch index).
    pub first_served: usize,
    /// Per served batch, balancedness with re-planning under the rule.
    pub per_batch: Vec<f64>,
    /// Per served batch, the first plan kept.
    pub static_per_batch: Vec<f64>,
    /// Means over the served batches.
    pub balancedness: f64,
    /// The first plan kept's mean.
    pub static_balancedness: f64,
    /// Every re-plan point.
    pub replans: Vec<ReplanMark>,
    /// Expert copies moved over the run.
    pub copies_moved: usize,
    /// Their bytes, GB (10⁹).
    pub gb_moved: f64,
    /// With a hardware: MoE time over the run plus every pause, ms, and
    /// the first plan kept's.
    pub total_ms: Option<(f64, f64)>,
    /// The curve over intervals, when asked for.
    pub sweep: Option<Vec<SweepPoint>>,
    /// With an engine: its knobs as run, and its flags.
    pub engine: Option<EngineKnobs>,
}

/// One re-plan on the timeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplanMark {
    /// The first batch the new plan serves.
    pub at_batch: usize,
    /// Expert copies the move makes, and of them across nodes.
    pub copies: usize,
    /// See [`ReplanMark::copies`].
    pub copies_inter_node: usize,
    /// Bytes the move copies, GB.
    pub gb: f64,
    /// The pause on the hardware, ms.
    pub pause_ms: Option<f64>,
}

/// One interval of the sweep.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// `K`, in the unit asked (batches, or an engine's passes).
    pub every: usize,
    /// Mean balancedness over the served batches.
    pub balancedness: f64,
    /// Expert copies moved.
    pub copies: usize,
    /// With a hardware: MoE time plus pauses, ms.
    pub total_ms: Option<f64>,
}

/// The intervals a sweep tries when `served` batches are served: 1, 2, 4,
/// … below `served` (an interval of `served` or more never re-plans: the
/// first plan kept is that point), and `every`.
///
/// ```
/// use moeplan_view::sweep_intervals;
/// assert_eq!(sweep_intervals(48, 12), vec![1, 2, 4, 8, 12, 16, 32]);
/// assert_eq!(sweep_intervals(1, 1), vec![1]);
/// ```
pub fn sweep_intervals(served: usize, every: usize) -> Vec<usize> {
    let mut ks: Vec<usize> = std::iter::successors(Some(1usize), |k| k.checked_mul(2))
        .take_while(|&k| k < served.max(2))
        .collect();
    if !ks.contains(&every) {
        ks.push(every);
        ks.sort_unstable();
    }
    ks
}

impl Workspace {
    /// Serves the trace with EPLB re-planned as `ask` says, under `rule`,
    /// priced on `pricing` when given; `expert_bytes` sizes the moves.
    ///
    /// ```
    /// use moeplan_view::{Cluster, ServingAsk, Workspace};
    /// use moeplan::{synth::generator, data::model, judge::Rule};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 12))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let ask = ServingAsk { every: 4, window: 4, sweep: true, engine: None, tokens_per_pass: None };
    /// let v = ws.serving(ask, Rule::Even, None, 1e6)?;
    /// assert_eq!((v.first_served, v.per_batch.len(), v.replans.len()), (4, 8, 1));
    /// assert_eq!(v.sweep.map(|s| s.len()), Some(3)); // K = 1, 2, 4
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn serving(
        &self,
        ask: ServingAsk,
        rule: Rule,
        pricing: Option<&Pricing>,
        expert_bytes: f64,
    ) -> Result<ServingView> {
        let settings = Settings::new().with(GROUPS.name, Value::Count(self.cluster.groups))?;
        let planner = planners::EPLB_ID.planner()?;
        let engine = self.engine_of(&ask)?;
        let (migrate, transfer) = engine
            .as_ref()
            .map_or((Migrate::Relabel, Transfer::Pause), |(e, _, _)| {
                (e.migrate, e.transfer)
            });
        let knobs = engine.as_ref().map(|(_, k, _)| k.clone());
        let window = knobs.as_ref().map_or(ask.window, |k| k.window_batches);
        let run = |every| {
            serve(
                self.workload(),
                self.topology,
                planner,
                &settings,
                Serving {
                    every,
                    window,
                    min_balancedness: None,
                    migrate,
                    transfer,
                    rule,
                    start: 0,
                    libra: false,
                },
                pricing,
            )
        };
        let every = knobs.as_ref().map_or(ask.every, |k| k.every_batches);
        let r = run(every)?;
        let sweep = if ask.sweep {
            let mut points = Vec::new();
            for k in sweep_intervals(r.served_batches, every) {
                // K in the unit asked; an interval the engine refuses is left out
                let asked = match &engine {
                    _ if k == every => ask.every,
                    None => k,
                    Some((e, knobs, per_batch)) => {
                        let per_pass = knobs.tokens_per_pass as f64;
                        let passes = ((k as f64 * per_batch / per_pass).round() as usize).max(1);
                        if self
                            .engine_setting(
                                e,
                                passes,
                                ask.window,
                                knobs.tokens_per_pass,
                                *per_batch,
                            )
                            .is_err()
                        {
                            continue;
                        }
                        passes
                    }
                };
                let other;
                let s = if k == every {
                    &r
                } else {
                    other = run(k)?;
                    &other
                };
                points.push(SweepPoint {
                    every: asked,
                    balancedness: s.balancedness,
                    copies: s.copies_moved,
                    total_ms: s.total_us.map(|t| t.0 / 1e3),
                });
            }
            Some(points)
        } else {
            None
        };
        Ok(view_of(
            planner.id().as_str(),
            &ask,
            &r,
            expert_bytes,
            sweep,
            knobs,
        ))
    }

    /// The engine `ask` names, its knobs in batches (refused as the engine
    /// refuses them) and the tokens a trace batch holds (the trace's top-k,
    /// else its model's; summed over the trace once); `None` without one.
    fn engine_of(&self, ask: &ServingAsk) -> Result<Option<(&'static Engine, EngineKnobs, f64)>> {
        let Some(name) = ask.engine.as_deref().filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        let e = ENGINES.iter().find(|e| e.name == name).ok_or_else(|| {
            let names: Vec<&str> = ENGINES.iter().map(|e| e.name).collect();
            Error::Argument(format!(
                "unknown engine {name:?}; known: {}",
                names.join(", ")
            ))
        })?;
        let model = self.judge().model().preset;
        let per_batch = tokens_per_batch(self.trace(), model.top_k);
        let per_pass = ask
            .tokens_per_pass
            .unwrap_or_else(|| (per_batch.round() as usize).max(1));
        let s = self.engine_setting(e, ask.every, ask.window, per_pass, per_batch)?;
        let experts = self.trace().num_experts();
        let redundant = planners::default_redundant_experts(experts, self.topology.num_gpus());
        let flags = e.flags(
            s.every_passes,
            s.window_passes,
            model.moe_layers(),
            experts,
            redundant,
            None,
        );
        Ok(Some((
            e,
            EngineKnobs {
                engine: e.display.to_string(),
                tokens_per_pass: per_pass,
                every_batches: s.every,
                window_batches: s.window,
                flags,
            },
            per_batch,
        )))
    }

    /// `every` and `window` forward passes of `per_pass` tokens as `e`
    /// accepts them, in batches of `per_batch` tokens.
    fn engine_setting(
        &self,
        e: &Engine,
        every: usize,
        window: usize,
        per_pass: usize,
        per_batch: f64,
    ) -> Result<moeplan::studies::Setting> {
        let layers = self.judge().model().preset.moe_layers();
        e.settings(&[every], &[window], layers, per_pass, per_batch, None)?
            .into_iter()
            .next()
            .ok_or_else(|| Error::Argument(format!("{}: no setting", e.display)))
    }
}

fn view_of(
    planner: &str,
    ask: &ServingAsk,
    r: &ServingReport,
    expert_bytes: f64,
    sweep: Option<Vec<SweepPoint>>,
    engine: Option<EngineKnobs>,
) -> ServingView {
    let replans: Vec<ReplanMark> = r
        .replans
        .iter()
        .filter(|p| !p.skipped)
        .map(|p| {
            let (intra, inter) = p.migration.bytes(expert_bytes);
            ReplanMark {
                at_batch: p.at_batch,
                copies: p.migration.copies(),
                copies_inter_node: p.migration.copies_inter_node,
                gb: (intra + inter) / 1e9,
                pause_ms: p.pause_us.map(|us| us / 1e3),
            }
        })
        .collect();
    ServingView {
        planner: planner.to_string(),
        every: ask.every,
        window: ask.window,
        first_served: r.first_served,
        per_batch: r.per_batch_balancedness.clone(),
        static_per_batch: r.static_per_batch_balancedness.clone(),
        balancedness: r.balancedness,
        static_balancedness: r.static_balancedness,
        gb_moved: replans.iter().map(|m| m.gb).sum(),
        replans,
        copies_moved: r.copies_moved,
        total_ms: r.total_us.map(|(t, s)| (t / 1e3, s / 1e3)),
        sweep,
        engine,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cluster;
    use moeplan::{data::model, synth::generator};

    fn workspace(batches: usize) -> Workspace {
        let t = generator::generate(&generator::GenConfig::new(
            model::preset("olmoe").unwrap(),
            batches,
        ))
        .unwrap();
        let cluster = Cluster {
            nodes: 2,
            gpus_per_node: 4,
            groups: 1,
        };
        Workspace::new(t, cluster).unwrap()
    }

    #[test]
    fn the_view_is_the_core_replay_and_the_sweep_each_interval_s() {
        let ws = workspace(24);
        let ask = ServingAsk {
            every: 3,
            window: 4,
            sweep: true,
            engine: None,
            tokens_per_pass: None,
        };
        let v = ws.serving(ask.clone(), Rule::Even, None, 2e6).unwrap();
        let settings = Settings::new().with(GROUPS.name, Value::Count(1)).unwrap();
        let core = |every| {
            serve(
                ws.workload(),
                ws.topology(),
                planners::EPLB_ID.planner().unwrap(),
                &settings,
                Serving {
                    every,
                    window: 4,
                    min_balancedness: None,
                    migrate: Migrate::Relabel,
                    transfer: Default::default(),
                    rule: Rule::Even,
                    start: 0,
                    libra: false,
                },
                None,
            )
            .unwrap()
        };
        let r = core(3);
        assert_eq!(v.per_batch, r.per_batch_balancedness);
        assert_eq!(v.static_per_batch, r.static_per_batch_balancedness);
        assert_eq!(v.copies_moved, r.copies_moved);
        assert_eq!(v.replans.len(), 6); // at 7, 10, …, 22
        assert_eq!(v.replans[0].at_batch, 7);
        let copies: usize = v.replans.iter().map(|m| m.copies).sum();
        assert_eq!(copies, v.copies_moved);
        assert!((v.gb_moved - copies as f64 * 2e6 / 1e9).abs() < 1e-9);
        let sweep = v.sweep.unwrap();
        let ks: Vec<usize> = sweep.iter().map(|p| p.every).collect();
        assert_eq!(ks, vec![1, 2, 3, 4, 8, 16]);
        for p in &sweep {
            let c = core(p.every);
            assert_eq!((p.balancedness, p.copies), (c.balancedness, c.copies_moved));
        }
        // never priced without a hardware
        assert!(v.total_ms.is_none() && v.replans.iter().all(|m| m.pause_ms.is_none()));
    }

    #[test]
    fn priced_replays_give_time_and_pauses_and_bad_knobs_are_refused() {
        let ws = workspace(12);
        let hw = moeplan::data::hardware::preset("h100-ib-ndr").unwrap();
        let pricing = Pricing::new(hw, model::preset("olmoe").unwrap());
        let ask = ServingAsk {
            every: 2,
            window: 2,
            sweep: false,
            engine: None,
            tokens_per_pass: None,
        };
        let v = ws.serving(ask, Rule::Even, Some(&pricing), 1e6).unwrap();
        let (t, s) = v.total_ms.unwrap();
        assert!(t > 0.0 && s > 0.0);
        assert!(
            v.replans
                .iter()
                .all(|m| m.pause_ms.is_some_and(|p| p >= 0.0))
        );
        assert!(v.sweep.is_none());
        for (every, window) in [(0, 2), (2, 0), (2, 12)] {
            let ask = ServingAsk {
                every,
                window,
                sweep: false,
                engine: None,
                tokens_per_pass: None,
            };
            assert!(ws.serving(ask, Rule::Even, None, 1e6).is_err());
        }
    }
}
