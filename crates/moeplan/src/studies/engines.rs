//! The engines' re-planning knobs: what each names the interval `K` and
//! the window `W`, in its own unit (forward passes), their defaults, the
//! settings it refuses, the move it makes and the flags that set them. One
//! list, [`ENGINES`]; `moeplan replay --engine` reads it, and
//! [`serving`](super::serving) replays in trace batches, which
//! [`Engine::batches`] converts to.
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
//!   plan in moeplan's count.
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
//! TensorRT-LLM's online balancer updates from per-iteration statistics:
//! not modelled here yet.
//!
//! Complexity: constant per call.

use crate::error::{Error, Result};
use crate::studies::serving::Migrate;

/// One engine's re-planning knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Engine {
    /// The name `--engine` takes.
    pub name: &'static str,
    /// How it is printed.
    pub display: &'static str,
    /// Its default interval, forward passes.
    pub every_default: usize,
    /// Its default window, forward passes, when the interval is its
    /// default ([`Engine::window_for`] for another).
    pub window_default: usize,
    /// The move it makes.
    pub migrate: Migrate,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sglang,
    Vllm,
    VllmAscend,
}

/// SGLang's EPLB manager.
pub const SGLANG: Engine = Engine {
    name: "sglang",
    display: "SGLang",
    // server_args.py: eplb_rebalance_num_iterations = 1000; the recorder's
    // buffer, unset, takes the interval.
    every_default: 1000,
    window_default: 1000,
    migrate: Migrate::Fresh,
    kind: Kind::Sglang,
};

/// vLLM's EPLB.
pub const VLLM: Engine = Engine {
    name: "vllm",
    display: "vLLM",
    // EPLBConfig: step_interval = 3000, window_size = 1000.
    every_default: 3000,
    window_default: 1000,
    migrate: Migrate::Fresh,
    kind: Kind::Vllm,
};

/// vllm-ascend's dynamic EPLB. Its interval default is the cycle's fixed
/// part (heat collection and the planner's wait, 600 + 50 passes); the
/// model's MoE layers, one a pass, add to it ([`Engine::every_for`]).
pub const VLLM_ASCEND: Engine = Engine {
    name: "vllm-ascend",
    display: "vllm-ascend",
    // EplbConfig: expert_heat_collection_interval = 600,
    // algorithm_execution_interval = 50.
    every_default: 650,
    window_default: 600,
    migrate: Migrate::Fresh,
    kind: Kind::VllmAscend,
};

/// Every engine `--engine` knows.
pub const ENGINES: &[Engine] = &[SGLANG, VLLM, VLLM_ASCEND];

/// The engine named `name`.
///
/// ```
/// use moeplan::studies::engines::engine;
/// assert_eq!(engine("sglang")?.every_for(58), 1000);
/// assert!(engine("tgi").is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn engine(name: &str) -> Result<&'static Engine> {
    ENGINES.iter().find(|e| e.name == name).ok_or_else(|| {
        let names: Vec<&str> = ENGINES.iter().map(|e| e.name).collect();
        Error::Argument(format!(
            "unknown engine {name:?}; known: {} (TensorRT-LLM's online balancer is not modelled yet)",
            names.join(", ")
        ))
    })
}

impl Engine {
    /// Its default interval, forward passes, for a model of `moe_layers`
    /// MoE layers (vllm-ascend moves one a pass within its cycle).
    ///
    /// ```
    /// use moeplan::studies::engines::{SGLANG, VLLM_ASCEND};
    /// assert_eq!(SGLANG.every_for(58), 1000);
    /// assert_eq!(VLLM_ASCEND.every_for(58), 708); // 600 + 50 + 58
    /// ```
    pub fn every_for(&self, moe_layers: usize) -> usize {
        match self.kind {
            Kind::VllmAscend => self.every_default + moe_layers,
            _ => self.every_default,
        }
    }

    /// The window the engine uses when only the interval `every` is set:
    /// SGLang's recorder buffer takes the interval, vLLM keeps its own.
    ///
    /// ```
    /// use moeplan::studies::engines::{SGLANG, VLLM};
    /// assert_eq!(SGLANG.window_for(500), 500);
    /// assert_eq!(VLLM.window_for(500), 1000);
    /// ```
    pub fn window_for(&self, every: usize) -> usize {
        match self.kind {
            Kind::Sglang => every,
            Kind::Vllm | Kind::VllmAscend => self.window_default,
        }
    }

    /// Refuses, in one line naming the engine's rule, a setting the
    /// engine would refuse (`every`, `window` in forward passes; the model
    /// has `moe_layers` MoE layers).
    ///
    /// ```
    /// use moeplan::studies::engines::{SGLANG, VLLM, VLLM_ASCEND};
    /// assert!(SGLANG.check(1000, 1000, 58).is_ok());
    /// let e = SGLANG.check(1, 16, 58).unwrap_err().to_string();
    /// assert!(e.contains("--eplb-rebalance-num-iterations"), "{e}");
    /// assert!(VLLM.check(1, 16, 58).is_ok()); // vLLM asserts no order
    /// assert!(VLLM_ASCEND.check(600 + 58, 600, 58).is_err()); // no pass left to plan in
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn check(&self, every: usize, window: usize, moe_layers: usize) -> Result<()> {
        if every == 0 || window == 0 {
            return Err(Error::Argument(format!(
                "{}: the interval and the window are at least one forward pass",
                self.display
            )));
        }
        if self.kind == Kind::VllmAscend && every < window + moe_layers + 1 {
            return Err(Error::Argument(format!(
                "vllm-ascend's cycle is its heat collection ({window} passes), at least one pass of \
                 algorithm_execution_interval and one pass per MoE layer ({moe_layers}): K = {every} \
                 passes is below {}",
                window + moe_layers + 1
            )));
        }
        if self.kind == Kind::Sglang && every < window {
            return Err(Error::Argument(format!(
                "SGLang refuses --eplb-rebalance-num-iterations {every} below \
                 --expert-distribution-recorder-buffer-size {window} (eplb_manager.py asserts the \
                 interval is at least the window)"
            )));
        }
        Ok(())
    }

    /// The engine's own flags for `every` and `window` (forward passes) on
    /// a model of `moe_layers` MoE layers, `redundant` redundant experts
    /// per layer and the skip threshold.
    ///
    /// ```
    /// use moeplan::studies::engines::{SGLANG, VLLM, VLLM_ASCEND};
    /// assert_eq!(
    ///     SGLANG.flags(1000, 500, 58, 32, None),
    ///     "--enable-eplb --ep-num-redundant-experts 32 --eplb-rebalance-num-iterations 1000 --expert-distribution-recorder-buffer-size 500"
    /// );
    /// assert!(VLLM.flags(3000, 1000, 58, 32, None).contains(r#""step_interval":3000"#));
    /// assert!(VLLM_ASCEND.flags(708, 600, 58, 32, None).contains(r#""algorithm_execution_interval":50"#));
    /// ```
    pub fn flags(
        &self,
        every: usize,
        window: usize,
        moe_layers: usize,
        redundant: usize,
        gate: Option<f64>,
    ) -> String {
        match self.kind {
            Kind::Sglang => {
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
            Kind::Vllm => format!(
                "--enable-eplb --eplb-config '{{\"window_size\":{window},\"step_interval\":{every},\"num_redundant_experts\":{redundant}}}'"
            ),
            Kind::VllmAscend => format!(
                "DYNAMIC_EPLB=true; --additional-config '{{\"eplb_config\":{{\"dynamic_eplb\":true,\"expert_heat_collection_interval\":{window},\"algorithm_execution_interval\":{},\"num_redundant_experts\":{redundant}}}}}'",
                every.saturating_sub(window + moe_layers).max(1)
            ),
        }
    }

    /// Trace batches covering `passes` forward passes of `tokens_per_pass`
    /// tokens when a batch holds `tokens_per_batch`: at least one.
    ///
    /// ```
    /// use moeplan::studies::engines::SGLANG;
    /// assert_eq!(SGLANG.batches(1000, 256, 4096.0), 63); // 256,000 tokens
    /// assert_eq!(SGLANG.batches(1, 256, 4096.0), 1);
    /// ```
    pub fn batches(&self, passes: usize, tokens_per_pass: usize, tokens_per_batch: f64) -> usize {
        if tokens_per_batch <= 0.0 {
            return passes.max(1);
        }
        let b = (passes as f64 * tokens_per_pass as f64 / tokens_per_batch).round();
        (b as usize).max(1)
    }
}
