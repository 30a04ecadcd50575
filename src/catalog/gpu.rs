//! GPUs: memory, bandwidth, compute peaks, interconnect and an indicative price.

use serde::{Deserialize, Serialize};

use super::positive_and_finite;

/// One GPU model: memory, bandwidth, compute peaks, interconnect and an indicative price.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// Key used in scenarios, lowercase and hyphenated (`"h100"`, `"rtx-pro-6000"`).
    pub name: String,
    /// Other accepted spellings (`"h100-sxm"`); matched case-insensitively like `name`.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Human-readable name for reports.
    pub display: String,
    /// Total memory as `nvidia-smi --query-gpu=memory.total` reports it, in MiB.
    pub memory_mib: u64,
    /// Peak memory bandwidth in GB/s (10⁹ B/s).
    pub hbm_bandwidth_gb_per_s: f64,
    /// Dense (no 2:4 sparsity) BF16 tensor throughput, TFLOP/s.
    pub bf16_dense_tflops: f64,
    /// Dense FP8 tensor throughput, TFLOP/s; `None` when the GPU has no FP8 tensor cores.
    #[serde(default)]
    pub fp8_dense_tflops: Option<f64>,
    /// GPU-to-GPU link kind (`"nvlink4"`, `"pcie5"`, `"infinity-fabric"`).
    pub interconnect: String,
    /// GPU-to-GPU bandwidth per GPU and per direction, GB/s.
    pub interconnect_gb_per_s: f64,
    /// Estimated latency of one small (decode-sized) all-reduce across the node's GPUs, µs.
    pub collective_latency_us: f64,
    /// Indicative on-demand price per GPU-hour in US dollars; a default the user overrides.
    pub price_usd_per_hour: f64,
    /// Where the figures come from.
    #[serde(default)]
    pub source: String,
}

impl Gpu {
    /// Total memory in bytes (`memory_mib × 2²⁰`).
    pub fn memory_bytes(&self) -> u64 {
        self.memory_mib << 20
    }

    /// The first thing wrong with this entry, if any.
    pub(super) fn problem(&self) -> Option<String> {
        if self.name.trim().is_empty() {
            return Some("name must not be empty".into());
        }
        if self.display.trim().is_empty() {
            return Some("display must not be empty".into());
        }
        if self.memory_mib == 0 {
            return Some("memory_mib must be > 0".into());
        }
        if self.fp8_dense_tflops == Some(0.0) {
            return Some(
                "fp8_dense_tflops must be > 0; leave it out when the GPU has no FP8 tensor cores"
                    .into(),
            );
        }
        let mut positive = vec![
            ("hbm_bandwidth_gb_per_s", self.hbm_bandwidth_gb_per_s),
            ("bf16_dense_tflops", self.bf16_dense_tflops),
            ("interconnect_gb_per_s", self.interconnect_gb_per_s),
            ("collective_latency_us", self.collective_latency_us),
        ];
        positive.extend(self.fp8_dense_tflops.map(|t| ("fp8_dense_tflops", t)));
        positive_and_finite(
            &positive,
            &[("price_usd_per_hour", self.price_usd_per_hour)],
        )
    }
}
