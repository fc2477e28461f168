//! Shapes of real MoE models: how many MoE layers and experts, routing
//! top-k, router groups, and the bytes one expert's weights take (what a
//! replica costs in GPU memory). Figures come from each model's published
//! configuration: `3 × hidden × moe_intermediate` weights (gate, up, down
//! projections) at the checkpoint's precision.

use serde::Serialize;

use crate::error::{Error, Result};

/// One model's MoE shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ModelPreset {
    /// Name used on the command line and in the app.
    pub name: &'static str,
    /// Human-readable name.
    pub display: &'static str,
    /// Layers of the model in all.
    pub total_layers: usize,
    /// Leading dense layers (no experts): MoE layer ids start here.
    pub first_moe_layer: usize,
    /// Routed experts per MoE layer.
    pub experts: usize,
    /// Experts each token is routed to.
    pub top_k: usize,
    /// Router expert groups (DeepSeek's `n_group`; 1 where routing is flat).
    pub groups: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Intermediate size of one expert.
    pub moe_intermediate: usize,
    /// Bytes per weight in the served checkpoint (1 for FP8, 2 for BF16).
    pub bytes_per_weight: usize,
}

impl ModelPreset {
    /// MoE layers of the model.
    pub fn moe_layers(&self) -> usize {
        self.total_layers - self.first_moe_layer
    }

    /// Bytes of one expert's weights: the memory one replica costs.
    ///
    /// ```
    /// let v3 = moeplan::data::model::preset("deepseek-v3")?;
    /// assert_eq!(v3.expert_bytes(), 3 * 7168 * 2048);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn expert_bytes(&self) -> u64 {
        3 * self.hidden as u64 * self.moe_intermediate as u64 * self.bytes_per_weight as u64
    }
}

/// Every built-in model shape.
pub const PRESETS: &[ModelPreset] = &[
    ModelPreset {
        name: "deepseek-v3",
        display: "DeepSeek-V3 / R1 (671B)",
        total_layers: 61,
        first_moe_layer: 3,
        experts: 256,
        top_k: 8,
        groups: 8,
        hidden: 7168,
        moe_intermediate: 2048,
        bytes_per_weight: 1,
    },
    ModelPreset {
        name: "kimi-k2",
        display: "Kimi-K2 (1T)",
        total_layers: 61,
        first_moe_layer: 1,
        experts: 384,
        top_k: 8,
        groups: 1,
        hidden: 7168,
        moe_intermediate: 2048,
        bytes_per_weight: 1,
    },
    ModelPreset {
        name: "qwen3-235b-a22b",
        display: "Qwen3-235B-A22B",
        total_layers: 94,
        first_moe_layer: 0,
        experts: 128,
        top_k: 8,
        groups: 1,
        hidden: 4096,
        moe_intermediate: 1536,
        bytes_per_weight: 2,
    },
    ModelPreset {
        name: "qwen3-30b-a3b",
        display: "Qwen3-30B-A3B",
        total_layers: 48,
        first_moe_layer: 0,
        experts: 128,
        top_k: 8,
        groups: 1,
        hidden: 2048,
        moe_intermediate: 768,
        bytes_per_weight: 2,
    },
    ModelPreset {
        name: "glm-4.5",
        display: "GLM-4.5 (355B)",
        total_layers: 92,
        first_moe_layer: 3,
        experts: 160,
        top_k: 8,
        groups: 1,
        hidden: 5120,
        moe_intermediate: 1536,
        bytes_per_weight: 2,
    },
    ModelPreset {
        name: "olmoe",
        display: "OLMoE-1B-7B",
        total_layers: 16,
        first_moe_layer: 0,
        experts: 64,
        top_k: 8,
        groups: 1,
        hidden: 2048,
        moe_intermediate: 1024,
        bytes_per_weight: 2,
    },
    ModelPreset {
        name: "deepseek-v2-lite",
        display: "DeepSeek-V2-Lite (16B)",
        total_layers: 27,
        first_moe_layer: 1,
        experts: 64,
        top_k: 6,
        groups: 1,
        hidden: 2048,
        moe_intermediate: 1408,
        bytes_per_weight: 2,
    },
    ModelPreset {
        name: "qwen1.5-moe-a2.7b",
        display: "Qwen1.5-MoE-A2.7B",
        total_layers: 24,
        first_moe_layer: 0,
        experts: 60,
        top_k: 4,
        groups: 1,
        hidden: 2048,
        moe_intermediate: 1408,
        bytes_per_weight: 2,
    },
];

/// Looks a preset up by name (case-insensitive).
///
/// ```
/// assert_eq!(moeplan::data::model::preset("Kimi-K2")?.experts, 384);
/// assert!(moeplan::data::model::preset("gpt-5").is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn preset(name: &str) -> Result<&'static ModelPreset> {
    PRESETS
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
            Error::Argument(format!(
                "unknown model preset {name:?}; known: {}",
                names.join(", ")
            ))
        })
}
