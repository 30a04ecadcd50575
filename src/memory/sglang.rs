//! SGLang's KV budget (`shared/spec/engine-semantics.md` §1): the static fraction of the memory
//! free before the weights load, minus the weights, and whether the rest of the GPU holds what
//! SGLang allocates outside the static pool (see the module docs of [`super`]).

use serde::Serialize;

use super::need::{SglangNeed, SlackTerms};
use super::{GIB, MIB_PER_GIB};

/// What must fit in SGLang's slack `(1 − f) · M_pre`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum SlackNeed {
    /// Measured: free memory seen per GPU while serving at fraction `at_fraction` (e.g. the
    /// case study's "≈ 5 GB free per GPU at 0.85"). Then the memory used outside the pool is
    /// `(1 − at_fraction) · M_pre − free`.
    Observed {
        /// Free memory per GPU, GiB.
        free_gib: f64,
        /// The fraction it was seen at.
        at_fraction: f64,
    },
    /// Derived from the model and the engine settings, term by term ([`super::need`]).
    Derived(SglangNeed),
    /// SGLang's own reservation heuristic (0.5.23), when the model's shapes are unknown (no
    /// catalog model). It ignores the model and is conservative. SGLang sizes it against the
    /// GPU's total memory, so part of it — the CUDA context and communication buffers — is
    /// already in use before the weights load and is not in the slack.
    Heuristic(HeuristicReserve),
}

/// SGLang 0.5.23's guess of the memory outside the static pool, in MiB
/// (`arg_groups/memory_hook.py`), without its 10 GiB floor for large GPUs (a policy margin, not
/// an estimate of use).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeuristicReserve {
    /// Constant metadata: 512 MiB.
    pub constant_mib: f64,
    /// Activations of the largest prefill chunk: `max(chunk, 2048) × 1.5` MiB.
    pub activations_mib: f64,
    /// Large-TP buffers: `tp × pp / 8 × 1024` MiB.
    pub tp_buffers_mib: f64,
    /// Decode CUDA graphs (`max_bs × 2` MiB) and prefill graphs (1.5 GiB for MLA;
    /// `len(prefill batch sizes) × 8` MiB otherwise, where servesim assumes 52 sizes: that
    /// reproduces SGLang's published defaults to within 0.001).
    pub cuda_graphs_mib: f64,
}

impl HeuristicReserve {
    /// The heuristic for a prefill chunk of `chunk_tokens` (the caller passes
    /// `max_prefill_tokens` when chunking is off), TP `tp`, MLA or not, and the decode graph
    /// batch size.
    pub fn sglang(chunk_tokens: u64, tp: u32, mla: bool, graph_max_bs: u32) -> Self {
        HeuristicReserve {
            constant_mib: 512.0,
            activations_mib: chunk_tokens.max(2048) as f64 * 1.5,
            tp_buffers_mib: f64::from(tp) / 8.0 * 1024.0,
            cuda_graphs_mib: f64::from(graph_max_bs) * 2.0 + if mla { 1536.0 } else { 416.0 },
        }
    }

    /// The total, MiB.
    pub fn total_mib(&self) -> f64 {
        self.constant_mib + self.activations_mib + self.tp_buffers_mib + self.cuda_graphs_mib
    }
}

/// SGLang's defaults that depend on the GPU's memory (`server_args.py`, same thresholds in
/// v0.5.x and 0.5.23): `(chunked_prefill_size, decode CUDA-graph max batch size)`.
pub fn sglang_memory_bucket(gpu_mib: u64, tp: u32) -> (u32, u32) {
    let gib = gpu_mib as f64 / MIB_PER_GIB;
    let small_tp = tp < 4;
    if gib < 20.0 {
        (2048, 8)
    } else if gib < 35.0 {
        (4096, if small_tp { 48 } else { 160 })
    } else if gib < 60.0 {
        (4096, if small_tp { 32 } else { 160 })
    } else if gib < 160.0 {
        (8192, if small_tp { 256 } else { 512 })
    } else {
        (16384, 512)
    }
}

/// SGLang 0.5.23's default `mem_fraction_static` when the user gives none
/// (`handle_gpu_memory_settings`): `round((gpu − reserved) / gpu, 3)`, with the reservation
/// floored at 10 GiB on GPUs above 60 GiB, times the vision-model factor for multimodal models.
pub fn sglang_default_fraction(gpu_mib: u64, reserve: &HeuristicReserve, vlm_factor: f64) -> f64 {
    let gpu = gpu_mib as f64;
    let mut reserved = reserve.total_mib();
    if gpu > 60.0 * 1024.0 {
        reserved = reserved.max(10.0 * 1024.0);
    }
    let f = ((gpu - reserved) / gpu * 1000.0).round() / 1000.0;
    f * vlm_factor
}

/// Inputs of the SGLang derivation, per GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SglangInputs {
    /// `nvidia-smi` memory, MiB.
    pub gpu_memory_mib: u64,
    /// `M_pre`: free memory before the weights load, GiB.
    pub memory_before_weights_gib: f64,
    /// `W`: weights resident per GPU, GiB.
    pub weight_gib_per_gpu: f64,
    /// Bytes of KV per token per GPU (`cell_size`).
    pub kv_bytes_per_token: u64,
    /// KV page size (`--page-size`).
    pub page_size_tokens: u32,
    /// `mem_fraction_static`.
    pub mem_fraction_static: f64,
    /// What must fit in the slack.
    pub need: SlackNeed,
}

/// Whether the slack holds what it must.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// At least 10 % (and 0.5 GiB) more slack than needed.
    Safe,
    /// Enough, but with less than that margin.
    Tight,
    /// Less slack than needed: the server will likely run out of memory.
    Oom,
}

impl Verdict {
    /// `safe`, `tight` or `oom`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Safe => "safe",
            Verdict::Tight => "tight",
            Verdict::Oom => "oom",
        }
    }
}

/// The SGLang derivation, every term per GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SglangMemory {
    /// The inputs.
    pub inputs: SglangInputs,
    /// `M_pre · f`: the static budget (weights + KV pool), GiB.
    pub static_gib: f64,
    /// `rest = M_pre · f − W`: the KV pool, GiB (negative: the weights do not fit).
    pub kv_pool_gib: f64,
    /// `max_total_num_tokens` (0 when the pool is empty or negative).
    pub max_total_num_tokens: u64,
    /// `(1 − f) · M_pre`, GiB.
    pub slack_gib: f64,
    /// What the slack must hold, GiB.
    pub need_gib: f64,
    /// The terms of the need, when derived from the model.
    pub need_terms: Option<SlackTerms>,
    /// The verdict.
    pub verdict: Verdict,
    /// Largest fraction that still leaves the `safe` margin.
    pub largest_safe_fraction: f64,
    /// Above this fraction the slack is smaller than the need.
    pub oom_above_fraction: f64,
}

/// The safety margin: 10 % of the need, at least 0.5 GiB.
fn margin_gib(need: f64) -> f64 {
    (0.1 * need).max(0.5)
}

impl SglangInputs {
    /// The KV pool at fraction `f`, tokens: `floor(floor((M_pre · f − W) · 2^30) / cell / page) ·
    /// page`, 0 when the weights do not fit.
    fn pool_tokens(&self, f: f64) -> u64 {
        let rest = self.memory_before_weights_gib * f - self.weight_gib_per_gpu;
        let page = u64::from(self.page_size_tokens.max(1));
        if rest > 0.0 && self.kv_bytes_per_token > 0 {
            let bytes = (rest * GIB).floor() as u64;
            bytes / self.kv_bytes_per_token / page * page
        } else {
            0
        }
    }

    /// GiB that must live in the slack at fraction `f` (a derived need depends on the pool
    /// through SGLang's default `max_running_requests`), and its terms when derived.
    fn need_at(&self, f: f64) -> (f64, Option<SlackTerms>) {
        match &self.need {
            SlackNeed::Observed {
                free_gib,
                at_fraction,
            } => (
                ((1.0 - at_fraction) * self.memory_before_weights_gib - free_gib).max(0.0),
                None,
            ),
            SlackNeed::Heuristic(h) => {
                let before_weights =
                    self.gpu_memory_mib as f64 / MIB_PER_GIB - self.memory_before_weights_gib;
                (
                    (h.total_mib() / MIB_PER_GIB - before_weights.max(0.0)).max(0.0),
                    None,
                )
            }
            SlackNeed::Derived(d) => {
                let terms = d.terms(self.pool_tokens(f));
                (terms.total_gib(), Some(terms))
            }
        }
    }

    /// GiB that must live in the slack.
    pub fn need_gib(&self) -> f64 {
        self.need_at(self.mem_fraction_static).0
    }

    /// The largest fraction whose slack holds the need plus `margin(need)`: `1 − (need +
    /// margin) / M_pre`, iterated because the need moves with the fraction.
    fn largest_fraction(&self, margin: impl Fn(f64) -> f64) -> f64 {
        let m = self.memory_before_weights_gib;
        let mut f = self.mem_fraction_static;
        for _ in 0..16 {
            let need = self.need_at(f).0;
            let next = (1.0 - (need + margin(need)) / m).clamp(0.0, 1.0);
            if (next - f).abs() < 1e-12 {
                break;
            }
            f = next;
        }
        f
    }

    /// Derive the pool and the verdict.
    pub fn derive(&self) -> SglangMemory {
        let m = self.memory_before_weights_gib;
        let f = self.mem_fraction_static;
        let static_gib = m * f;
        let rest = static_gib - self.weight_gib_per_gpu;
        let tokens = self.pool_tokens(f);
        let slack = (1.0 - f) * m;
        let (need, need_terms) = self.need_at(f);
        let verdict = if slack < need {
            Verdict::Oom
        } else if slack < need + margin_gib(need) {
            Verdict::Tight
        } else {
            Verdict::Safe
        };
        SglangMemory {
            inputs: self.clone(),
            static_gib,
            kv_pool_gib: rest,
            max_total_num_tokens: tokens,
            slack_gib: slack,
            need_gib: need,
            need_terms,
            verdict,
            largest_safe_fraction: self.largest_fraction(margin_gib),
            oom_above_fraction: self.largest_fraction(|_| 0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case_study(f: f64) -> SglangInputs {
        SglangInputs {
            gpu_memory_mib: 97_887,
            memory_before_weights_gib: 93.6,
            weight_gib_per_gpu: 71.957,
            kv_bytes_per_token: 70_272,
            page_size_tokens: 1,
            mem_fraction_static: f,
            need: SlackNeed::Observed {
                free_gib: 5.0e9 / GIB,
                at_fraction: 0.85,
            },
        }
    }

    #[test]
    fn the_pool_is_the_static_fraction_of_free_memory_minus_the_weights() {
        let m = case_study(0.85).derive();
        // 0.85 × 93.6 − 71.957 = 7.603 GiB = 8 163 659 087 B → / 70 272 = 116 172 tokens.
        assert!((m.kv_pool_gib - 7.603).abs() < 1e-9);
        assert_eq!(
            m.max_total_num_tokens,
            (7.603 * GIB).floor() as u64 / 70_272
        );
        assert!((m.max_total_num_tokens as f64 / 116_171.0 - 1.0).abs() < 0.001);
    }

    #[test]
    fn raising_the_fraction_adds_delta_times_free_memory_not_a_ratio() {
        let a = case_study(0.85).derive();
        let b = case_study(0.95).derive();
        assert!((b.kv_pool_gib - a.kv_pool_gib - 0.10 * 93.6).abs() < 1e-9);
        assert!(b.max_total_num_tokens as f64 / a.max_total_num_tokens as f64 > 2.0);
    }

    #[test]
    fn the_case_study_fraction_095_runs_out_of_memory() {
        // Used outside the pool at 0.85: 0.15 × 93.6 − 4.657 = 9.383 GiB; at 0.95 the slack is
        // 4.68 GiB.
        let m = case_study(0.95).derive();
        assert_eq!(m.verdict, Verdict::Oom);
        assert!((m.need_gib - (0.15 * 93.6 - 5.0e9 / GIB)).abs() < 1e-9);
        assert!((m.oom_above_fraction - 0.8997).abs() < 0.001);
        assert!(m.largest_safe_fraction > 0.88 && m.largest_safe_fraction < 0.90);
        assert_eq!(case_study(0.85).derive().verdict, Verdict::Safe);
    }

    #[test]
    fn pages_floor_the_pool() {
        let mut i = case_study(0.85);
        i.page_size_tokens = 64;
        let m = i.derive();
        assert_eq!(m.max_total_num_tokens % 64, 0);
        assert!(m.max_total_num_tokens <= case_study(0.85).derive().max_total_num_tokens);
    }

    #[test]
    fn weights_larger_than_the_budget_leave_no_pool() {
        let mut i = case_study(0.70);
        i.weight_gib_per_gpu = 80.0;
        let m = i.derive();
        assert!(m.kv_pool_gib < 0.0);
        assert_eq!(m.max_total_num_tokens, 0);
    }

    #[test]
    fn sglang_default_fractions_match_the_published_table() {
        // engine-semantics.md §1.4, 0.5.23 columns: (GPU MiB, TP, MLA, expected).
        let rows = [
            (97_887, 8, true, 0.833),
            (81_559, 1, true, 0.816),
            (81_559, 1, false, 0.830),
            (81_559, 8, false, 0.812),
            (143_771, 8, false, 0.893),
            (143_771, 1, true, 0.896),
            (97_887, 1, false, 0.858),
            (183_359, 1, false, 0.854),
            (183_359, 8, true, 0.844),
        ];
        for (mib, tp, mla, want) in rows {
            let (chunk, bs) = sglang_memory_bucket(mib, tp);
            let h = HeuristicReserve::sglang(u64::from(chunk), tp, mla, bs);
            let got = sglang_default_fraction(mib, &h, 1.0);
            // MLA rows are exact; MHA rows depend on the number of prefill graph sizes, which
            // servesim estimates.
            let tol = if mla { 1e-9 } else { 0.0011 };
            assert!(
                (got - want).abs() <= tol,
                "{mib} MiB TP{tp} mla={mla}: {got} vs {want}"
            );
        }
        assert_eq!(sglang_memory_bucket(183_359, 1), (16384, 512));
        assert_eq!(sglang_memory_bucket(46_068, 1), (4096, 32));
    }

    #[test]
    fn a_prefill_chunk_below_2048_tokens_is_reserved_as_2048() {
        // SGLang sizes the activations for at least 2048 tokens, 1.5 MiB each: a chunk of 1024
        // reserves 2048 × 1.5 = 3072 MiB, the same as a chunk of 2048; 4096 reserve 6144 MiB.
        assert_eq!(
            HeuristicReserve::sglang(1024, 1, false, 8).activations_mib,
            3072.0
        );
        assert_eq!(
            HeuristicReserve::sglang(2048, 1, false, 8).activations_mib,
            3072.0
        );
        assert_eq!(
            HeuristicReserve::sglang(4096, 1, false, 8).activations_mib,
            6144.0
        );
    }

    #[test]
    fn a_gpu_above_60_gib_reserves_at_least_10_gib_for_the_default_fraction() {
        // An H100 (81 559 MiB) with a 2048-token chunk at TP 1 and decode graphs up to 256:
        // 512 + 2048 × 1.5 + 1/8 × 1024 + (256 × 2 + 416) = 512 + 3072 + 128 + 928 = 4640 MiB,
        // below the 10 GiB floor, so the default is round((81 559 − 10 240) / 81 559, 3) =
        // round(0.87445…, 3) = 0.874 — not round((81 559 − 4640) / 81 559, 3) = 0.943.
        let h = HeuristicReserve::sglang(2048, 1, false, 256);
        assert_eq!(h.total_mib(), 4640.0);
        assert_eq!(sglang_default_fraction(81_559, &h, 1.0), 0.874);
        // A 48 GB GPU (46 068 MiB) has no floor: round((46 068 − 4640) / 46 068, 3) =
        // round(0.89928…, 3) = 0.899.
        assert_eq!(sglang_default_fraction(46_068, &h, 1.0), 0.899);
    }

    #[test]
    fn more_free_memory_seen_than_the_slack_is_a_need_of_zero_not_less() {
        // 10 GiB seen free at 0.90 of M_pre = 80 GiB, whose slack is only 0.1 × 80 = 8 GiB:
        // nothing measurable was used outside the pool, so the need is 0 (not 8 − 10 = −2 GiB),
        // the margin is its floor of 0.5 GiB, the largest safe fraction 1 − 0.5 / 80 = 0.99375
        // and nothing below 1 runs out of memory.
        let m = SglangInputs {
            gpu_memory_mib: 81_920,
            memory_before_weights_gib: 80.0,
            weight_gib_per_gpu: 20.0,
            kv_bytes_per_token: 1000,
            page_size_tokens: 1,
            mem_fraction_static: 0.9,
            need: SlackNeed::Observed {
                free_gib: 10.0,
                at_fraction: 0.9,
            },
        }
        .derive();
        assert_eq!(m.need_gib, 0.0);
        assert_eq!(m.verdict, Verdict::Safe);
        assert!((m.largest_safe_fraction - 0.99375).abs() < 1e-12, "{m:?}");
        assert_eq!(m.oom_above_fraction, 1.0);
    }

    #[test]
    fn sglangs_own_default_fraction_is_never_out_of_memory_by_its_own_heuristic() {
        for (mib, tp, mla) in [
            (81_559u64, 4u32, false),
            (143_771, 8, false),
            (97_887, 8, true),
            (46_068, 1, false),
        ] {
            let (chunk, bs) = sglang_memory_bucket(mib, tp);
            let h = HeuristicReserve::sglang(u64::from(chunk), tp, mla, bs);
            let f = sglang_default_fraction(mib, &h, 1.0);
            let m = SglangInputs {
                gpu_memory_mib: mib,
                memory_before_weights_gib: mib as f64 / 1024.0 - if tp > 1 { 2.0 } else { 1.0 },
                weight_gib_per_gpu: 10.0,
                kv_bytes_per_token: 1000,
                page_size_tokens: 1,
                mem_fraction_static: f,
                need: SlackNeed::Heuristic(h),
            }
            .derive();
            assert_ne!(m.verdict, Verdict::Oom, "{mib} MiB TP{tp}: {m:?}");
        }
    }
}
