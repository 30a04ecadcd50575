//! vLLM's KV budget (`shared/spec/engine-semantics.md` §4.1–4.2): a fraction of the total
//! memory minus what vLLM measures, in blocks.

use serde::Serialize;

use super::GIB;

/// Inputs of the vLLM derivation, per GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VllmInputs {
    /// `nvidia-smi` memory, MiB.
    pub gpu_memory_mib: u64,
    /// `gpu_memory_utilization` (0.92 in vLLM 0.33.0, 0.9 before).
    pub gpu_memory_utilization: f64,
    /// Weights per GPU, GiB.
    pub weight_gib_per_gpu: f64,
    /// Non-torch memory grown since the startup snapshot (NCCL, cuBLAS workspaces), GiB.
    pub non_torch_gib: f64,
    /// Peak minus allocated torch memory during the dummy max-batch forward, GiB.
    pub activation_peak_gib: f64,
    /// CUDA-graph memory estimate (subtracted since v0.21), GiB.
    pub cuda_graph_gib: f64,
    /// KV bytes per token per GPU.
    pub kv_bytes_per_token: u64,
    /// KV block size (`--block-size`).
    pub block_size_tokens: u32,
}

/// The vLLM derivation, every term per GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VllmMemory {
    /// The inputs.
    pub inputs: VllmInputs,
    /// `ceil(total · utilization)`, GiB.
    pub requested_gib: f64,
    /// What is left for KV, GiB.
    pub kv_gib: f64,
    /// Blocks.
    pub num_blocks: u64,
    /// `num_blocks × block_size` (vLLM's "GPU KV cache size: … tokens").
    pub kv_tokens: u64,
    /// Memory outside the requested budget, GiB (`total − requested`): vLLM keeps it free.
    pub headroom_gib: f64,
    /// The smallest `gpu_memory_utilization` that leaves room for one KV block (may exceed 1:
    /// then no setting does).
    pub min_utilization_for_one_block: f64,
}

impl VllmMemory {
    /// Whether vLLM would start. With no room for a KV block it refuses:
    /// `vllm/v1/core/kv_cache_utils.py: check_enough_kv_cache_memory` raises "No available
    /// memory for the cache blocks" when the KV memory is not positive. (The same check also
    /// refuses when one request of `max_model_len` tokens does not fit; servesim does not check
    /// that yet.)
    pub fn starts(&self) -> bool {
        self.num_blocks > 0
    }
}

impl VllmInputs {
    /// Derive the KV cache.
    pub fn derive(&self) -> VllmMemory {
        let total_bytes = self.gpu_memory_mib as f64 * 1024.0 * 1024.0;
        let requested = (total_bytes * self.gpu_memory_utilization).ceil();
        let used = (self.weight_gib_per_gpu
            + self.non_torch_gib
            + self.activation_peak_gib
            + self.cuda_graph_gib)
            * GIB;
        let kv = requested - used;
        let block_bytes = self.kv_bytes_per_token * u64::from(self.block_size_tokens.max(1));
        let blocks = if kv > 0.0 && block_bytes > 0 {
            (kv.floor() as u64) / block_bytes
        } else {
            0
        };
        VllmMemory {
            inputs: self.clone(),
            requested_gib: requested / GIB,
            kv_gib: kv / GIB,
            num_blocks: blocks,
            kv_tokens: blocks * u64::from(self.block_size_tokens.max(1)),
            headroom_gib: (total_bytes - requested) / GIB,
            min_utilization_for_one_block: if total_bytes > 0.0 {
                (used + block_bytes as f64) / total_bytes
            } else {
                f64::INFINITY
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_budgets_a_fraction_of_total_memory() {
        // §4.2's example: Llama-3.1-8B on an H100, util 0.90, weights 14.99 GiB, activation
        // peak 1.2 GiB, non-torch 0.6 GiB, graphs 0.7 GiB, block 16: 27 746 blocks.
        let v = VllmInputs {
            gpu_memory_mib: 81_559,
            gpu_memory_utilization: 0.90,
            weight_gib_per_gpu: 14.99,
            non_torch_gib: 0.6,
            activation_peak_gib: 1.2,
            cuda_graph_gib: 0.7,
            kv_bytes_per_token: 131_072,
            block_size_tokens: 16,
        }
        .derive();
        assert!(
            (v.num_blocks as f64 - 27_746.0).abs() <= 2.0,
            "{}",
            v.num_blocks
        );
        assert_eq!(v.kv_tokens, v.num_blocks * 16);
        assert!(v.starts());
    }

    #[test]
    fn the_requested_budget_is_rounded_up_to_a_whole_byte() {
        // vLLM requests ceil(total × utilisation) bytes. A 1 MiB GPU at 1/2 + 2⁻²¹ requests
        // 2²⁰ × (1/2 + 2⁻²¹) = 524 288.5 B (exact in binary), rounded up to 524 289 B; with
        // nothing else in use that holds one block of 524 289 B, which 524 288 B would not.
        let v = VllmInputs {
            gpu_memory_mib: 1,
            gpu_memory_utilization: 0.5 + 0.5 / 1_048_576.0,
            weight_gib_per_gpu: 0.0,
            non_torch_gib: 0.0,
            activation_peak_gib: 0.0,
            cuda_graph_gib: 0.0,
            kv_bytes_per_token: 524_289,
            block_size_tokens: 1,
        }
        .derive();
        assert_eq!(v.requested_gib * GIB, 524_289.0);
        assert_eq!(v.num_blocks, 1);
    }

    #[test]
    fn vllm_without_room_for_a_block_refuses_and_names_the_setting_that_would_do() {
        // 80 GiB total; 70 GiB of weights + 2.5 GiB measured = 72.5 GiB used; one block of
        // 16 × 1 MiB = 16 MiB. At 0.90 (72 GiB requested) nothing is left; the smallest
        // utilisation with one block is (72.5 GiB + 16 MiB) / 80 GiB = 0.906445….
        let mut i = VllmInputs {
            gpu_memory_mib: 80 * 1024,
            gpu_memory_utilization: 0.90,
            weight_gib_per_gpu: 70.0,
            non_torch_gib: 0.6,
            activation_peak_gib: 1.2,
            cuda_graph_gib: 0.7,
            kv_bytes_per_token: 1 << 20,
            block_size_tokens: 16,
        };
        let v = i.derive();
        assert!(!v.starts());
        assert_eq!(v.num_blocks, 0);
        let want = (72.5 * 1024.0 + 16.0) / (80.0 * 1024.0);
        assert!((v.min_utilization_for_one_block - want).abs() < 1e-12);
        i.gpu_memory_utilization = want + 1e-9;
        assert_eq!(i.derive().num_blocks, 1);
    }
}
