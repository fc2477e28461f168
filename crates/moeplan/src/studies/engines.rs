//! The engines' re-planning knobs: what each names the interval `K` and
//! the window `W`, in its own unit (forward passes), their defaults, the
//! settings it refuses, the move it makes and the flags that set them. One
//! list, [`ENGINES`]; `moeplan replay --engine` reads it, and
//! [`serving`](super::serving) replays in trace batches, which
//! [`Engine::settings`] converts to.
//!
//! - SGLang (`python/sglang/srt/eplb/eplb_manager.py`): every
//!   `--eplb-rebalance-num-iterations` forward passes (default 1000) it
//!   re-plans on the recorder's last `--expert-distribution-recorder-buffer-size`
//!   passes (by default the interval, `server_args.py`), and its
//!   constructor asserts the interval is at
//!   least the window ("the circular buffer will contain stale data"). It
//!   re-places with its EPLB's own numbering (`init_by_eplb`): a fresh plan.
//! - vLLM (`vllm/config/parallel.py`, `EPLBConfig`): `step_interval`
//!   (default 3000) passes between re-plans, `window_size` (default 1000)
//!   passes of load kept, set through `--eplb-config`; it asserts neither
//!   against the other. Its move keeps an expert's slot on a GPU that
//!   already holds it (PR #29499), which moves the same copies as a fresh
//!   plan in moeplan's count; with `use_async` it moves on a side stream
//!   while serving goes on ([`Engine::asynchronous`]).
//!
//! - vllm-ascend (`vllm_ascend/eplb/eplb_updator.py`, `EplbConfig` in
//!   `vllm_ascend/ascend_config.py`): a cycle of heat collection
//!   (`expert_heat_collection_interval`, default 600 passes: the window),
//!   a wait for the planner (`algorithm_execution_interval`, default 50),
//!   then one MoE layer's weights a pass; the cycle `K` is their sum, so
//!   `--every` sets the wait to `K − W − layers`. Its move spreads over the
//!   layers; the replay charges it once. Set through
//!   `--additional-config '{"eplb_config": …}'` with `DYNAMIC_EPLB=true`.
//!
//! - TensorRT-LLM's online balancer
//!   (`cpp/tensorrt_llm/runtime/moeLoadBalancer/moeLoadBalancer.cpp`,
//!   `kernels/moeLoadBalance/moeLoadBalanceKernels.h`): `layer_updates_per_iter`
//!   `u` layers re-plan each pass, so a layer re-plans every
//!   `⌈L / u⌉` passes (one pass more when the layer groups come out equal,
//!   `generateUpdatePlan`); that cycle is `K`, and only the cycles some `u`
//!   gives are accepted. Its statistics are a moving average decaying by
//!   0.95 a pass (`MoeLoadBalanceStatisticInfo::decayFactor`), not a window
//!   one sets: modelled as the average's mass, `W` = 1 / (1 − 0.95) = 20
//!   passes. It places afresh (replication by a max-heap, then the least
//!   loaded rank with a free slot: EPLB's shape without groups) and copies
//!   weights from host memory on a background thread while serving goes on
//!   ([`Transfer::HostInBackground`]). Set through `moe_config.load_balancer`
//!   in `--extra_llm_api_options`.
//!
//! Complexity: constant per call.

use serde::Serialize;

use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};
use crate::studies::serving::{Migrate, Transfer};

/// One engine's re-planning knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Engine {
    /// The name `--engine` takes.
    pub name: &'static str,
    /// How it is printed.
    pub display: &'static str,
    /// Its default interval, forward passes (`Engine::every_for`).
    every_default: usize,
    /// Its default window, forward passes, when the interval is its
    /// default (`Engine::window_for` for another).
    window_default: usize,
    /// The move it makes.
    pub migrate: Migrate,
    /// Where the move's copies come from and whether serving waits.
    pub transfer: Transfer,
    kind: Kind,
}

/// Each engine's balancer, by what it is called in the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    SglangEplbManager,
    VllmEplb,
    AscendDynamicEplb,
    TrtllmOnlineBalancer,
}

/// TensorRT-LLM's statistics decay per pass
/// (`MoeLoadBalanceStatisticInfo::decayFactor`, moeLoadBalanceKernels.h).
const TRTLLM_DECAY: f64 = 0.95;

/// The passes between two re-plans of one layer when `u` of the model's
/// `layers` MoE layers update each pass (TensorRT-LLM's
/// `MoeLoadBalancer::generateUpdatePlan`: `⌈L / u⌉` groups, layer `l` in
/// group `l mod` that, and one empty pass more when the first and last
/// groups are the same size).
fn trtllm_cycle(layers: usize, u: usize) -> usize {
    let groups = layers.div_ceil(u.max(1)).max(1);
    groups + usize::from(layers % groups == 0)
}

/// SGLang's EPLB manager.
pub(crate) const SGLANG: Engine = Engine {
    name: "sglang",
    display: "SGLang",
    // server_args.py: eplb_rebalance_num_iterations = 1000; the recorder's
    // buffer, unset, takes the interval.
    every_default: 1000,
    window_default: 1000,
    migrate: Migrate::Fresh,
    transfer: Transfer::Pause,
    kind: Kind::SglangEplbManager,
};

/// vLLM's EPLB.
pub(crate) const VLLM: Engine = Engine {
    name: "vllm",
    display: "vLLM",
    // EPLBConfig: step_interval = 3000, window_size = 1000.
    every_default: 3000,
    window_default: 1000,
    migrate: Migrate::Fresh,
    transfer: Transfer::Pause,
    kind: Kind::VllmEplb,
};

/// vllm-ascend's dynamic EPLB. Its interval default is the cycle's fixed
/// part (heat collection and the planner's wait, 600 + 50 passes); the
/// model's MoE layers, one a pass, add to it (`Engine::every_for`).
pub(crate) const VLLM_ASCEND: Engine = Engine {
    name: "vllm-ascend",
    display: "vllm-ascend",
    // EplbConfig: expert_heat_collection_interval = 600,
    // algorithm_execution_interval = 50.
    every_default: 650,
    window_default: 600,
    migrate: Migrate::Fresh,
    transfer: Transfer::Pause,
    kind: Kind::AscendDynamicEplb,
};

/// TensorRT-LLM's online balancer. Its interval is the layer-update cycle
/// for `layer_updates_per_iter` 1 (`Engine::every_for`); its window the
/// decaying average's mass.
pub(crate) const TRTLLM: Engine = Engine {
    name: "trtllm",
    display: "TensorRT-LLM",
    every_default: 0,
    // 1 / (1 − decay) passes: the weight the moving average gives the past.
    window_default: 20,
    migrate: Migrate::Fresh,
    transfer: Transfer::HostInBackground,
    kind: Kind::TrtllmOnlineBalancer,
};

/// Every engine `--engine` knows.
pub const ENGINES: &[Engine] = &[SGLANG, VLLM, VLLM_ASCEND, TRTLLM];

/// The engine named `name` (the CLI's value parser lists [`ENGINES`]).
#[cfg(test)]
pub(crate) fn engine(name: &str) -> Result<&'static Engine> {
    ENGINES.iter().find(|e| e.name == name).ok_or_else(|| {
        let names: Vec<&str> = ENGINES.iter().map(|e| e.name).collect();
        Error::Argument(format!(
            "unknown engine {name:?}; known: {}",
            names.join(", ")
        ))
    })
}

/// Tokens one batch of `trace` holds: a layer's routed pairs over top-k
/// (the trace's, else `top_k`, its model's), what turns forward passes
/// into trace batches.
///
/// ```
/// use moeplan::{LoadTrace, studies::tokens_per_batch};
/// use ndarray::Array3;
/// let t = LoadTrace::new(Array3::from_elem((2, 3, 4), 8.0), vec![0, 1, 2])?; // 32 pairs a layer
/// assert_eq!(tokens_per_batch(&t, 4), 8.0);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn tokens_per_batch(trace: &LoadTrace, top_k: usize) -> f64 {
    let pairs = trace.counts().sum() / (trace.num_batches() * trace.num_layers()).max(1) as f64;
    pairs / trace.top_k().unwrap_or(top_k).max(1) as f64
}

/// One re-planning setting: `K` and `W` in the engine's forward passes and
/// in trace batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Setting {
    /// The interval, forward passes.
    pub every_passes: usize,
    /// The window, forward passes.
    pub window_passes: usize,
    /// The interval, trace batches.
    pub every: usize,
    /// The window, trace batches.
    pub window: usize,
}

impl Engine {
    /// The engine moving in the background where it can (vLLM's EPLB
    /// with `use_async`: [`Transfer::PeerInBackground`], its flags saying
    /// so); refused, in one line, by an engine that cannot.
    ///
    /// ```
    /// use moeplan::studies::ENGINES;
    /// let vllm = ENGINES.iter().find(|e| e.name == "vllm").unwrap().asynchronous()?;
    /// assert!(vllm.flags(3000, 1000, 58, 256, 32, None).contains(r#""use_async":true"#));
    /// assert!(ENGINES[0].asynchronous().is_err()); // SGLang
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn asynchronous(&self) -> Result<Engine> {
        match self.kind {
            Kind::VllmEplb => Ok(Engine {
                transfer: Transfer::PeerInBackground,
                ..*self
            }),
            _ => Err(Error::Argument(format!(
                "{} has no asynchronous move to set (vLLM's EPLB use_async is the one)",
                self.display
            ))),
        }
    }

    /// Its default interval, forward passes, for a model of `moe_layers`
    /// MoE layers (vllm-ascend moves one a pass within its cycle).
    pub(crate) fn every_for(&self, moe_layers: usize) -> usize {
        match self.kind {
            Kind::AscendDynamicEplb => self.every_default + moe_layers,
            Kind::TrtllmOnlineBalancer => trtllm_cycle(moe_layers, 1),
            _ => self.every_default,
        }
    }

    /// TensorRT-LLM's `layer_updates_per_iter` whose cycle is `every`
    /// passes on `moe_layers` layers: the smallest such, the fewest layers
    /// copying in one pass for the same cycle.
    fn trtllm_updates(every: usize, moe_layers: usize) -> Option<usize> {
        (1..=moe_layers.max(1)).find(|&u| trtllm_cycle(moe_layers, u) == every)
    }

    /// The window the engine uses when only the interval `every` is set:
    /// SGLang's recorder buffer takes the interval, vLLM keeps its own.
    pub(crate) fn window_for(&self, every: usize) -> usize {
        match self.kind {
            Kind::SglangEplbManager => every,
            Kind::VllmEplb | Kind::AscendDynamicEplb | Kind::TrtllmOnlineBalancer => {
                self.window_default
            }
        }
    }

    /// Refuses, in one line naming the engine's rule, a setting the
    /// engine would refuse (`every`, `window` in forward passes; the model
    /// has `moe_layers` MoE layers).
    pub(crate) fn check(&self, every: usize, window: usize, moe_layers: usize) -> Result<()> {
        if every == 0 || window == 0 {
            return Err(Error::Argument(format!(
                "{}: the interval and the window are at least one forward pass",
                self.display
            )));
        }
        if self.kind == Kind::AscendDynamicEplb && every < window + moe_layers + 1 {
            return Err(Error::Argument(format!(
                "vllm-ascend's cycle is its heat collection ({window} passes), at least one pass of \
                 algorithm_execution_interval and one pass per MoE layer ({moe_layers}): K = {every} \
                 passes is below {}",
                window + moe_layers + 1
            )));
        }
        if self.kind == Kind::TrtllmOnlineBalancer {
            if window != self.window_default {
                return Err(Error::Argument(format!(
                    "TensorRT-LLM keeps no window to set: its statistics decay by {TRTLLM_DECAY} a pass \
                     (MoeLoadBalanceStatisticInfo::decayFactor), modelled as W = {} passes, not {window}",
                    self.window_default
                )));
            }
            if Self::trtllm_updates(every, moe_layers).is_none() {
                let mut cycles: Vec<usize> = (1..=moe_layers.max(1))
                    .map(|u| trtllm_cycle(moe_layers, u))
                    .collect();
                cycles.dedup();
                cycles.sort_by_key(|c| c.abs_diff(every));
                let near: Vec<String> = cycles.iter().take(3).map(|c| c.to_string()).collect();
                return Err(Error::Argument(format!(
                    "TensorRT-LLM re-plans a layer every ⌈{moe_layers} / layer_updates_per_iter⌉ \
                     passes (one more when its layer groups come out equal): no setting gives K = \
                     {every}; the nearest are {}",
                    near.join(", ")
                )));
            }
        }
        if self.kind == Kind::SglangEplbManager && every < window {
            return Err(Error::Argument(format!(
                "SGLang refuses --eplb-rebalance-num-iterations {every} below \
                 --expert-distribution-recorder-buffer-size {window} (eplb_manager.py asserts the \
                 interval is at least the window)"
            )));
        }
        Ok(())
    }

    /// The settings `every` × `window` name (forward passes; an empty list
    /// is the engine's default, SGLang's window its interval), each refused
    /// as the engine would refuse it, in passes and in batches of
    /// `tokens_per_batch` tokens when a pass serves `tokens_per_pass`; the
    /// model has `moe_layers` MoE layers. A skip threshold (`gate`) is
    /// refused where the engine has none (only SGLang's has).
    ///
    /// ```
    /// use moeplan::studies::ENGINES;
    /// let sglang = ENGINES.iter().find(|e| e.name == "sglang").unwrap();
    /// let s = sglang.settings(&[], &[], 58, 1024, 4096.0, None)?;
    /// assert_eq!((s[0].every_passes, s[0].window_passes), (1000, 1000)); // the window follows
    /// assert_eq!((s[0].every, s[0].window), (250, 250)); // 1,024,000 tokens
    /// let e = sglang.settings(&[1], &[16], 58, 1024, 4096.0, None).unwrap_err().to_string();
    /// assert!(e.contains("--eplb-rebalance-num-iterations 1 below"), "{e}");
    /// let ascend = ENGINES.iter().find(|e| e.name == "vllm-ascend").unwrap();
    /// assert_eq!(ascend.settings(&[], &[], 58, 4096, 4096.0, None)?[0].every_passes, 708); // 600 + 50 + 58
    /// assert!(ascend.settings(&[], &[], 58, 4096, 4096.0, Some(0.9)).is_err()); // no gate to set
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn settings(
        &self,
        every: &[usize],
        window: &[usize],
        moe_layers: usize,
        tokens_per_pass: usize,
        tokens_per_batch: f64,
        gate: Option<f64>,
    ) -> Result<Vec<Setting>> {
        if gate.is_some() && self.kind != Kind::SglangEplbManager {
            return Err(Error::Argument(format!(
                "{} has no skip threshold to set (SGLang's \
                 --eplb-min-rebalancing-utilization-threshold is the one engine gate): drop --replan-below",
                self.display
            )));
        }
        let every = match every {
            [] => vec![self.every_for(moe_layers)],
            given => given.to_vec(),
        };
        let mut out = Vec::new();
        for k in every {
            let windows = match window {
                [] => vec![self.window_for(k)],
                given => given.to_vec(),
            };
            for w in windows {
                self.check(k, w, moe_layers)?;
                out.push(Setting {
                    every_passes: k,
                    window_passes: w,
                    every: self.batches(k, tokens_per_pass, tokens_per_batch),
                    window: self.batches(w, tokens_per_pass, tokens_per_batch),
                });
            }
        }
        Ok(out)
    }

    /// The engine's own flags for `every` and `window` (forward passes) on
    /// a model of `moe_layers` MoE layers of `experts` experts, `redundant`
    /// redundant experts per layer and the skip threshold (SGLang's; the
    /// others have none).
    ///
    /// ```
    /// use moeplan::studies::ENGINES;
    /// let engine = |n: &str| ENGINES.iter().find(|e| e.name == n).ok_or(moeplan::Error::Argument(n.into()));
    /// assert_eq!(
    ///     engine("sglang")?.flags(1000, 500, 58, 256, 32, None),
    ///     "--enable-eplb --ep-num-redundant-experts 32 --eplb-rebalance-num-iterations 1000 --expert-distribution-recorder-buffer-size 500"
    /// );
    /// assert!(engine("vllm")?.flags(3000, 1000, 58, 256, 32, None).contains(r#""step_interval":3000"#));
    /// let ascend = engine("vllm-ascend")?.flags(708, 600, 58, 256, 32, None);
    /// assert!(ascend.contains(r#""algorithm_execution_interval":50"#));
    /// // 58 layers, 2 a pass: 29 groups of 2, equal, so a 30-pass cycle
    /// let trt = engine("trtllm")?.flags(30, 20, 58, 256, 32, None);
    /// assert!(trt.contains("num_slots: 288, layer_updates_per_iter: 2"), "{trt}");
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn flags(
        &self,
        every: usize,
        window: usize,
        moe_layers: usize,
        experts: usize,
        redundant: usize,
        gate: Option<f64>,
    ) -> String {
        match self.kind {
            Kind::SglangEplbManager => {
                let mut f = format!(
                    "--enable-eplb --ep-num-redundant-experts {redundant} \
                     --eplb-rebalance-num-iterations {every} \
                     --expert-distribution-recorder-buffer-size {window}"
                );
                if let Some(b) = gate {
                    f += &format!(" --eplb-min-rebalancing-utilization-threshold {b}");
                }
                f
            }
            Kind::VllmEplb => format!(
                "--enable-eplb --eplb-config '{{\"window_size\":{window},\"step_interval\":{every},\"num_redundant_experts\":{redundant}{}}}'",
                if self.transfer == Transfer::PeerInBackground {
                    ",\"use_async\":true"
                } else {
                    ""
                }
            ),
            Kind::AscendDynamicEplb => format!(
                "DYNAMIC_EPLB=true; --additional-config '{{\"eplb_config\":{{\"dynamic_eplb\":true,\"expert_heat_collection_interval\":{window},\"algorithm_execution_interval\":{},\"num_redundant_experts\":{redundant}}}}}'",
                every.saturating_sub(window + moe_layers).max(1)
            ),
            Kind::TrtllmOnlineBalancer => format!(
                "--extra_llm_api_options extra.yaml, extra.yaml holding: moe_config: {{backend: WIDEEP, load_balancer: {{num_slots: {}, layer_updates_per_iter: {}}}}}",
                experts + redundant,
                Self::trtllm_updates(every, moe_layers).unwrap_or(1)
            ),
        }
    }

    /// Trace batches covering `passes` forward passes of `tokens_per_pass`
    /// tokens when a batch holds `tokens_per_batch`: at least one.
    pub(crate) fn batches(
        &self,
        passes: usize,
        tokens_per_pass: usize,
        tokens_per_batch: f64,
    ) -> usize {
        if tokens_per_batch <= 0.0 {
            return passes.max(1);
        }
        let b = (passes as f64 * tokens_per_pass as f64 / tokens_per_batch).round();
        (b as usize).max(1)
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    use super::*;

    #[test]
    fn defaults_checks_and_batches() -> Result<()> {
        let (sglang, vllm, ascend) = (engine("sglang")?, engine("vllm")?, engine("vllm-ascend")?);
        assert!(engine("tgi").is_err());
        assert_eq!(sglang.every_for(58), 1000);
        assert_eq!(ascend.every_for(58), 708); // 600 + 50 + 58
        assert_eq!((sglang.window_for(500), vllm.window_for(500)), (500, 1000));
        assert!(sglang.check(1000, 1000, 58).is_ok());
        assert!(sglang.check(1, 16, 58).is_err());
        assert!(vllm.check(1, 16, 58).is_ok()); // vLLM asserts no order
        assert!(ascend.check(600 + 58, 600, 58).is_err()); // no pass left to plan in
        let trt = engine("trtllm")?;
        assert_eq!(trt.every_for(58), 59); // 58 groups of one, equal: one empty pass
        assert_eq!(trt.every_for(61), 62);
        assert_eq!(
            (
                trtllm_cycle(58, 3),
                trtllm_cycle(58, 58),
                trtllm_cycle(7, 2)
            ),
            (20, 2, 4)
        );
        assert!(trt.check(59, 20, 58).is_ok() && trt.check(20, 20, 58).is_ok());
        let e = trt.check(45, 20, 58).unwrap_err().to_string();
        assert!(
            e.contains("no setting gives K = 45") && e.contains("nearest"),
            "{e}"
        );
        assert!(trt.check(59, 100, 58).is_err()); // no window to set
        assert_eq!(Engine::trtllm_updates(30, 58), Some(2));
        assert_eq!(sglang.batches(1000, 256, 4096.0), 63); // 256,000 tokens
        assert_eq!(sglang.batches(1, 256, 4096.0), 1);
        Ok(())
    }
}
