#!/usr/bin/env python3
# --- servesim: a copy of the shared oracle ../shared/oracle/vllm_oracle.py (documented in
# --- README-vllm.md beside this file), UNCHANGED except for these four comment lines.
# --- sha256 of the original file: 1b893680888c5c90a55ee936f89bad54d5e09dd2a5126e093e22e912bd40a483
# --- Driven by scripts/golden/record.py, which regenerates tests/fixtures/golden/.
"""vLLM V1 scheduler oracle: drive vLLM's real Scheduler / KVCacheManager / BlockPool on a CPU with
fake model outputs and a simulated clock.

Real (imported from the installed vllm package, unmodified): vllm.v1.core.sched.scheduler.Scheduler
(or AsyncScheduler), its KVCacheManager, KV cache coordinator and BlockPool, Request, SamplingParams,
VllmConfig / SchedulerConfig / CacheConfig validation.  Fake: the model (every scheduled request whose
chunk reaches the end of its known tokens "samples" token id 100; a partial prefill samples nothing),
the clock (step_s = a + b*decode_reqs + c*prefill_tokens + d*kv_tokens), the client, and the
ModelConfig (a tiny local config.json written to a temp dir; no weights, no tokenizer, no network).

Prefix caching: off by default, as before. --enable-prefix-caching turns on vLLM's own prefix caching
(the block hasher EngineCore builds, KVCacheManager.get_computed_blocks, the BlockPool's hash map and
LRU free queue). Prompts then share token ids only through the optional workload columns
prefix_group / prefix_tokens (requests of one group share their first prefix_tokens ids); every other
prompt is unique. Without those columns and without the flag, behaviour and outputs are unchanged.

Subcommands:
  gen   write a synthetic workload CSV (id,arrival,prompt_tokens,output_tokens)
  run   replay a workload through the scheduler; writes steps.csv, requests.csv, meta.json

See README-vllm.md beside this file for setup and the meaning of every column.
"""
import argparse
import atexit
import csv
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time


# ----------------------------------------------------------------------------------------- workload
def gen_workload(a):
    rng = random.Random(a.seed)
    groups = parse_gen_prefix_groups(a.prefix_groups)
    t = 0.0
    rows = []
    for i in range(a.n):
        if a.rate > 0:
            t += rng.expovariate(a.rate)
        rows.append([str(i), t if a.rate > 0 else 0.0,
                     rng.randint(a.prompt_min, a.prompt_max),
                     rng.randint(a.output_min, a.output_max)])
        if groups:   # (drawn after the lengths: without groups the stream is unchanged)
            g, p = ("", 0) if rng.random() < a.prefix_none else rng.choice(groups)
            rows[-1][2] += p
            rows[-1] += [g, p]
    with open(a.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "arrival", "prompt_tokens", "output_tokens"]
                   + (list(PREFIX_COLUMNS) if groups else []))
        for r in rows:
            w.writerow([r[0], f"{r[1]:.6f}", r[2], r[3]] + r[4:])
    print(f"wrote {len(rows)} requests to {a.out}")


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


_ALIASES = {
    "id": ("id", "request_id", "rid"),
    "arrival": ("arrival", "arrival_s", "arrival_time", "t"),
    "prompt_tokens": ("prompt_tokens", "prompt_len", "input_tokens", "prompt"),
    "output_tokens": ("output_tokens", "output_len", "max_tokens", "output"),
    "prefix_group": ("prefix_group",),
    "prefix_tokens": ("prefix_tokens",),
}


def _pick(row, key, default=None):
    for k in _ALIASES[key]:
        if k in row and row[k] not in (None, ""):
            return row[k]
    if default is not None:
        return default
    raise SystemExit(f"workload row {row!r} lacks a '{key}' column (aliases: {_ALIASES[key]})")


def load_workload(path):
    """JSON (a list of objects, or {"requests": [...]}) or CSV with a header row.
    Returns (requests, prefix_mode); prefix_mode: the workload declares prefix_group / prefix_tokens."""
    with open(path) as f:
        text = f.read()
    if path.endswith(".json") or text.lstrip().startswith(("[", "{")):
        data = json.loads(text)
        if isinstance(data, dict):
            data = data["requests"]
        rows = data
        prefix_mode = any(k in row for row in rows for k in PREFIX_COLUMNS)
    else:
        reader = csv.DictReader(text.splitlines())
        rows = list(reader)
        prefix_mode = any(k in (reader.fieldnames or []) for k in PREFIX_COLUMNS)
    reqs = []
    for i, row in enumerate(rows):
        r = dict(id=str(_pick(row, "id", str(i))),
                 arrival=float(_pick(row, "arrival", 0.0)),
                 prompt=int(_pick(row, "prompt_tokens")),
                 output=int(_pick(row, "output_tokens")))
        if r["prompt"] < 1 or r["output"] < 1:
            raise SystemExit(f"request {r['id']}: prompt and output token counts must be >= 1")
        if prefix_mode:
            r["prefix_group"], r["prefix_tokens"] = parse_prefix_fields(row, r["id"])
        reqs.append(r)
    ids = [r["id"] for r in reqs]
    if len(set(ids)) != len(ids):
        raise SystemExit("duplicate request ids in workload")
    if prefix_mode:
        validate_prefix_groups(reqs, "prompt")
    return reqs, prefix_mode


# ----------------------------------------------------------------------------------------- prefixes
# Shared prompt prefixes (the same code is in sglang_oracle.py, so a workload gets the same ids there).
# Token-id layout used when prefix caching is on or the workload has prefix_group / prefix_tokens:
#   ids < 16           not used in prompts (reserved for special tokens such as EOS 2);
#   [16, 16 + 4096)    first token of a group's shared prefix: one slot per group, from a SHA-256 of
#                      the group name (collisions resolved by probing, in sorted name order);
#   [4112, 152064)     first token of a request's own part: 4112 + the request's workload index.
# The remaining ids of a prefix / own part are arithmetic sequences seeded by the same hash / index.
# So two prompts agree at position 0 only if they belong to the same group, and two members of a
# group agree on exactly the group's prefix_tokens ids: position prefix_tokens holds each one's own
# head token, which no other request has. Prompts without a group start with their own head token.
# Output tokens (the fake id 100) always follow a request's own head token, so they cannot make two
# different prompts match further. The ids may exceed the fake model's vocab_size (32000): nothing
# in the scheduler or the KV cache manager reads it.
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


# ----------------------------------------------------------------------------------------- vLLM setup
def build_scheduler(a, max_model_len):
    import torch
    from vllm.config import (CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig)
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    # A tiny local HF config so ModelConfig never touches the network; no weights are loaded.
    model_dir = tempfile.mkdtemp(prefix="vllm-oracle-model-")
    atexit.register(shutil.rmtree, model_dir, ignore_errors=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                   "intermediate_size": 128, "num_attention_heads": 1, "num_key_value_heads": 1,
                   "num_hidden_layers": 1, "vocab_size": 32000,
                   "max_position_embeddings": max(max_model_len, 4096), "rms_norm_eps": 1e-5,
                   "torch_dtype": "float16", "bos_token_id": 1, "eos_token_id": 2}, f)

    model_config = ModelConfig(model=model_dir, dtype="float16", seed=0, skip_tokenizer_init=True,
                               max_model_len=max_model_len)
    scheduler_config = SchedulerConfig(
        max_num_seqs=a.max_num_seqs,
        max_num_batched_tokens=a.max_num_batched_tokens,
        max_model_len=max_model_len,
        long_prefill_token_threshold=a.long_prefill_token_threshold,
        enable_chunked_prefill=a.enable_chunked_prefill,
        async_scheduling=a.scheduling == "async",
        scheduler_reserve_full_isl=a.scheduler_reserve_full_isl,
        watermark=a.watermark,
        is_encoder_decoder=False,
    )
    cache_config = CacheConfig(block_size=a.block_size, gpu_memory_utilization=0.9,
                               cache_dtype="auto", enable_prefix_caching=a.enable_prefix_caching)
    vllm_config = VllmConfig(scheduler_config=scheduler_config, model_config=model_config,
                             cache_config=cache_config, device_config=DeviceConfig(device="cpu"))
    kv_cache_config = KVCacheConfig(
        num_blocks=a.num_gpu_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["layer"], FullAttentionSpec(
            block_size=a.block_size, num_kv_heads=1, head_size=1, dtype=torch.float32))],
    )
    vllm_config.cache_config.num_gpu_blocks = a.num_gpu_blocks

    base = AsyncScheduler if a.scheduling == "async" else Scheduler

    class ObservedScheduler(base):
        """Adds one read-only hook: note each scheduled request's state *before* vLLM advances
        num_computed_tokens, then defer to vLLM's own _update_after_schedule unchanged."""

        def _update_after_schedule(self, scheduler_output):
            rec = []
            for rid, n in scheduler_output.num_scheduled_tokens.items():
                r = self.requests[rid]
                known = r.num_tokens + r.num_output_placeholders  # tokens whose KV must exist
                rec.append((rid, r.num_computed_tokens, n, known))
            self.oracle_last = rec
            # requests taken from WAITING by this schedule() (new, or resumed after preemption):
            # their num_computed_tokens above is what the prefix-cache lookup gave them
            self.oracle_from_waiting = (
                {d.req_id for d in scheduler_output.scheduled_new_reqs}
                | set(scheduler_output.scheduled_cached_reqs.resumed_req_ids))
            super()._update_after_schedule(scheduler_output)

    block_hasher = None
    if not a.enable_prefix_caching:
        sched = ObservedScheduler(vllm_config=vllm_config, kv_cache_config=kv_cache_config,
                                  structured_output_manager=StructuredOutputManager(vllm_config),
                                  block_size=a.block_size, log_stats=False)
        return sched, vllm_config, block_hasher
    # Prefix caching: what EngineCore.__init__ does (block sizes, hash function, NONE_HASH, the
    # per-request block hasher that Request.from_engine_core_request receives).
    if not vllm_config.cache_config.enable_prefix_caching:
        raise SystemExit("vLLM's config turned prefix caching off")
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import (get_request_block_hasher, init_none_hash,
                                             resolve_kv_cache_block_sizes)
    scheduler_block_size, hash_block_size = resolve_kv_cache_block_sizes(kv_cache_config,
                                                                         vllm_config)
    caching_hash_fn = get_hash_fn_by_name(vllm_config.cache_config.prefix_caching_hash_algo)
    init_none_hash(caching_hash_fn)
    block_hasher = get_request_block_hasher(hash_block_size, caching_hash_fn,
                                            vllm_config.num_hash_lookahead_tokens)
    sched = ObservedScheduler(vllm_config=vllm_config, kv_cache_config=kv_cache_config,
                              structured_output_manager=StructuredOutputManager(vllm_config),
                              block_size=scheduler_block_size, hash_block_size=hash_block_size,
                              log_stats=False)
    sched.oracle_hash_block_size = hash_block_size
    return sched, vllm_config, block_hasher


# ----------------------------------------------------------------------------------------- simulation
def run(a):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    t_wall0 = time.perf_counter()
    work, prefix_mode = load_workload(a.workload)   # (validated before the slow import)
    import vllm
    from vllm.sampling_params import SamplingParams
    from vllm.v1.outputs import EMPTY_MODEL_RUNNER_OUTPUT, ModelRunnerOutput
    from vllm.v1.request import Request

    if a.limit:
        work = work[: a.limit]
    # extended mode: prefix-aware token ids and the cache columns (off = the original behaviour)
    ext = a.enable_prefix_caching or prefix_mode
    if ext and not prefix_mode:
        for r in work:
            r["prefix_group"], r["prefix_tokens"] = "", 0
    pfx_ids = PrefixTokenIds(work) if ext else None
    need = max(r["prompt"] + r["output"] for r in work)
    max_model_len = a.max_model_len or need
    for r in work:
        if r["prompt"] + r["output"] > max_model_len:
            raise SystemExit(f"request {r['id']}: prompt+output {r['prompt'] + r['output']} > "
                             f"max_model_len {max_model_len}")
    sched, vc, block_hasher = build_scheduler(a, max_model_len)
    pool = sched.kv_cache_manager.block_pool
    usable_blocks = a.num_gpu_blocks - 1  # block 0 is vLLM's null block
    evicted = [0, 0]  # cached blocks evicted so far, and as of the previous step row
    if a.enable_prefix_caching:
        real_maybe_evict = pool._maybe_evict_cached_block

        def counting_maybe_evict(block):
            """Pass-through wrapper around BlockPool._maybe_evict_cached_block (called by
            get_new_blocks for every block it takes from the free queue): counts evictions."""
            hit = real_maybe_evict(block)
            evicted[0] += bool(hit)
            return hit
        pool._maybe_evict_cached_block = counting_maybe_evict
    t_import = time.perf_counter() - t_wall0

    # Client: open loop (arrival column) or closed loop (N slots, all at t=0, next on finish).
    if a.closed_loop:
        pending = [dict(r, arrival=None) for r in work]
    else:
        pending = sorted(work, key=lambda r: r["arrival"])  # stable: ties keep file order
    pend_i = 0
    widx = {r["id"]: i for i, r in enumerate(work)}  # workload index (token ids of prefix mode)
    stats = {}  # id -> per-request record
    live = {}   # id -> Request (until finished)

    def submit(r, t):
        rr = dict(id=r["id"], arrival=t, prompt=r["prompt"], output=r["output"],
                  first_sched=None, first_token=None, finish=None, preemptions=0, generated=0)
        stats[r["id"]] = rr
        sp = SamplingParams(max_tokens=r["output"], ignore_eos=True)
        if ext:
            rr.update(prefix_group=r["prefix_group"], prefix_tokens=r["prefix_tokens"],
                      cached_at_first_sched=None, num_cached_tokens=None)
            req = Request(request_id=r["id"],
                          prompt_token_ids=pfx_ids.prompt(widx[r["id"]], r["prompt"],
                                                          r["prefix_group"], r["prefix_tokens"]),
                          sampling_params=sp, pooling_params=None, arrival_time=t,
                          block_hasher=block_hasher)
        else:
            req = Request(request_id=r["id"], prompt_token_ids=[7] * r["prompt"], sampling_params=sp,
                          pooling_params=None, arrival_time=t)
        live[r["id"]] = req
        sched.add_request(req)

    def admit(t):
        nonlocal pend_i
        if a.closed_loop:
            return
        while pend_i < len(pending) and pending[pend_i]["arrival"] <= t:
            submit(pending[pend_i], pending[pend_i]["arrival"])
            pend_i += 1

    def next_arrival():
        if a.closed_loop or pend_i >= len(pending):
            return None
        return pending[pend_i]["arrival"]

    def closed_loop_refill(t, n_finished):
        nonlocal pend_i
        for _ in range(n_finished):
            if pend_i < len(pending):
                submit(pending[pend_i], t)
                pend_i += 1

    steps = []
    os.makedirs(a.out_dir, exist_ok=True)
    if a.trace and os.path.dirname(a.trace):
        os.makedirs(os.path.dirname(a.trace), exist_ok=True)
    trace = open(a.trace, "w") if a.trace else None

    def on_schedule(so, t_start, dt):
        """Classify the batch vLLM just built; return the fake model output and the step row."""
        rec = sched.oracle_last
        prefill_tok = prefill_reqs = decode_reqs = kv_tok = 0
        sampling = []
        for rid, before, n, known in rec:
            kv_tok += before + n
            if before < known - 1:   # vLLM's own prefill predicate (num_computed < num_tokens - 1)
                prefill_reqs += 1
                prefill_tok += n
            else:
                decode_reqs += 1
            if before + n >= known:  # chunk reaches the last known token -> the model samples one
                sampling.append(rid)
            st = stats[rid]
            if st["first_sched"] is None:
                st["first_sched"] = t_start
                if ext:
                    st["cached_at_first_sched"] = before
        if dt is None:
            dt = a.a + a.b * decode_reqs + a.c * prefill_tok + a.d * kv_tok
        n_run, n_wait = sched.get_request_counts()
        row = dict(step=len(steps), t_start=t_start, t_end=t_start + dt, dt=dt, num_running=n_run,
                   num_waiting=n_wait, num_scheduled_reqs=len(rec),
                   num_scheduled_tokens=so.total_num_scheduled_tokens,
                   num_prefill_reqs=prefill_reqs, num_prefill_tokens=prefill_tok,
                   num_decode_reqs=decode_reqs, total_kv_tokens=kv_tok,
                   kv_blocks_used=usable_blocks - pool.get_num_free_blocks(),
                   kv_blocks_free=pool.get_num_free_blocks(),
                   preemptions=len(so.preempted_req_ids), finished=0)
        if ext:
            # prefix-cache hits of the requests taken from WAITING in this step (new or resumed),
            # and the free blocks that still hold a cached block hash (evictable prefix cache)
            row["cache_hit_tokens"] = sum(before for rid, before, _, _ in rec
                                          if rid in sched.oracle_from_waiting)
            row["kv_blocks_cached_free"] = sum(1 for b in pool.blocks
                                               if b.ref_cnt == 0 and b.block_hash is not None)
            row["kv_blocks_evicted"] = evicted[0] - evicted[1]
            evicted[1] = evicted[0]
        for rid in so.preempted_req_ids:
            stats[rid]["preemptions"] += 1
        steps.append(row)
        if trace:
            trace.write(json.dumps({"step": row["step"], "t": round(t_start, 9),
                                    "sched": {rid: n for rid, _, n, _ in rec},
                                    "preempted": sorted(so.preempted_req_ids)}) + "\n")
        ids = [x[0] for x in rec]
        samp = set(sampling)
        mro = ModelRunnerOutput(req_ids=ids, req_id_to_index={x: i for i, x in enumerate(ids)},
                                sampled_token_ids=[[100] if x in samp else [] for x in ids])
        return mro, row

    def on_output(engine_outputs, t, row):
        n_fin = 0
        for eco in engine_outputs.values():
            for o in eco.outputs:
                st = stats[o.request_id]
                if ext and o.prefill_stats is not None and st["num_cached_tokens"] is None:
                    # vLLM's own per-request count (prompt_tokens_details.cached_tokens)
                    st["num_cached_tokens"] = o.prefill_stats.num_cached_tokens
                    assert st["num_cached_tokens"] == st["cached_at_first_sched"], (o.request_id, st)
                if o.new_token_ids:
                    st["generated"] += len(o.new_token_ids)
                    if st["first_token"] is None:
                        st["first_token"] = t
                if o.finish_reason is not None:
                    st["finish"] = t
                    req = live.pop(o.request_id)
                    # cross-check: vLLM's own per-request counter vs the step-level count
                    assert req.num_preemptions == st["preemptions"], (o.request_id, st)
                    n_fin += 1
        if row is not None:
            row["finished"] = n_fin
        return n_fin

    if a.closed_loop:
        closed_loop_refill(0.0, a.closed_loop)

    t = 0.0
    idle_spins = 0
    sim_wall0 = time.perf_counter()
    if a.scheduling == "sync":
        # EngineCore.step(): schedule -> execute (simulated) -> update_from_output, back to back.
        while True:
            admit(t)
            if not sched.has_requests():
                nt = next_arrival()
                if nt is None:
                    break
                t = max(t, nt)
                continue
            so = sched.schedule()
            if so.total_num_scheduled_tokens == 0:
                sched.update_from_output(so, EMPTY_MODEL_RUNNER_OUTPUT)
                if sched.get_num_unfinished_requests() == 0:
                    continue
                nt = next_arrival()
                if nt is None:
                    idle_spins += 1
                    if idle_spins > 3:
                        raise SystemExit(f"stuck at t={t}: {sched.get_request_counts()} "
                                         "(running, waiting) but nothing schedulable "
                                         "(a request larger than the KV cache?)")
                    continue
                t = max(t, nt)
                continue
            idle_spins = 0
            mro, row = on_schedule(so, t, None)
            t = row["t_end"]
            n_fin = on_output(sched.update_from_output(so, mro), t, row)
            if a.closed_loop:
                closed_loop_refill(t, n_fin)
    else:
        # EngineCore.step_with_batch_queue() with batch_queue_size = 2: schedule the next batch
        # while the previous one runs; the simulated GPU runs batches back to back.
        from collections import deque
        queue = deque()  # (so, mro, row, t_done)
        gpu_free = 0.0
        while True:
            admit(t)
            if sched.has_requests():
                so = sched.schedule()
                if so.total_num_scheduled_tokens > 0:
                    idle_spins = 0
                    start = max(t, gpu_free)
                    mro, row = on_schedule(so, start, None)
                    gpu_free = row["t_end"]
                    queue.appendleft((so, mro, row, gpu_free))
                    executed = True
                else:
                    queue.appendleft((so, EMPTY_MODEL_RUNNER_OUTPUT, None, max(t, gpu_free)))
                    executed = False
                if len(queue) < 2 and (executed or sched.has_requests()):
                    continue
            elif not queue:
                nt = next_arrival()
                if nt is None:
                    break
                t = max(t, nt)
                continue
            so, mro, row, t_done = queue.pop()
            t = max(t, t_done)
            n_fin = on_output(sched.update_from_output(so, mro), t, row)
            if a.closed_loop:
                closed_loop_refill(t, n_fin)
            if row is None and not queue and sched.get_num_unfinished_requests() > 0:
                nt = next_arrival()
                if nt is not None:
                    t = max(t, nt)
                else:
                    idle_spins += 1
                    if idle_spins > 6:
                        raise SystemExit(f"stuck at t={t}: {sched.get_request_counts()}")
    sim_wall = time.perf_counter() - sim_wall0
    if trace:
        trace.close()

    unfinished = [k for k, v in stats.items() if v["finish"] is None]
    if unfinished or len(stats) != len(work):
        raise SystemExit(f"{len(unfinished)} submitted requests unfinished, "
                         f"{len(work) - len(stats)} never submitted")
    bad = [k for k, v in stats.items() if v["generated"] != v["output"]]
    if bad:
        raise SystemExit(f"requests generated a wrong token count: {bad[:5]}")

    # ------------------------------------------------------------------------------------- outputs
    f6 = lambda x: "" if x is None else f"{x:.9f}"
    cols = ["step", "t_start", "t_end", "dt", "num_running", "num_waiting", "num_scheduled_reqs",
            "num_scheduled_tokens", "num_prefill_reqs", "num_prefill_tokens", "num_decode_reqs",
            "total_kv_tokens", "kv_blocks_used", "kv_blocks_free", "preemptions", "finished"]
    if ext:
        cols += ["cache_hit_tokens", "kv_blocks_cached_free", "kv_blocks_evicted"]
    with open(os.path.join(a.out_dir, "steps.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in steps:
            w.writerow([f6(r[c]) if c in ("t_start", "t_end", "dt") else r[c] for c in cols])
    rcols = ["id", "arrival", "prompt_tokens", "output_tokens", "first_scheduled", "first_token",
             "finish", "ttft", "e2e", "num_preemptions"]
    if ext:
        rcols += ["prefix_group", "prefix_tokens", "num_cached_tokens"]
    with open(os.path.join(a.out_dir, "requests.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(rcols)
        for r in work:  # workload order
            s = stats[r["id"]]
            w.writerow([s["id"], f6(s["arrival"]), s["prompt"], s["output"], f6(s["first_sched"]),
                        f6(s["first_token"]), f6(s["finish"]), f6(s["first_token"] - s["arrival"]),
                        f6(s["finish"] - s["arrival"]), s["preemptions"]]
                       + ([s["prefix_group"], s["prefix_tokens"], s["num_cached_tokens"]] if ext
                          else []))
    sc = vc.scheduler_config
    meta = dict(
        vllm_version=vllm.__version__, scheduler_class=type(sched).__mro__[1].__name__,
        # (enable_prefix_caching is listed only when on, so that older runs' meta.json is unchanged)
        args={k: v for k, v in vars(a).items() if k != "func"
              and not (k == "enable_prefix_caching" and not v)},
        effective=dict(max_num_seqs=sc.max_num_seqs, max_num_batched_tokens=sc.max_num_batched_tokens,
                       max_model_len=max_model_len, enable_chunked_prefill=sc.enable_chunked_prefill,
                       long_prefill_token_threshold=sc.long_prefill_token_threshold,
                       scheduler_reserve_full_isl=sc.scheduler_reserve_full_isl,
                       watermark=sc.watermark, policy=sc.policy,
                       async_scheduling=sc.async_scheduling,
                       enable_prefix_caching=vc.cache_config.enable_prefix_caching,
                       block_size=vc.cache_config.block_size, num_gpu_blocks=a.num_gpu_blocks,
                       usable_blocks=usable_blocks))
    if ext:
        prompt_tot = sum(s["prompt"] for s in stats.values())
        cached_tot = sum(s["num_cached_tokens"] for s in stats.values())
        groups = {r["prefix_group"]: r["prefix_tokens"] for r in work if r["prefix_group"]}
        meta["prefix_cache"] = dict(
            enabled=bool(vc.cache_config.enable_prefix_caching),
            hash_algo=vc.cache_config.prefix_caching_hash_algo if a.enable_prefix_caching else None,
            hash_block_size=getattr(sched, "oracle_hash_block_size", None),
            groups={g: dict(prefix_tokens=p, first_token_id=pfx_ids.group_head[g])
                    for g, p in sorted(groups.items())},
            requests_in_groups=sum(1 for r in work if r["prefix_group"]),
            requests_with_cache_hit=sum(1 for s in stats.values() if s["num_cached_tokens"] > 0),
            prompt_tokens=prompt_tot, num_cached_tokens=cached_tot,
            hit_rate=round(cached_tot / prompt_tot, 6) if prompt_tot else 0.0,
            cache_hit_tokens_incl_resumed=sum(r["cache_hit_tokens"] for r in steps),
            blocks_evicted=evicted[0])
    with open(os.path.join(a.out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)

    n_pre = sum(r["preemptions"] for r in steps)
    t_end = steps[-1]["t_end"] if steps else 0.0
    out_tok = sum(r["output"] for r in work)
    print(f"vllm {vllm.__version__} {meta['scheduler_class']} | {len(work)} requests, "
          f"{len(steps)} steps, simulated {t_end:.3f} s, {out_tok / t_end if t_end else 0:.1f} out tok/s "
          f"(sim), preemptions {n_pre} (requests preempted >=1: "
          f"{sum(1 for s in stats.values() if s['preemptions'])}), "
          f"peak KV blocks {max((r['kv_blocks_used'] for r in steps), default=0)}/{usable_blocks}"
          + (f", prefix cache hits {meta['prefix_cache']['num_cached_tokens']}/"
             f"{meta['prefix_cache']['prompt_tokens']} prompt tokens "
             f"({100 * meta['prefix_cache']['hit_rate']:.1f} %)" if ext else ""))
    print(f"wall: import+setup {t_import:.1f} s, simulation {sim_wall:.2f} s = "
          f"{len(steps) / sim_wall if sim_wall else 0:.0f} steps/s; wrote {a.out_dir}/steps.csv, "
          f"requests.csv, meta.json", file=sys.stderr)


# ----------------------------------------------------------------------------------------- CLI
def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("gen", help="write a synthetic workload CSV")
    g.add_argument("--n", type=int, default=200)
    g.add_argument("--prompt-min", type=int, default=100)
    g.add_argument("--prompt-max", type=int, default=400)
    g.add_argument("--output-min", type=int, default=50)
    g.add_argument("--output-max", type=int, default=500)
    g.add_argument("--rate", type=float, default=0.0, help="Poisson arrivals per s; 0 = all at t=0")
    g.add_argument("--prefix-groups", default="",
                   help="NAME:TOKENS[,NAME:TOKENS...]: shared prompt prefixes; each request joins one "
                   "group (uniformly at random) and its prompt is TOKENS plus the drawn length")
    g.add_argument("--prefix-none", type=float, default=0.0,
                   help="with --prefix-groups: fraction of requests without a group")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("-o", "--out", required=True)
    g.set_defaults(func=gen_workload)

    r = sub.add_parser("run", help="replay a workload through vLLM's scheduler")
    r.add_argument("--workload", required=True, help="CSV or JSON: id, arrival, prompt_tokens, "
                   "output_tokens, optionally prefix_group, prefix_tokens (shared prompt prefixes)")
    r.add_argument("--out-dir", required=True)
    r.add_argument("--closed-loop", type=int, default=0, metavar="N",
                   help="N concurrent client slots, all sent at t=0, next sent when one finishes "
                   "(arrival column ignored; workload order is send order)")
    r.add_argument("--limit", type=int, default=0, help="use only the first N workload rows")
    r.add_argument("--scheduling", choices=["sync", "async"], default="sync",
                   help="sync: Scheduler + EngineCore.step(); async: AsyncScheduler + "
                   "step_with_batch_queue (vLLM 0.33's default on GPUs)")
    # engine
    r.add_argument("--num-gpu-blocks", type=int, required=True)
    r.add_argument("--block-size", type=int, default=16)
    r.add_argument("--max-num-seqs", type=int, default=256)
    r.add_argument("--max-num-batched-tokens", type=int, default=8192)
    r.add_argument("--max-model-len", type=int, default=0, help="0 = max prompt+output in workload")
    r.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=True)
    r.add_argument("--long-prefill-token-threshold", type=int, default=0)
    r.add_argument("--scheduler-reserve-full-isl", action=argparse.BooleanOptionalAction,
                   default=True, help="vLLM 0.33 default True: admit only if the whole prompt fits")
    r.add_argument("--watermark", type=float, default=0.0)
    r.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=False,
                   help="vLLM's prefix caching (CacheConfig.enable_prefix_caching; full blocks, "
                   "sha256 block hashes). Off by default here (vLLM's own default is on)")
    # step-time model
    r.add_argument("--a", type=float, default=0.010, help="s per step")
    r.add_argument("--b", type=float, default=0.0001, help="s per decode request")
    r.add_argument("--c", type=float, default=0.00005, help="s per prefill token")
    r.add_argument("--d", type=float, default=0.0, help="s per KV token attended (context of "
                   "scheduled requests)")
    r.add_argument("--trace", default="", help="optional JSONL: per step {step,t,sched,preempted}")
    r.set_defaults(func=run)

    a = p.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
