//! One layer's placement as the replay reads it: slots GPU-major and each
//! expert's copies, rebuilt in place per layer. Every dispatch rule reads
//! it; building it is O(slots + E).

use crate::data::plan::LayerPlacement;

/// One layer's placement flattened: slots GPU-major (SGLang's and vLLM's
/// physical order), each expert's copies in slot order. Rebuilt in place
/// for each layer so the batch loop never allocates.
#[derive(Debug, Default)]
pub(crate) struct SlotTable {
    /// GPU `g` owns slots `gpu_start[g] .. gpu_start[g + 1]`.
    pub gpu_start: Vec<usize>,
    pub slot_expert: Vec<u32>,
    pub slot_gpu: Vec<u32>,
    /// 1 / copies of each slot's expert.
    pub slot_share: Vec<f64>,
    /// Expert `e`'s copies are `copy_slot[copy_start[e] .. copy_start[e + 1]]`.
    pub copy_start: Vec<usize>,
    pub copy_slot: Vec<u32>,
    /// The GPU of each copy, parallel to `copy_slot` (vLLM's per-token
    /// rule reads it for every pair).
    pub copy_gpu: Vec<u32>,
    /// The counting sort's cursors, kept between layers.
    next: Vec<usize>,
}

impl SlotTable {
    pub(crate) fn prepare(&mut self, layer: &LayerPlacement, num_experts: usize) {
        self.gpu_start.clear();
        self.slot_expert.clear();
        self.slot_gpu.clear();
        self.gpu_start.push(0);
        for (g, slots) in layer.gpus.iter().enumerate() {
            self.slot_expert.extend_from_slice(slots);
            self.slot_gpu
                .extend(std::iter::repeat_n(g as u32, slots.len()));
            self.gpu_start.push(self.slot_expert.len());
        }
        self.copy_start.clear();
        self.copy_start.resize(num_experts + 1, 0);
        for &e in &self.slot_expert {
            if let Some(c) = self.copy_start.get_mut(e as usize + 1) {
                *c += 1;
            }
        }
        for e in 0..num_experts {
            self.copy_start[e + 1] += self.copy_start[e];
        }
        // A counting sort keeps each expert's copies in slot order.
        self.copy_slot.clear();
        self.copy_slot.resize(self.slot_expert.len(), 0);
        self.next.clear();
        self.next.extend_from_slice(&self.copy_start[..num_experts]);
        for (s, &e) in self.slot_expert.iter().enumerate() {
            if let Some(n) = self.next.get_mut(e as usize) {
                self.copy_slot[*n] = s as u32;
                *n += 1;
            }
        }
        self.copy_gpu.clear();
        let slot_gpu = &self.slot_gpu;
        self.copy_gpu
            .extend(self.copy_slot.iter().map(|&s| slot_gpu[s as usize]));
        self.slot_share.clear();
        let copies = &self.copy_start;
        self.slot_share.extend(self.slot_expert.iter().map(|&e| {
            let c = copies[e as usize + 1] - copies[e as usize];
            1.0 / c.max(1) as f64
        }));
    }

    pub(crate) fn num_gpus(&self) -> usize {
        self.gpu_start.len().saturating_sub(1)
    }

    pub(crate) fn copies(&self, e: usize) -> &[u32] {
        &self.copy_slot[self.copy_start[e]..self.copy_start[e + 1]]
    }

    /// Per-GPU loads under the even split, computed exactly as
    /// [`crate::evaluate`] does (same operations in the same order), so the
    /// figures agree bit for bit.
    pub(crate) fn even_loads(&self, row: &[f64], loads: &mut [f64]) {
        for (g, load) in loads.iter_mut().enumerate() {
            let range = self.gpu_start[g]..self.gpu_start[g + 1];
            *load = self.slot_expert[range.clone()]
                .iter()
                .zip(&self.slot_share[range])
                .map(|(&e, &share)| row[e as usize] * share)
                .sum();
        }
    }
}
