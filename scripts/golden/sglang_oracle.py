#!/usr/bin/env python3
# --- servesim: a copy of the shared oracle ../shared/oracle/sglang_oracle.py (documented in
# --- README-sglang.md beside this file), UNCHANGED except for these four comment lines.
# --- sha256 of the original file: 905873c3b417e00abc95522cc38242fb4800097cf91d5411eaa649998bc6df7d
# --- Driven by scripts/golden/record.py, which regenerates tests/fixtures/golden/.
"""SGLang scheduling oracle: drive SGLang's real scheduler code (sglang==0.5.23, PyPI) on a
CPU-only machine with fake model outputs and a simulated clock.

What runs is SGLang's own code for every scheduling decision of the non-overlapped event loop
(Scheduler.event_loop_normal): Scheduler.get_next_batch_to_run (merge of the last prefill batch,
get_new_batch_prefill / _get_new_batch_prefill_raw with the real PrefillAdder and SchedulePolicy,
update_running_batch with check_decode_mem / retract_decode / NewTokenRatioTracker), the real
Req / ScheduleBatch (init_new, prepare_for_extend, prepare_for_decode, filter_batch, merge_batch),
the real ReqToTokenPool and TokenToKVPoolAllocator on device "cpu", the real tree cache that
SGLang builds with --disable-radix-cache (UnifiedRadixCache(disable=True)), the real
init_req_max_new_tokens / _add_request_to_queue / is_fully_idle, and the real
SchedulerBatchResultProcessor.process_batch_result_{prefill,decode} (finish checks, KV release).

Glue written here (not SGLang code): building the Scheduler object with object.__new__ and the
attributes its methods read; request intake (Req construction instead of the ZMQ/tokenizer path);
a fake run_batch (no model: every request in a batch gets one token, EOS when it reaches its target
output length); the process_batch_result wrapper (metrics/streaming stubs); on_idle reduced to its
one scheduling effect (new_token_ratio reset when fully idle); the simulated clock, the step-time
model and the closed-/open-loop client. See README-sglang.md.

Shared prompt prefixes: a workload (CSV or JSON) may carry the optional columns prefix_group and
prefix_tokens; requests of one group then share their first prefix_tokens token ids, so that with
--enable-radix-cache SGLang's real radix cache finds them (cached tokens per request and per step are
then written too). Without those columns the behaviour and every output are unchanged.

Usage: see --help.  Writes steps.csv, requests.csv, workload.csv (the workload actually used) and
summary.json into --out.
"""
import argparse
import csv
import hashlib
import io
import json
import logging
import math
import os
import random
import sys
import time
import warnings
from array import array
from types import SimpleNamespace

SGLANG_VERSION_EXPECTED = "0.5.23"
LATER_ARG_DEFAULTS = {"gen_prefix_groups": "", "gen_prefix_none": 0.0}
EOS_TOKEN = 2
NORMAL_TOKEN = 7
VOCAB = 152064  # only used for token ids / vocab bound checks


# ----------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Drive SGLang's real scheduler (CPU, fake model, simulated clock).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    w = p.add_argument_group("workload (either --workload FILE or the --gen-* generator)")
    w.add_argument("--workload", help="CSV with columns id,arrival,prompt_tokens,output_tokens,"
                   "max_new_tokens,ignore_eos (arrival ignored in closed loop; ignore_eos 0/1/true/false), "
                   "optionally prefix_group,prefix_tokens (shared prompt prefixes); or JSON: a list of "
                   "objects with the same keys, or {\"requests\": [...]}")
    w.add_argument("--gen-requests", type=int, default=300)
    w.add_argument("--gen-prompt-mean", type=float, default=250.0)
    w.add_argument("--gen-prompt-cv", type=float, default=0.3, help="0 = constant")
    w.add_argument("--gen-output-mean", type=float, default=800.0)
    w.add_argument("--gen-output-cv", type=float, default=0.6, help="0 = constant")
    w.add_argument("--gen-max-new-tokens", type=int, default=4096)
    w.add_argument("--gen-ignore-eos", action="store_true")
    w.add_argument("--gen-rate", type=float, default=0.0,
                   help="open loop: Poisson arrivals at this rate (req/s); 0 = all at t=0")
    w.add_argument("--gen-prefix-groups", default="",
                   help="NAME:TOKENS[,NAME:TOKENS...]: shared prompt prefixes; each generated request "
                        "joins one group (uniformly at random) and its prompt is TOKENS plus the drawn "
                        "length; '' = no groups (and no prefix columns)")
    w.add_argument("--gen-prefix-none", type=float, default=0.0,
                   help="with --gen-prefix-groups: fraction of generated requests without a group")
    w.add_argument("--seed", type=int, default=1)

    c = p.add_argument_group("client")
    c.add_argument("--concurrency", type=int, default=0,
                   help="closed loop with N slots (all filled at t=0, next request sent when one "
                        "finishes); 0 = open loop using the workload's arrival times")
    c.add_argument("--client-latency", type=float, default=0.0,
                   help="seconds from a finish to the next closed-loop request reaching the scheduler")

    e = p.add_argument_group("engine (SGLang server args)")
    e.add_argument("--max-total-tokens", type=int, default=20000, help="KV pool size in tokens")
    e.add_argument("--max-running-requests", type=int, default=64)
    e.add_argument("--chunked-prefill-size", type=int, default=8192, help="<=0 disables chunking")
    e.add_argument("--max-prefill-tokens", type=int, default=16384)
    e.add_argument("--schedule-policy", default="fcfs",
                   help="fcfs | lpm | dfs-weight | lof | random | ... (lpm/dfs-weight fall back to "
                        "fcfs when the radix cache is disabled, as in SGLang)")
    e.add_argument("--page-size", type=int, default=1, help="only 1 is supported")
    e.add_argument("--context-length", type=int, default=0,
                   help="model context length (0 = max_total_tokens + 8, i.e. not binding)")
    e.add_argument("--schedule-conservativeness", type=float, default=1.0)
    e.add_argument("--enable-radix-cache", action="store_true",
                   help="use SGLang's radix cache (UnifiedRadixCache) instead of the disabled one; "
                        "prompts share token ids only through the workload's prefix_group / "
                        "prefix_tokens columns (otherwise every prompt is unique)")
    e.add_argument("--enable-mixed-chunk", action="store_true")

    t = p.add_argument_group("step-time model (seconds)")
    t.add_argument("--decode-a", type=float, default=0.010, help="decode: a")
    t.add_argument("--decode-b", type=float, default=0.0001, help="decode: b * batch_size")
    t.add_argument("--decode-c", type=float, default=0.0, help="decode: c * kv_tokens (sum of seq lens)")
    t.add_argument("--prefill-p0", type=float, default=0.010, help="prefill: p0")
    t.add_argument("--prefill-p1", type=float, default=0.00005, help="prefill: p1 * extend tokens")

    o = p.add_argument_group("run / output")
    o.add_argument("--out", default="oracle_out", help="output directory")
    o.add_argument("--max-steps", type=int, default=0, help="stop after this many forward steps (0 = no limit)")
    o.add_argument("--horizon", type=float, default=0.0, help="stop at this simulated time (0 = no limit)")
    o.add_argument("--quiet", action="store_true")
    o.add_argument("--sglang-log-level", default="ERROR")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------------------------
# Workload
# ----------------------------------------------------------------------------------------------
def _lognormal(rng, mean, cv):
    if cv <= 0:
        return mean
    s2 = math.log(1.0 + cv * cv)
    return rng.lognormvariate(math.log(mean) - s2 / 2.0, math.sqrt(s2))


def _bool(x):
    return str(x).strip().lower() in ("1", "true", "yes", "y", "t")


def _read_rows(path):
    """CSV rows (header row), or JSON: a list of objects or {"requests": [...]}.
    Returns (rows, declares_prefix_columns)."""
    with open(path, newline="") as f:
        text = f.read()
    if path.endswith(".json") or text.lstrip().startswith(("[", "{")):
        data = json.loads(text)
        if isinstance(data, dict):
            data = data["requests"]
        rows = list(data)
        has_prefix = any(k in row for row in rows for k in PREFIX_COLUMNS)
    else:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows = list(reader)
        has_prefix = any(k in (reader.fieldnames or []) for k in PREFIX_COLUMNS)
    return rows, has_prefix


def load_or_generate_workload(a):
    """Returns (requests, prefix_mode). prefix_mode: the workload declares prefix_group /
    prefix_tokens columns (then the prefix token-id scheme and the cache columns are used)."""
    reqs = []
    prefix_mode = False
    if a.workload:
        rows, prefix_mode = _read_rows(a.workload)
        for row in rows:
            arr = row.get("arrival", "")
            r = dict(
                id=str(row["id"]),
                arrival=float(arr) if arr not in ("", None, "closed") else 0.0,
                prompt_tokens=int(row["prompt_tokens"]),
                output_tokens=int(row["output_tokens"]),
                max_new_tokens=int(row["max_new_tokens"]),
                ignore_eos=_bool(row.get("ignore_eos", "0")),
            )
            if prefix_mode:
                r["prefix_group"], r["prefix_tokens"] = parse_prefix_fields(row, r["id"])
            reqs.append(r)
    else:
        rng = random.Random(a.seed)
        groups = parse_gen_prefix_groups(a.gen_prefix_groups)
        prefix_mode = bool(groups)
        t = 0.0
        for i in range(a.gen_requests):
            if a.gen_rate > 0:
                t += rng.expovariate(a.gen_rate)
            prompt = max(1, int(round(_lognormal(rng, a.gen_prompt_mean, a.gen_prompt_cv))))
            out = max(1, int(round(_lognormal(rng, a.gen_output_mean, a.gen_output_cv))))
            reqs.append(dict(id=str(i), arrival=t, prompt_tokens=prompt, output_tokens=out,
                             max_new_tokens=a.gen_max_new_tokens, ignore_eos=a.gen_ignore_eos))
            if groups:   # (drawn after the lengths: without groups the stream is unchanged)
                g, p = ("", 0) if rng.random() < a.gen_prefix_none else rng.choice(groups)
                reqs[-1].update(prefix_group=g, prefix_tokens=p, prompt_tokens=prompt + p)
    if len({r["id"] for r in reqs}) != len(reqs):
        raise SystemExit("error: workload ids must be unique")
    for r in reqs:
        if r["prompt_tokens"] < 1 or r["output_tokens"] < 1 or r["max_new_tokens"] < 1:
            raise SystemExit(f"error: request {r['id']}: prompt/output/max_new_tokens must be >= 1")
    if prefix_mode:
        validate_prefix_groups(reqs, "prompt_tokens")
    return reqs, prefix_mode


def parse_gen_prefix_groups(spec):
    """'sys:2000,doc:500' -> [('sys', 2000), ('doc', 500)]"""
    groups = []
    for part in filter(None, (x.strip() for x in spec.split(","))):
        name, _, n = part.rpartition(":")
        try:
            n = int(n)
        except ValueError:
            n = 0
        if not name or n < 1:
            raise SystemExit(f"error: prefix group {part!r}: expected NAME:TOKENS with TOKENS >= 1")
        groups.append((name, n))
    if len({g for g, _ in groups}) != len(groups):
        raise SystemExit("error: prefix group names must be unique")
    return groups


# ----------------------------------------------------------------------------------------------
# Shared prompt prefixes (the same code is in vllm_oracle.py, so a workload gets the same ids there)
# ----------------------------------------------------------------------------------------------
# Token-id layout used when the workload has prefix_group / prefix_tokens columns:
#   ids < 16           not used in prompts (EOS 2 and the fake output token 7 are there);
#   [16, 16 + 4096)    first token of a group's shared prefix: one slot per group, from a SHA-256 of
#                      the group name (collisions resolved by probing, in sorted name order);
#   [4112, 152064)     first token of a request's own part: 4112 + the request's workload index.
# The remaining ids of a prefix / own part are arithmetic sequences seeded by the same hash / index.
# So two prompts agree at position 0 only if they belong to the same group, and two members of a
# group agree on exactly the group's prefix_tokens ids: position prefix_tokens holds each one's own
# head token, which no other request has. Prompts without a group start with their own head token.
PREFIX_COLUMNS = ("prefix_group", "prefix_tokens")
PFX_ID_BASE = 16
PFX_ID_SPACE = 152064
PFX_GROUP_SLOTS = 4096
PFX_REQ_BASE = PFX_ID_BASE + PFX_GROUP_SLOTS


def parse_prefix_fields(row, rid):
    g = row.get("prefix_group")
    g = "" if g is None else str(g).strip()
    p = row.get("prefix_tokens")
    if p is None or (isinstance(p, str) and p.strip() == ""):
        p = None
    else:
        try:
            p = int(p)
        except (TypeError, ValueError):
            raise SystemExit(f"error: request {rid}: prefix_tokens {p!r} is not an integer")
    return g, p


def validate_prefix_groups(reqs, prompt_key):
    """Every row of a group must give the same prefix_tokens, 1 <= prefix_tokens <= its prompt;
    a row without a group must not give a positive prefix_tokens. Normalises None to 0."""
    first = {}
    for r in reqs:
        g, p = r["prefix_group"], r["prefix_tokens"]
        if not g:
            if p:
                raise SystemExit(f"error: request {r['id']}: prefix_tokens {p} without a prefix_group")
            r["prefix_tokens"] = 0
            continue
        if p is None:
            raise SystemExit(f"error: request {r['id']}: prefix_group {g!r} without prefix_tokens")
        if p < 1:
            raise SystemExit(f"error: request {r['id']}: prefix_tokens must be >= 1 (got {p})")
        if p > r[prompt_key]:
            raise SystemExit(f"error: request {r['id']}: prefix_tokens {p} > prompt_tokens "
                             f"{r[prompt_key]}")
        p0, rid0 = first.setdefault(g, (p, r["id"]))
        if p != p0:
            raise SystemExit(f"error: prefix_group {g!r}: request {r['id']} has prefix_tokens {p}, "
                             f"request {rid0} has {p0} (must be the same for every row of a group)")
    if len(first) > PFX_GROUP_SLOTS:
        raise SystemExit(f"error: {len(first)} prefix groups, at most {PFX_GROUP_SLOTS} supported")
    if len(reqs) > PFX_ID_SPACE - PFX_REQ_BASE:
        raise SystemExit(f"error: {len(reqs)} requests, at most {PFX_ID_SPACE - PFX_REQ_BASE} "
                         "supported with prefix columns")


class PrefixTokenIds:
    """Deterministic prompt token ids for a workload with prefix_group / prefix_tokens."""

    def __init__(self, reqs):
        span = PFX_ID_SPACE - PFX_ID_BASE
        groups = {r["prefix_group"]: r["prefix_tokens"] for r in reqs if r["prefix_group"]}
        used = set()
        self.group_ids = {}
        self.group_head = {}
        for name in sorted(groups):
            d = hashlib.sha256(name.encode("utf-8")).digest()
            h1, h2 = int.from_bytes(d[:8], "big"), int.from_bytes(d[8:16], "big")
            slot = h1 % PFX_GROUP_SLOTS
            while slot in used:
                slot = (slot + 1) % PFX_GROUP_SLOTS
            used.add(slot)
            self.group_head[name] = PFX_ID_BASE + slot
            self.group_ids[name] = [PFX_ID_BASE + slot] + [
                PFX_ID_BASE + (h2 + 7919 * j) % span for j in range(1, groups[name])]

    @staticmethod
    def own_ids(idx, n):
        if n <= 0:
            return []
        span = PFX_ID_SPACE - PFX_ID_BASE
        base = idx * 1000003
        return [PFX_REQ_BASE + idx] + [PFX_ID_BASE + (base + 7919 * j) % span for j in range(1, n)]

    def prompt(self, idx, prompt_tokens, group, prefix_tokens):
        if group:
            return self.group_ids[group] + self.own_ids(idx, prompt_tokens - prefix_tokens)
        return self.own_ids(idx, prompt_tokens)


# ----------------------------------------------------------------------------------------------
# SGLang bring-up
# ----------------------------------------------------------------------------------------------
def import_sglang(log_level):
    warnings.filterwarnings("ignore")
    os.environ.setdefault("SGLANG_LOG_LEVEL", log_level)
    # Same helper SGLang's CPU unit tests use: stub sgl_kernel (CUDA-only) if it cannot load.
    from sglang.test.test_utils import maybe_stub_sgl_kernel
    maybe_stub_sgl_kernel()
    import sglang
    if sglang.__version__ != SGLANG_VERSION_EXPECTED:
        print(f"warning: sglang {sglang.__version__} installed, oracle written for "
              f"{SGLANG_VERSION_EXPECTED}", file=sys.stderr)
    logging.getLogger("sglang").setLevel(getattr(logging, log_level.upper(), logging.ERROR))
    return sglang.__version__


class _Stub:
    """Accepts any attribute access / call and does nothing (metrics, streaming, publishing)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __getattr__(self, name):
        return _Stub()

    def __call__(self, *a, **kw):
        return None

    def __bool__(self):
        return False


class OutputSink:
    """Stands in for SchedulerOutputStreamer (which would send to the detokenizer over ZMQ)."""

    def stream_output(self, reqs, return_logprob=False, skip_req=None, **kw):
        pass

    def _stream_output_generation(self, *a, **kw):
        pass

    def __getattr__(self, name):
        return _Stub()


class MetricsSink(_Stub):
    """Stands in for SchedulerMetricsReporter; keeps num_retracted_reqs, which the real
    update_running_batch writes after a retraction."""

    def __init__(self):
        super().__init__(enable_metrics=False, num_retracted_reqs=0, num_generated_tokens=0,
                         forward_ct_decode=0, recent_cache_hit_rate=0.0)


def build_scheduler(a):
    import torch
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.runtime_context import (
        SpawnRanks, publish, reset_context, get_schedule, get_memory, get_lora, get_disagg,
        get_spec, get_serving,
    )
    from sglang.srt.environ import envs

    if a.page_size != 1:
        raise SystemExit("error: only --page-size 1 is supported (TokenToKVPoolAllocator)")
    context_len = a.context_length or (a.max_total_tokens + 8)
    chunked = a.chunked_prefill_size if a.chunked_prefill_size > 0 else -1
    sa = ServerArgs(
        model_path="dummy", device="cpu", page_size=1,
        chunked_prefill_size=chunked, max_prefill_tokens=a.max_prefill_tokens,
        max_running_requests=a.max_running_requests, max_total_tokens=a.max_total_tokens,
        schedule_policy=a.schedule_policy, schedule_conservativeness=a.schedule_conservativeness,
        disable_radix_cache=not a.enable_radix_cache, disable_overlap_schedule=True,
        enable_mixed_chunk=a.enable_mixed_chunk, context_length=context_len,
    )
    reset_context()
    publish(sa, role="scheduler", ranks=SpawnRanks(world_rank=0, dp_rank=None))

    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.mem_cache.memory_pool import ReqToTokenPool, MHATokenToKVPool
    from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.registry import TreeCacheBuildContext, create_tree_cache
    from sglang.srt.managers.scheduler_components.dp_attn import SchedulerDPAttnAdapter
    from sglang.srt.managers.scheduler_components.batch_result_processor import (
        SchedulerBatchResultProcessor,
    )
    from sglang.srt.managers.scheduler_components.logprob_result_processor import (
        SchedulerLogprobResultProcessor,
    )
    from sglang.srt.beam_search.coordinator import BeamCoordinator

    s = Scheduler.__new__(Scheduler)

    # --- the "parse args" block of Scheduler.__init__ (values read from the published config) ---
    s.forward_ct = 0
    s.processed_tokens_counter = 0
    s.cur_batch_for_debug = None
    s.server_args = sa
    s.schedule_policy = get_schedule().schedule_policy
    s.enable_priority_scheduling = get_schedule().enable_priority_scheduling
    s.abort_on_priority_when_disabled = get_schedule().abort_on_priority_when_disabled
    s.schedule_low_priority_values_first = get_schedule().schedule_low_priority_values_first
    s.priority_scheduling_preemption_threshold = get_schedule().priority_scheduling_preemption_threshold
    s.enable_lora = get_lora().enable_lora
    s.enable_lora_overlap_loading = get_lora().enable_lora_overlap_loading
    s.enable_overlap = False
    s.enable_overlap_mlx = False
    s.enable_pdmux = False
    s.spec_algorithm = SpeculativeAlgorithm.from_string(get_spec().speculative_algorithm)
    s.page_size = get_schedule().page_size
    s.enable_hierarchical_cache = get_memory().enable_hierarchical_cache
    s.enable_lmcache = get_memory().enable_lmcache
    s.enable_session_radix_cache = get_memory().enable_session_radix_cache
    s.enable_hicache_storage = get_memory().hicache_storage_backend is not None
    s.enable_unified_cache_external_linker = get_memory().enable_unified_cache_external_linker
    s.max_new_tokens_limit = envs.SGLANG_MAX_NEW_TOKENS_LIMIT.get()
    s.enable_hisparse = get_memory().enable_hisparse
    s.attn_dp_enabled = False
    s.enable_unified_memory = get_memory().enable_unified_memory
    s.disaggregation_mode = DisaggregationMode.NULL
    s.is_generation = True
    s.require_mlp_sync = False
    s.enable_fpm = False
    s.draft_worker = None
    s.dllm_config = None
    s.truncation_align_size = None
    s.hisparse_coordinator = None
    s.decode_offload_manager = None
    s.lora_drainer = None
    s.lora_overlap_loader = None
    s.future_map = None
    s.enable_skip_finishing_decode = False

    # --- model config / worker info (what TpModelWorker.get_worker_info would report) ---
    s.model_config = SimpleNamespace(
        vocab_size=VOCAB, context_len=context_len, is_multimodal=False,
        is_encoder_decoder=False, hf_eos_token_id={EOS_TOKEN}, num_key_value_heads=1,
        is_generation=True, model_impl="auto", hf_config=SimpleNamespace(architectures=["Fake"]),
        quantization=None, think_end_ids=None, self_opened_think_start_ids=None,
    )
    # A native (non-Transformers-backend) model: init_chunked_prefill asks for the resolved impl.
    from sglang.srt.configs.model_config import ModelImpl
    s.model_config._resolved_model_impl = ModelImpl.SGLANG
    max_total = a.max_total_tokens
    # kv_cache_configurator.resolve_max_num_reqs: min(requested, token_capacity // 2)
    max_running = min(a.max_running_requests, max_total // 2)
    s.max_total_num_tokens = max_total
    s.max_prefill_tokens = get_schedule().max_prefill_tokens
    s.max_running_requests = max_running
    s.max_queued_requests = get_schedule().max_queued_requests
    s.max_req_len = min(context_len - 1, max_total - 1)          # TpModelWorker.get_worker_info
    s.max_req_input_len = s.max_req_len - 5
    s.device = "cpu"
    from sglang.srt.runtime_context import get_context, get_parallel
    if not get_parallel().pp_max_micro_batch_size:
        get_context().override("scheduler.pp_max_micro_batch_size_default",
                               pp_max_micro_batch_size=max(max_running // get_parallel().pp_size, 1))
    s.min_free_slots_delayer = None
    s.tp_worker = SimpleNamespace(model_runner=SimpleNamespace(
        attn_backend=SimpleNamespace(), prefill_aware_swa=False))
    s.model_worker = s.tp_worker

    # --- memory pools and tree cache: SGLang's real classes on device "cpu" ---
    s.req_to_token_pool = ReqToTokenPool(size=max_running, max_context_len=context_len + 4,
                                         device="cpu", enable_memory_saver=False)
    kv = MHATokenToKVPool(size=max_total, page_size=1, dtype=torch.float16, head_num=1,
                          head_dim=1, layer_num=1, device="cpu", enable_memory_saver=False)
    s.token_to_kv_pool_allocator = TokenToKVPoolAllocator(
        max_total, dtype=torch.float16, device="cpu", kvcache=kv, need_sort=False)
    s.kv_shard_widening = 1
    s.is_hybrid_swa = False
    s.is_hybrid_ssm = False
    s.sliding_window_size = None
    s.full_tokens_per_layer = None
    s.swa_tokens_per_layer = None
    params = CacheInitParams(
        disable=not a.enable_radix_cache, req_to_token_pool=s.req_to_token_pool,
        token_to_kv_pool_allocator=s.token_to_kv_pool_allocator, page_size=1,
        chunked_prefill_size=chunked if chunked > 0 else None,
    )
    ctx = TreeCacheBuildContext(
        server_args=sa, params=params, is_hybrid_swa=False, is_hybrid_ssm=False,
        enable_hierarchical_cache=False, disable_radix_cache=not a.enable_radix_cache,
        tp_worker=s.tp_worker, model_config=s.model_config, tp_size=1, tp_rank=0, tp_group=None)
    s.tree_cache = create_tree_cache(ctx)   # SGLang's own selection chain
    s.disable_radix_cache = not a.enable_radix_cache

    # --- real init_* methods of Scheduler ---
    s.metrics_reporter = MetricsSink()
    s.scheduler_stage_metrics = None   # stage-timing recorder off (decorator then calls through)
    s.metrics_collector = None
    s.init_running_status()
    s.init_chunked_prefill()
    s.dynamic_chunk_sizer = None
    s.init_diffusion_llm()
    s.init_schedule_policy()
    s.tokenizer = None
    # No constrained-decoding requests: an empty grammar queue (GrammarManager needs TP groups).
    s.grammar_manager = SimpleNamespace(has_waiting_grammars=lambda: False, grammar_queue=[])
    s.output_streamer = OutputSink()
    s.dp_attn_adapter = SchedulerDPAttnAdapter(
        model_runner=s.tp_worker.model_runner, req_to_token_pool=s.req_to_token_pool,
        token_to_kv_pool_allocator=s.token_to_kv_pool_allocator, tree_cache=s.tree_cache,
        offload_tags=set(), model_config=s.model_config, enable_overlap=False,
        spec_algorithm=s.spec_algorithm, get_require_mlp_sync=lambda: False)
    s.ngram_embedding_manager = SimpleNamespace(prepare_for_forward=lambda b, **kw: b)
    s.load_inquirer = SimpleNamespace(_get_num_pending_tokens=lambda **kw: 0)
    s.beam_coordinator = BeamCoordinator(
        model_config=s.model_config, spec_algorithm=s.spec_algorithm, dllm_enabled=False,
        max_req_len=s.max_req_len, req_to_token_pool=s.req_to_token_pool,
        token_to_kv_pool_allocator=s.token_to_kv_pool_allocator, tree_cache=s.tree_cache,
        future_map=None)
    s.batch_result_processor = SchedulerBatchResultProcessor(
        is_generation=True, disaggregation_mode=DisaggregationMode.NULL, enable_overlap=False,
        enable_overlap_mlx=False, model_config=s.model_config,
        token_to_kv_pool_allocator=s.token_to_kv_pool_allocator, tree_cache=s.tree_cache,
        hisparse_coordinator=None, req_to_token_pool=s.req_to_token_pool,
        decode_offload_manager=None, metrics_collector=None, metrics_reporter=s.metrics_reporter,
        draft_worker=None, model_worker=s.model_worker,
        logprob_result_processor=SchedulerLogprobResultProcessor(model_config=s.model_config),
        output_streamer=s.output_streamer, beam_coordinator=s.beam_coordinator,
        abort_request=lambda *x, **k: None)
    s.send_abort_output = lambda *x, **k: None
    s._sched_idled = False
    s.tokenizer = None
    return s, sa


# ----------------------------------------------------------------------------------------------
# Simulation
# ----------------------------------------------------------------------------------------------
def prompt_ids(idx, n, unique):
    if not unique:
        return array("q", [NORMAL_TOKEN]) * n
    # Unique first token per request (radix cache on): no accidental prefix sharing.
    base = 3 + (idx * 1000003) % (VOCAB - 16)
    return array("q", [3 + (base + 7919 * j) % (VOCAB - 16) for j in range(n)])


def run(a):
    wall0 = time.time()
    workload, prefix_mode = load_or_generate_workload(a)   # (validated before the slow import)
    version = import_sglang(a.sglang_log_level)
    import torch
    torch.set_num_threads(1)
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.managers.utils import GenerationBatchResult, validate_input_length
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.runtime_context import get_serving

    pfx_ids = PrefixTokenIds(workload) if prefix_mode else None
    s, sa = build_scheduler(a)
    alloc = s.token_to_kv_pool_allocator
    tree = s.tree_cache
    evicted = [0]        # tokens the tree evicted so far (prefix mode; observation only)
    if prefix_mode and hasattr(tree, "_evict"):
        real_evict = tree._evict

        def counting_evict(*args, **kw):
            """Pass-through wrapper around UnifiedRadixCache._evict (which evict() and
            evict_for_alloc() call): only adds up EvictResult.num_tokens_evicted."""
            res = real_evict(*args, **kw)
            evicted[0] += int(getattr(res, "num_tokens_evicted", 0) or 0)
            return res
        tree._evict = counting_evict
    evicted_reported = 0
    t_import = time.time() - wall0

    closed = a.concurrency > 0
    n_total = len(workload)
    recs = {}            # rid -> per-request record
    pending = []         # (arrival_time, workload_idx), sent but not yet ingested
    next_to_send = 0

    def send(idx, when):
        w = workload[idx]
        pending.append((when, idx))
        recs[w["id"]] = dict(id=w["id"], sent=when, admitted="", first_token="", finish="",
                             prompt_tokens=w["prompt_tokens"], output_target=w["output_tokens"],
                             max_new_tokens=w["max_new_tokens"], ignore_eos=int(w["ignore_eos"]),
                             output_tokens=0, retractions=0, prefill_steps=0, finish_reason="")
        if prefix_mode:
            recs[w["id"]].update(prefix_group=w["prefix_group"], prefix_tokens=w["prefix_tokens"],
                                 cached_tokens="", reported_cached_tokens="")

    if closed:
        while next_to_send < min(a.concurrency, n_total):
            send(next_to_send, 0.0)
            next_to_send += 1
    else:
        for i in range(n_total):
            send(i, workload[i]["arrival"])
        pending.sort(key=lambda x: (x[0], x[1]))
    pending_pos = 0
    target_out = {}      # rid -> target output length
    live = {}            # rid -> Req

    def ingest(now):
        nonlocal pending_pos
        if closed:
            pending.sort(key=lambda x: (x[0], x[1]))
        while pending_pos < len(pending) and pending[pending_pos][0] <= now + 1e-12:
            _, idx = pending[pending_pos]
            pending_pos += 1
            w = workload[idx]
            sp = SamplingParams(max_new_tokens=w["max_new_tokens"], ignore_eos=w["ignore_eos"])
            sp.normalize(None)
            if prefix_mode:
                ids = array("q", pfx_ids.prompt(idx, w["prompt_tokens"], w["prefix_group"],
                                                w["prefix_tokens"]))
            else:
                ids = prompt_ids(idx, w["prompt_tokens"], a.enable_radix_cache)
            req = Req(w["id"], "", ids, sp, eos_token_ids={EOS_TOKEN}, vocab_size=VOCAB)
            req.tokenizer = None
            req.logprob_start_len = -1
            # --- the scheduling-relevant part of Scheduler._handle_generate_request ---
            s.init_req_max_new_tokens(req)                 # real: clips max_new_tokens
            err = validate_input_length(req, s.max_req_input_len, get_serving().allow_auto_truncate)
            if err:
                raise SystemExit(f"error: request {w['id']}: {err}")
            recs[w["id"]]["max_new_tokens"] = req.sampling_params.max_new_tokens
            target_out[w["id"]] = w["output_tokens"]
            live[w["id"]] = req
            s._add_request_to_queue(req)                   # real
        if closed and pending_pos == len(pending):
            pending.clear()
            pending_pos = 0

    def fake_run_batch(batch):
        """Stands in for Scheduler.run_batch + the model: one token per request, EOS at target."""
        s.forward_ct += 1
        batch.forward_iter = s.forward_ct
        s._sched_idled = False
        if batch.extend_num_tokens:
            s.processed_tokens_counter += batch.extend_num_tokens
        ids = []
        for r in batch.reqs:
            n = len(r.output_ids) + 1
            ids.append(EOS_TOKEN if n >= target_out[r.rid] else NORMAL_TOKEN)
        res = GenerationBatchResult(
            logits_output=None, next_token_ids=torch.tensor(ids, dtype=torch.int64),
            can_run_cuda_graph=False, copy_done=None)
        res.extend_input_len_per_req = None
        res.extend_logprob_start_len_per_req = None
        batch.input_ids = None
        return res

    def process_batch_result(batch, result):
        """Scheduler.process_batch_result minus metrics/publishing: the real result processor."""
        if batch.forward_mode.is_decode():
            s.batch_result_processor.process_batch_result_decode(batch, result)
        elif batch.forward_mode.is_extend():
            s.batch_result_processor.process_batch_result_prefill(batch, result)
        else:
            raise RuntimeError(f"unexpected forward mode {batch.forward_mode}")
        s.tree_cache.flush_pending_backups()

    steps_f = open(os.path.join(a.out, "steps.csv"), "w", newline="")
    steps_w = csv.writer(steps_f, lineterminator="\n")
    steps_w.writerow(["step", "t_start", "t_end", "kind", "batch_size", "running", "queued",
                      "extend_tokens", "kv_used", "kv_seq_sum", "ratio_in", "new_token_ratio", "retracted",
                      "finished", "chunked", "batch_is_full", "prefill_ids", "retracted_ids",
                      "finished_ids"]
                     + (["cached_tokens", "cache_evictable", "cache_protected", "cache_evicted"]
                        if prefix_mode else []))

    t = 0.0
    step = 0
    total_retracted = 0
    finished_n = 0
    idle_resets = 0
    while True:
        ingest(t)
        # ---- Scheduler.event_loop_normal body (real get_next_batch_to_run) ----
        s.metrics_reporter.num_retracted_reqs = 0
        ratio_in = s.new_token_ratio_tracker.current
        # Observation only: requests that may be retracted this iteration and their counters.
        watch = list({id(r): r for r in list(s.running_batch.reqs)
                      + (list(s.last_batch.reqs) if s.last_batch else [])}.values())
        rc_before = {id(r): r.retraction_count for r in watch}
        plan = s.get_next_batch_to_run(running_batch=s.running_batch, last_batch=s.last_batch)
        s.running_batch = plan.running_batch
        batch = plan.batch_to_run
        s.cur_batch_for_debug = batch
        retracted_reqs = [r for r in watch if r.retraction_count > rc_before[id(r)]]
        retracted = len(retracted_reqs)
        # cross-check against the count the real update_running_batch reported
        assert retracted == s.metrics_reporter.num_retracted_reqs, (step, retracted)
        total_retracted += retracted
        if batch:
            if batch.forward_mode.is_mixed():
                kind = "mixed"
            elif batch.forward_mode.is_extend():
                kind = "prefill"
            else:
                kind = "decode"
            bs = batch.batch_size()
            if kind != "decode":
                ext = int(batch.extend_num_tokens or 0)
                dt = a.prefill_p0 + a.prefill_p1 * ext
                seq_sum = int(sum(batch.seq_lens_cpu.tolist()))
                mixed_decoders = set(id(r) for r in (batch.decoding_reqs or []))
                for r in batch.reqs:
                    if id(r) in mixed_decoders:
                        continue
                    rec = recs[r.rid]
                    rec["prefill_steps"] += 1
                    if rec["admitted"] == "":
                        rec["admitted"] = t
                        if prefix_mode:
                            # SGLang's own counter, set by prepare_for_extend from the radix match
                            rec["cached_tokens"] = int(r.cached_tokens)
            else:
                ext = 0
                seq_sum = int(batch.seq_lens_cpu.sum().item())
                dt = a.decode_a + a.decode_b * bs + a.decode_c * seq_sum
            kv_used = s.max_total_num_tokens - alloc.available_size()
            ratio = s.new_token_ratio_tracker.current
            running_n = len(s.running_batch.reqs) if kind != "decode" else bs
            prefill_ids = " ".join(r.rid for r in batch.reqs) if kind != "decode" else ""
            queued = len(s.waiting_queue)
            chunked = int(s.chunked_req is not None)
            if prefix_mode:
                # SGLang's "#cached-token" of this prefill (PrefillAdder.log_hit_tokens), and the
                # tree's evictable / protected (locked) token counts at forward time
                pst = getattr(batch, "prefill_stats", None) if kind != "decode" else None
                cache_cols = [int(pst.log_hit_tokens) if pst is not None else 0,
                              int(tree.evictable_size()), int(tree.protected_size()),
                              evicted[0] - evicted_reported]
                evicted_reported = evicted[0]
            before = {r.rid: len(r.output_ids) for r in batch.reqs}
            result = fake_run_batch(batch)
            t_end = t + dt
            process_batch_result(batch, result)
            fin = 0
            fin_ids = []
            for r in batch.reqs:
                rec = recs[r.rid]
                if before[r.rid] == 0 and len(r.output_ids) > 0 and rec["first_token"] == "":
                    rec["first_token"] = t_end
                if r.finished() and rec["finish"] == "":
                    fin += 1
                    fin_ids.append(r.rid)
                    rec["finish"] = t_end
                    rec["output_tokens"] = len(r.output_ids)
                    rec["retractions"] = r.retraction_count
                    rec["finish_reason"] = type(r.finished_reason).__name__
                    if prefix_mode:
                        rec["reported_cached_tokens"] = int(r.cached_tokens)
                    live.pop(r.rid, None)
                    if closed and next_to_send < n_total:
                        send(next_to_send, t_end + a.client_latency)
                        next_to_send += 1
            finished_n += fin
            steps_w.writerow([step, f"{t:.6f}", f"{t_end:.6f}", kind, bs, running_n, queued, ext,
                              kv_used, seq_sum, f"{ratio_in:.6f}", f"{ratio:.6f}", retracted, fin, chunked,
                              int(s.running_batch.batch_is_full), prefill_ids,
                              " ".join(r.rid for r in retracted_reqs), " ".join(fin_ids)]
                             + (cache_cols if prefix_mode else []))
            step += 1
            t = t_end
        else:
            # on_idle(): the only scheduling effect is the new_token_ratio reset when fully idle.
            s._sched_idled = True
            if s.is_fully_idle():
                s.new_token_ratio_tracker.reset()
                idle_resets += 1
        s.last_batch = batch
        # ---- termination / clock advance ----
        if finished_n >= n_total:
            break
        if a.max_steps and step >= a.max_steps:
            break
        if a.horizon and t >= a.horizon:
            break
        if not batch:
            nxt = [p[0] for p in pending[pending_pos:]]
            if nxt and min(nxt) > t:
                t = min(nxt)
            elif not nxt and not live:
                break
            elif not nxt:
                raise RuntimeError(f"stalled at t={t}: no batch, no arrivals, "
                                   f"{len(s.waiting_queue)} waiting, {len(live)} live")
    steps_f.close()

    for rid, r in live.items():   # unfinished at stop
        recs[rid]["output_tokens"] = len(r.output_ids)
        recs[rid]["retractions"] = r.retraction_count
        if prefix_mode and recs[rid]["admitted"] != "":
            recs[rid]["reported_cached_tokens"] = int(r.cached_tokens)
    with open(os.path.join(a.out, "requests.csv"), "w", newline="") as f:
        cols = ["id", "sent", "admitted", "first_token", "finish", "prompt_tokens",
                "output_target", "output_tokens", "max_new_tokens", "ignore_eos", "retractions",
                "prefill_steps", "finish_reason"]
        if prefix_mode:
            cols += ["prefix_group", "prefix_tokens", "cached_tokens", "reported_cached_tokens"]
        wr = csv.writer(f, lineterminator="\n")
        wr.writerow(cols)
        for w in workload:
            rec = recs.get(w["id"])
            if rec is None:
                continue
            wr.writerow([(f"{rec[c]:.6f}" if isinstance(rec[c], float) else rec[c]) for c in cols])
    with open(os.path.join(a.out, "workload.csv"), "w", newline="") as f:
        wr = csv.writer(f, lineterminator="\n")
        wr.writerow(["id", "arrival", "prompt_tokens", "output_tokens", "max_new_tokens", "ignore_eos"]
                    + (list(PREFIX_COLUMNS) if prefix_mode else []))
        for w in workload:
            wr.writerow([w["id"], "closed" if closed else f"{w['arrival']:.6f}", w["prompt_tokens"],
                         w["output_tokens"], w["max_new_tokens"], int(w["ignore_eos"])]
                        + ([w["prefix_group"], w["prefix_tokens"]] if prefix_mode else []))
    summary = dict(
        sglang_version=version, steps=step, sim_time=t, requests=n_total, finished=finished_n,
        retraction_events=None, retracted_reqs_total=total_retracted,
        requests_retracted_at_least_once=sum(1 for r in recs.values() if r["retractions"]),
        idle_ratio_resets=idle_resets, max_running_requests_effective=s.max_running_requests,
        max_req_len=s.max_req_len, wall_seconds=round(time.time() - wall0, 3),
        import_and_setup_seconds=round(t_import, 3),
        new_token_ratio=dict(init=s.new_token_ratio_tracker.init, min=s.new_token_ratio_tracker.min,
                             decay=s.new_token_ratio_tracker.decay),
        # (options added later are listed only when set, so that older summaries stay unchanged)
        args={k: v for k, v in vars(a).items() if k not in ("out", "quiet")
              and not (k in LATER_ARG_DEFAULTS and v == LATER_ARG_DEFAULTS[k])},
    )
    if prefix_mode:
        adm = [r for r in recs.values() if r["admitted"] != ""]
        prompt_adm = sum(r["prompt_tokens"] for r in adm)
        cached_adm = sum(r["cached_tokens"] for r in adm)
        groups = {}
        for w in workload:
            if w["prefix_group"]:
                groups[w["prefix_group"]] = w["prefix_tokens"]
        summary["prefix_cache"] = dict(
            tree_cache=type(tree).__name__,
            tree_core=type(getattr(tree, "tree_core", None)).__name__,
            radix_cache_enabled=bool(a.enable_radix_cache),
            groups={g: dict(prefix_tokens=p, first_token_id=pfx_ids.group_head[g])
                    for g, p in sorted(groups.items())},
            requests_in_groups=sum(1 for w in workload if w["prefix_group"]),
            requests_admitted=len(adm),
            requests_with_cache_hit=sum(1 for r in adm if r["cached_tokens"] > 0),
            prompt_tokens_admitted=prompt_adm,
            cached_tokens_at_first_admission=cached_adm,
            hit_rate=round(cached_adm / prompt_adm, 6) if prompt_adm else 0.0,
            reported_cached_tokens=sum(r["reported_cached_tokens"] or 0 for r in adm),
            evicted_tokens=evicted[0],
        )
    return summary


def main(argv=None):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    summary = run(a)
    # retraction events = decode steps that retracted >= 1 request
    with open(os.path.join(a.out, "steps.csv")) as f:
        summary["retraction_events"] = sum(1 for row in csv.DictReader(f) if int(row["retracted"]) > 0)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({k: v for k, v in summary.items() if k != "wall_seconds"
                   and k != "import_and_setup_seconds"}, f, indent=1, sort_keys=True)
        f.write("\n")
    if not a.quiet:
        print(json.dumps({k: v for k, v in summary.items() if k != "args"}, indent=1))


if __name__ == "__main__":
    main()
