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
    /// Parameters outside the routed experts, in millions: attention,
    /// shared experts, leading dense layers, embeddings and router, summed
    /// from the model's `config.json` (routed + this = the card's total).
    pub non_routed_params_m: u64,
    /// KV-cache bytes one token takes over all layers in BF16: MLA's latent
    /// (`(kv_lora_rank + qk_rope_head_dim) × 2` bytes per layer) or
    /// `2 × kv_heads × head_dim × 2` for grouped-query attention.
    pub kv_bytes_per_token: u64,
    /// KV heads attention tensor parallelism can split the cache over (1
    /// for MLA, whose latent every rank keeps whole).
    pub kv_heads: usize,
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
        self.expert_params() * self.bytes_per_weight as u64
    }

    /// Weights of one routed expert (gate, up and down projections).
    pub fn expert_params(&self) -> u64 {
        3 * self.hidden as u64 * self.moe_intermediate as u64
    }

    /// Parameters in all, billions: the routed experts and the rest.
    #[cfg(test)]
    pub(crate) fn total_params_b(&self) -> f64 {
        self.non_routed_params_m as f64 / 1e3
            + (self.moe_layers() * self.experts) as f64 * self.expert_params() as f64 / 1e9
    }

    /// Parameters one token activates, billions.
    #[cfg(test)]
    pub(crate) fn active_params_b(&self) -> f64 {
        self.non_routed_params_m as f64 / 1e3
            + (self.moe_layers() * self.top_k) as f64 * self.expert_params() as f64 / 1e9
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
        // DeepSeek-V3 config.json: MLA, kv_lora_rank 512 + qk_rope_head_dim 64, 61 layers; 128 heads' attention 11.4 B, 3 dense layers 1.2 B, shared experts 2.6 B, embeddings 1.9 B (routed 653.9 B, total 671 B).
        bytes_per_weight: 1,
        non_routed_params_m: 17100,
        kv_bytes_per_token: 70_272,
        kv_heads: 1,
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
        // Kimi-K2-Instruct config.json: DeepSeek-V3's MLA dims, 61 layers, 64 heads (attention 6.2 B), 1 dense layer 0.4 B, shared experts 2.6 B, embeddings 2.3 B (routed 1,014.7 B, total 1.03 T: the card's "1T").
        bytes_per_weight: 1,
        non_routed_params_m: 11700,
        kv_bytes_per_token: 70_272,
        kv_heads: 1,
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
        // Qwen3-235B-A22B config.json: 94 layers, 64 query / 4 KV heads of 128 (attention 7.1 B), untied embeddings 1.2 B (routed 227.1 B, total 235 B).
        bytes_per_weight: 2,
        non_routed_params_m: 8400,
        kv_bytes_per_token: 192_512,
        kv_heads: 4,
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
        // Qwen3-30B-A3B config.json: 48 layers, 32 query / 4 KV heads of 128 (attention 0.9 B), embeddings 0.6 B (routed 29.0 B, total 30.5 B).
        bytes_per_weight: 2,
        non_routed_params_m: 1500,
        kv_bytes_per_token: 98_304,
        kv_heads: 4,
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
        // GLM-4.5 config.json: 92 layers, 96 query / 8 KV heads of 128 (attention 12.5 B), shared experts 2.1 B, 3 dense layers 0.6 B, embeddings 1.6 B (routed 336 B; the card's 355 B adds the MTP layer).
        bytes_per_weight: 2,
        non_routed_params_m: 16700,
        kv_bytes_per_token: 376_832,
        kv_heads: 8,
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
        // OLMoE-1B-7B config.json: 16 layers, 16 heads of 128 (attention 0.27 B), embeddings 0.21 B (routed 6.4 B, total 6.9 B).
        bytes_per_weight: 2,
        non_routed_params_m: 480,
        kv_bytes_per_token: 131_072,
        kv_heads: 16,
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
        // DeepSeek-V2-Lite config.json: MLA 512 + 64, 27 layers (attention 0.37 B), 2 shared experts 0.45 B, 1 dense layer 0.07 B, embeddings 0.42 B (routed 14.4 B, total 15.7 B).
        bytes_per_weight: 2,
        non_routed_params_m: 1310,
        kv_bytes_per_token: 31_104,
        kv_heads: 1,
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
        // Qwen1.5-MoE-A2.7B config.json: 24 layers, 16 heads of 128 (attention 0.4 B), shared expert of 5,632 0.83 B, embeddings 0.62 B (routed 12.5 B, total 14.3 B).
        bytes_per_weight: 2,
        non_routed_params_m: 1850,
        kv_bytes_per_token: 196_608,
        kv_heads: 16,
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

/// The router's expert groups of the model `trace` was recorded on: the
/// preset it names when that preset has its expert count; else the one
/// count every preset of its shape agrees on (its experts, and its model
/// layers when the trace knows them, else its MoE layers): an SGLang dump
/// of DeepSeek-V3 or R1, 61 rows of 256 experts, has 8; else 1, flat
/// routing. What EPLB's hierarchical policy splits by, as SGLang and vLLM
/// pass it: the model config's `n_group`
/// (`get_model_config_for_expert_location` in SGLang's
/// `models/deepseek_v2.py`).
pub(crate) fn groups_of(trace: &crate::LoadTrace) -> usize {
    let experts = trace.num_experts();
    if let Some(p) = trace.model().and_then(|n| preset(n).ok())
        && p.experts == experts
    {
        return p.groups;
    }
    let shaped = |p: &&ModelPreset| {
        p.experts == experts
            && match trace.known_model_layers() {
                Some(total) => p.total_layers == total,
                None => p.moe_layers() == trace.num_layers(),
            }
    };
    let mut counts = PRESETS.iter().filter(shaped).map(|p| p.groups);
    match counts.next() {
        Some(g) if counts.all(|h| h == g) => g,
        _ => 1,
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn groups_of() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{LoadTrace, data::model::groups_of};
        use ndarray::Array3;
        let dump = LoadTrace::new(Array3::from_elem((1, 58, 256), 1.0), (3..61).collect())?
            .with_model_layers(61);
        assert_eq!(groups_of(&dump), 8);
        let small = LoadTrace::new(Array3::from_elem((1, 2, 256), 1.0), vec![0, 1])?;
        assert_eq!(groups_of(&small), 1); // no model of that shape
        assert_eq!(groups_of(&small.with_model("deepseek-v3")), 8);
        Ok(())
    }
    #[test]
    fn total_params_b() -> Result<(), Box<dyn std::error::Error>> {
        let v3 = crate::data::model::preset("deepseek-v3")?;
        assert!((v3.total_params_b() - 671.0).abs() < 1.0); // the card's 671 B
        Ok(())
    }
    #[test]
    fn active_params_b() -> Result<(), Box<dyn std::error::Error>> {
        let v3 = crate::data::model::preset("deepseek-v3")?;
        assert!((v3.active_params_b() - 37.0).abs() < 1.0); // the card's 37 B
        Ok(())
    }
}
