#!/usr/bin/env python3
"""Regenerate the golden traces in tests/fixtures/golden/ from SGLang's and vLLM's own scheduler code.

    python3 scripts/golden/record.py                 # every case, from scratch (11-40 min)
    python3 scripts/golden/record.py --only NAME,..  # some cases (engine/case or just case)
    python3 scripts/golden/record.py --list          # the cases and what each exercises

Every case is defined below (workload generator, client, engine keys, step-time model, check). For
each one this script
  1. generates the workload (Python's random.Random(seed); no dependency beyond the standard library)
     and writes it twice: `workload.csv` in servesim's trace format (the fixture) and, in a scratch
     directory, `workload.oracle.csv` in the oracle's own format;
  2. runs the oracle (scripts/golden/sglang_oracle.py or vllm_oracle.py: copies of the shared oracles,
     unchanged but for a header comment) in that scratch directory with the case's flags, every engine
     flag given explicitly;
  3. checks that the property the case is meant to exercise did occur (retractions, chunking, the
     slot limit binding, the latch at t = 0, cache hits and evictions, ...) and stops if it did not;
  4. writes the fixture directory tests/fixtures/golden/<engine>/<case>/: scenario.toml (the same
     case as a servesim scenario, with the numbers the check found), workload.csv, the oracle's
     requests.csv unchanged, its summary.json (SGLang) or meta.json (vLLM) unchanged, oracle.txt (the
     command line, the engine version, the sha256 of every file the oracle wrote), and steps.csv if it
     is at most 300 KB, otherwise steps-digest.csv (its decision rows only, see the fixtures' README).
     A case where the engine is meant to raise out of memory (`crashes=True`) must make the oracle
     stop with SGLang's error; it writes crash.csv (when, the tokens asked for, the tokens free)
     and steps.csv instead of requests.csv and the summary.

Needs the two oracle virtualenvs (set up once; see README-sglang.md and README-vllm.md beside this
file; Python 3.11 was used):
    python3 -m venv /tmp/oracle-sglang && /tmp/oracle-sglang/bin/pip install --upgrade pip \
        && /tmp/oracle-sglang/bin/pip install "sglang==0.5.23"     # ~11 GB, ~30 min
    python3 -m venv /tmp/oracle-vllm && /tmp/oracle-vllm/bin/pip install --upgrade pip \
        && /tmp/oracle-vllm/bin/pip install "vllm==0.33.0"         # ~9 GB, ~20 min
Other locations: set SGLANG_PY / VLLM_PY to the two interpreters. This script itself needs only a
Python 3 (it was run with 3.11.7).

Cost: each oracle run spends 15-80 s importing sglang / vLLM (on a 2-core box shared with compilers,
depending on the load) and then runs ~500-2,000 scheduler steps per wall second; a full run took
11-19 min on such a box with moderate other load (14-57 s per case, the case study 70-100 s), and
would take ~40 min under heavy load. The per-case wall times are printed. Runs are sequential on purpose.

Reruns are byte-identical: every fixture file depends only on the case definitions, the two oracle
scripts and the engine versions (the oracles are deterministic, their outputs contain no wall-clock
times or absolute paths, and PYTHONHASHSEED is pinned for the oracle processes).
"""
import argparse
import bisect
import collections
import csv
import hashlib
import io
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from decimal import Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "golden")
STEPS_LIMIT_BYTES = 300_000
SGLANG_PY = os.environ.get("SGLANG_PY", "/tmp/oracle-sglang/bin/python")
VLLM_PY = os.environ.get("VLLM_PY", "/tmp/oracle-vllm/bin/python")
EXPECTED = {"sglang": "0.5.23", "vllm": "0.33.0"}


class CheckFailed(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise CheckFailed(msg)


# ------------------------------------------------------------------------------------------------
# Numbers written as decimal strings, so that the scenario's units convert exactly to the oracle's
# ------------------------------------------------------------------------------------------------
class Num:
    """A float given as a decimal string: written verbatim into the TOML, scaled exactly for the
    oracle's flags (e.g. Num("12.0") ms -> "0.012" s)."""

    def __init__(self, text):
        self.text = text
        self.dec = Decimal(text)

    def scaled(self, divisor):
        d = (self.dec / Decimal(divisor)).normalize()
        s = format(d, "f")
        return s if "." in s else s + ".0"


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Num):
        return v.text
    return json.dumps(v, ensure_ascii=False)


# ------------------------------------------------------------------------------------------------
# Step-time models (servesim's units; see the [engine.step_time] keys)
# ------------------------------------------------------------------------------------------------
def step_time(decode_base_ms, decode_per_seq_ms, decode_per_kv_token_ns, prefill_per_token_us,
              prefill_base_ms=None):
    st = {"model": "linear", "decode_base_ms": Num(decode_base_ms),
          "decode_per_seq_ms": Num(decode_per_seq_ms),
          "decode_per_kv_token_ns": Num(decode_per_kv_token_ns)}
    if prefill_base_ms is not None:
        st["prefill_base_ms"] = Num(prefill_base_ms)
    st["prefill_per_token_us"] = Num(prefill_per_token_us)
    return st


# SGLang: decode = a + b*batch + c*kv_tokens; prefill = p0 + p1*extend_tokens
SG_README = step_time("10.0", "0.1", "0.0", "50.0", prefill_base_ms="10.0")   # the oracle's defaults
SG_KV = step_time("15.0", "0.3", "20.0", "40.0", prefill_base_ms="10.0")
SG_B2 = step_time("12.0", "0.8", "60.0", "60.0", prefill_base_ms="15.0")       # scenarios/case-study-b2.toml
SG_DEFAULTS = step_time("35.0", "0.3", "0.0", "120.0", prefill_base_ms="10.0")  # servesim's linear defaults
# vLLM: step = a + b*decode_reqs + c*prefill_tokens + d*kv_tokens (no prefill base)
VL_README = step_time("10.0", "0.1", "0.0", "50.0")
VL_KV = step_time("12.0", "0.2", "10.0", "40.0")


# ------------------------------------------------------------------------------------------------
# Workloads
# ------------------------------------------------------------------------------------------------
def lognormal(mean, cv, hi=None):
    return ("lognormal", mean, cv, hi)


def uniform(lo, hi):
    return ("uniform", lo, hi)


def draw(rng, spec):
    if spec[0] == "lognormal":
        _, mean, cv, hi = spec
        if cv <= 0:
            x = mean
        else:   # the same formula as sglang_oracle.py's generator
            s2 = math.log(1.0 + cv * cv)
            x = rng.lognormvariate(math.log(mean) - s2 / 2.0, math.sqrt(s2))
        x = max(1, int(round(x)))
        return min(x, hi) if hi else x
    if spec[0] == "uniform":
        return rng.randint(spec[1], spec[2])
    raise ValueError(spec)


@dataclass
class Row:
    prompt: int
    output: int
    arrival: float       # seconds, already rounded to 6 decimals (0.0 in a closed loop)
    max_new: int
    ignore_eos: bool
    group: str = ""
    prefix: int = 0


def gen(seed, n, prompt, output, rate=0.0, max_new=None, ignore_eos=False, groups=(), none=0.0,
        burst=0, lead=(), per_arrival=1):
    """Requests in send order. Draws, per request: the Poisson gap (if rate > 0), the prompt, the
    output, a max_new_tokens choice (if max_new is a list), the prefix group (if groups). With a
    lognormal prompt/output and no list or groups this is sglang_oracle.py's generator; with uniform
    lengths it is vllm_oracle.py's `gen` (same seed, same requests).
    max_new: an int, a list to choose from, or "output" (= the output length: the request stops by
    length; for vLLM every request is so). The prompt of a grouped request is its group's prefix plus
    the drawn length. burst: the first `burst` requests all arrive at t = 0 (then Poisson).
    lead: group names imposed on the first requests (drawn as usual, then regrouped).
    per_arrival: requests arrive in bunches of this many at one instant (the Poisson rate is then
    the rate of bunches)."""
    rng = random.Random(seed)
    rows = []
    t = 0.0
    for i in range(n):
        if rate > 0 and i >= burst and (i - burst) % per_arrival == 0:
            t += rng.expovariate(rate)
        p = draw(rng, prompt)
        o = draw(rng, output)
        if isinstance(max_new, list):
            m = rng.choice(max_new)
        elif max_new == "output":
            m = o
        else:
            m = max_new
        g, pt = "", 0
        if groups:
            g, pt = ("", 0) if rng.random() < none else rng.choice(groups)
            if i < len(lead):
                g, pt = lead[i], dict(groups)[lead[i]]
        rows.append(Row(prompt=p + pt, output=o, arrival=round(t, 6) if rate > 0 else 0.0,
                        max_new=m, ignore_eos=ignore_eos, group=g, prefix=pt))
    return rows


def mixed_rows(seed, half_ignore_eos=False):
    """The small workloads of the boundary cases found by mutation, drawn with Python's
    random.Random(seed): 3-30 requests, prompts of 1-60 or 60-600 tokens, outputs of 1-600,
    max_new_tokens the output or 1-800, gaps of 0, 5 ms, 30 ms or 200 ms; with
    `half_ignore_eos` each request is ignore_eos with probability 1/2 (its output then its
    max_new_tokens)."""
    rnd = random.Random(seed)
    rows, t = [], 0.0
    for _ in range(rnd.randint(3, 30)):
        p = rnd.choice([rnd.randint(1, 60), rnd.randint(60, 600)])
        o = rnd.randint(1, 600)
        m = rnd.choice([o, rnd.randint(1, 800)])
        arrival = round(t, 6)
        ie = half_ignore_eos and rnd.random() < 0.5
        rows.append(Row(prompt=p, output=m if ie else o, arrival=arrival, max_new=m,
                        ignore_eos=ie))
        t += rnd.choice([0, 0, 0.005, 0.03, 0.2])
    return rows


def one_at_a_time(prefix, prompts, output, max_new, ignore_eos=False):
    """Members of one group (prefix `prefix` tokens) with these prompt lengths, sent 1 s apart from
    t = 0, each done before the next comes (the hand-sized cache cases)."""
    return [Row(prompt=p, output=output, arrival=float(i), max_new=max_new, ignore_eos=ignore_eos,
                group="p", prefix=prefix) for i, p in enumerate(prompts)]

def fmt_arrival(x):
    return f"{x:.6f}"


def write_servesim_workload(path, rows, with_prefix):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["prompt_tokens", "output_tokens", "arrival_s", "max_new_tokens", "ignore_eos"]
                   + (["prefix_group", "prefix_tokens"] if with_prefix else []))
        for r in rows:
            w.writerow([r.prompt, r.output, fmt_arrival(r.arrival), r.max_new,
                        "true" if r.ignore_eos else "false"]
                       + ([r.group, r.prefix] if with_prefix else []))


def write_oracle_workload(path, engine, rows, with_prefix):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        if engine == "sglang":
            w.writerow(["id", "arrival", "prompt_tokens", "output_tokens", "max_new_tokens",
                        "ignore_eos"] + (["prefix_group", "prefix_tokens"] if with_prefix else []))
            for i, r in enumerate(rows):
                w.writerow([i, fmt_arrival(r.arrival), r.prompt, r.output, r.max_new,
                            int(r.ignore_eos)] + ([r.group, r.prefix] if with_prefix else []))
        else:
            # vllm_oracle.py gives every request SamplingParams(max_tokens=output_tokens,
            # ignore_eos=True): the servesim rows say so explicitly
            w.writerow(["id", "arrival", "prompt_tokens", "output_tokens"]
                       + (["prefix_group", "prefix_tokens"] if with_prefix else []))
            for i, r in enumerate(rows):
                assert r.ignore_eos and r.max_new == r.output, "vLLM rows stop by length"
                w.writerow([i, fmt_arrival(r.arrival), r.prompt, r.output]
                           + ([r.group, r.prefix] if with_prefix else []))


# ------------------------------------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------------------------------------
SG_ENGINE = dict(kv_capacity_tokens=20000, page_size=1, max_running_requests=64,
                 chunked_prefill_size=8192, max_prefill_tokens=16384, schedule_policy="fcfs",
                 schedule_conservativeness=Num("1.0"), disable_radix_cache=True,
                 disable_overlap_schedule=True, enable_mixed_chunk=False)
VL_ENGINE = dict(num_gpu_blocks_override=600, block_size=16, max_num_seqs=256,
                 max_num_batched_tokens=2048, max_model_len=None, enable_chunked_prefill=True,
                 long_prefill_token_threshold=0, scheduler_reserve_full_isl=True,
                 async_scheduling=False, enable_prefix_caching=False)


@dataclass
class Case:
    engine: str
    name: str
    what: str                 # what the case exercises (comment + description)
    rows: callable            # () -> [Row]
    closed: int               # closed-loop concurrency; 0 = open loop on arrival_s
    engine_keys: dict
    step: dict
    check: callable           # (Out) -> str with the numbers that show the property
    max_sim_s: Num = None     # the oracle's --horizon
    prefix_columns: bool = False
    crashes: bool = False     # the engine raises out of memory: the oracle must stop with it
    context_len: int = 0      # SGLang: the model's context length (model.context_len); 0 = none
    results: dict = field(default_factory=dict)

    @property
    def key(self):
        return f"{self.engine}/{self.name}"


def sg(name, what, rows, closed, step, check, max_sim_s=None, prefix_columns=False,
       crashes=False, context_len=0, **engine):
    keys = dict(SG_ENGINE)
    for k, v in engine.items():
        assert k in keys, k
        keys[k] = v
    return Case("sglang", name, what, rows, closed, keys, step, check,
                Num(max_sim_s) if max_sim_s else None, prefix_columns, crashes, context_len)


def vl(name, what, rows, closed, step, check, prefix_columns=False, **engine):
    keys = dict(VL_ENGINE)
    for k, v in engine.items():
        assert k in keys, k
        keys[k] = v
    assert keys["max_model_len"], "give max_model_len explicitly"
    return Case("vllm", name, what, rows, closed, keys, step, check, None, prefix_columns)


# ---- output access and statistics ------------------------------------------------------------
class Out:
    def __init__(self, case, out_dir, rows, stdout):
        self.case = case
        self.rows = rows
        self.stdout = stdout
        self.steps = read_csv(os.path.join(out_dir, "steps.csv"))
        self.reqs = read_csv(os.path.join(out_dir, "requests.csv"))
        if case.engine == "sglang":
            with open(os.path.join(out_dir, "summary.json")) as f:
                self.summary = json.load(f)
        else:
            with open(os.path.join(out_dir, "meta.json")) as f:
                self.summary = json.load(f)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fnum(x):
    return float(x) if x not in ("", None) else None


def out_of_order_admissions(o, key):
    """Requests first admitted before some request sent earlier (workload order = send order)."""
    latest = -1.0
    n = 0
    for r in o.reqs:
        a = fnum(r[key])
        a = math.inf if a is None else a
        if a < latest - 1e-12:
            n += 1
        latest = max(latest, a)
    return n


def sg_common(o):
    """Checks every SGLang case must pass, and a few totals."""
    s = o.summary
    need(s["sglang_version"] == EXPECTED["sglang"], f"sglang {s['sglang_version']}")
    for r in o.reqs:
        sent, adm, ft, fin = (fnum(r[k]) for k in ("sent", "admitted", "first_token", "finish"))
        if adm is not None:
            need(sent <= adm + 1e-9, f"request {r['id']}: admitted before sent")
        if ft is not None:
            need(adm < ft, f"request {r['id']}: first token before admission")
        if fin is not None:
            need(ft <= fin, f"request {r['id']}: finish before first token")
            out, tgt, mx = int(r["output_tokens"]), int(r["output_target"]), int(r["max_new_tokens"])
            need(out == (mx if r["ignore_eos"] == "1" else min(tgt, mx)),
                 f"request {r['id']}: {out} output tokens")
    if not o.case.max_sim_s:
        need(s["finished"] == s["requests"] == len(o.rows), "not every request finished")


def vl_common(o):
    m = o.summary
    need(m["vllm_version"] == EXPECTED["vllm"], f"vllm {m['vllm_version']}")
    need(len(o.reqs) == len(o.rows), "requests.csv rows")
    for r, w in zip(o.reqs, o.rows):
        need(int(r["prompt_tokens"]) == w.prompt and int(r["output_tokens"]) == w.output,
             f"request {r['id']}: lengths")
        need(fnum(r["first_scheduled"]) < fnum(r["first_token"]) <= fnum(r["finish"]),
             f"request {r['id']}: times out of order")


def sg_counts(o):
    kinds = [r["kind"] for r in o.steps]
    return dict(steps=len(o.steps), prefill=kinds.count("prefill"), decode=kinds.count("decode"),
                mixed=kinds.count("mixed"), sim=o.summary["sim_time"],
                retr_events=o.summary["retraction_events"],
                retracted=o.summary["retracted_reqs_total"],
                retr_reqs=o.summary["requests_retracted_at_least_once"],
                finished=o.summary["finished"])


def vl_counts(o):
    pre = sum(int(r["preemptions"]) for r in o.steps)
    return dict(steps=len(o.steps), sim=float(o.steps[-1]["t_end"]), preemptions=pre,
                pre_steps=sum(1 for r in o.steps if r["preemptions"] != "0"),
                pre_reqs=sum(1 for r in o.reqs if r["num_preemptions"] != "0"))


def vl_prefill_steps_per_request(o):
    """Steps from a request's first scheduling to its first token (1 = the prompt in one chunk)."""
    starts = [float(r["t_start"]) for r in o.steps]
    ends = [float(r["t_end"]) for r in o.steps]
    res = []
    for r in o.reqs:
        i = bisect.bisect_left(starts, float(r["first_scheduled"]) - 1e-9)
        j = bisect.bisect_left(ends, float(r["first_token"]) - 1e-9)
        res.append(j - i + 1)
    return res


# ---- SGLang checks ------------------------------------------------------------------------------
def chk_sg_basic(o):
    sg_common(o)
    c = sg_counts(o)
    need(c["retracted"] == 0, "retractions")
    qmax = max(int(r["queued"]) for r in o.steps)
    return (f"{c['steps']} steps ({c['prefill']} prefill), no retraction, queue at most {qmax}, "
            f"decode batch at most {max(int(r['batch_size']) for r in o.steps if r['kind'] == 'decode')}")


def chk_sg_retract(min_events):
    def chk(o):
        sg_common(o)
        c = sg_counts(o)
        need(c["retr_events"] >= min_events, f"only {c['retr_events']} retraction events")
        length = sum(1 for r in o.reqs if r["finish_reason"] == "FINISH_LENGTH")
        return (f"{c['retracted']} retractions in {c['retr_events']} events "
                f"({c['retr_reqs']} requests retracted at least once); "
                f"{length} of {len(o.reqs)} requests stop at max_new_tokens, the rest by EOS")
    return chk


def sg_footprints_over_pool(o):
    """At each step start, the final footprint (prompt + max_new_tokens, as clipped) of the requests
    running then (admitted, not finished; only valid without retraction): (steps over the pool, peak)."""
    pool = o.case.engine_keys["kv_capacity_tokens"]
    adm = sorted((float(r["admitted"]), int(r["prompt_tokens"]) + int(r["max_new_tokens"]))
                 for r in o.reqs if r["admitted"] != "")
    fin = sorted((float(r["finish"]), int(r["prompt_tokens"]) + int(r["max_new_tokens"]))
                 for r in o.reqs if r["finish"] != "")
    ia = jf = cur = peak = over = 0
    for st in o.steps:
        t = float(st["t_start"])
        while ia < len(adm) and adm[ia][0] <= t + 1e-9:
            cur += adm[ia][1]
            ia += 1
        while jf < len(fin) and fin[jf][0] <= t + 1e-9:
            cur -= fin[jf][1]
            jf += 1
        peak = max(peak, cur)
        over += cur > pool
    return over, peak


def chk_sg_ignore_eos(o):
    sg_common(o)
    c = sg_counts(o)
    pool = o.case.engine_keys["kv_capacity_tokens"]
    need(all(r["ignore_eos"] == "1" for r in o.reqs), "ignore_eos")
    need(c["retracted"] == 0, "retractions")
    mrr = o.case.engine_keys["max_running_requests"]
    limited = sum(1 for r in o.steps if int(r["queued"]) > 0 and int(r["running"]) < mrr)
    need(limited >= 0.3 * len(o.steps), f"admission rarely memory-bound ({limited} steps)")
    over, peak = sg_footprints_over_pool(o)
    need(over > 0, "the running requests' final footprints always fit the pool")
    qmax = max(int(r["queued"]) for r in o.steps)
    kv = max(int(r["kv_used"]) for r in o.steps)
    return (f"requests queue (up to {qmax}) in {limited} of {c['steps']} steps with fewer than "
            f"{mrr} running: admission is memory-bound; the running requests' final footprints "
            f"(prompt + max_new_tokens) add up to more than the {pool}-token pool in {over} steps "
            f"(peak {peak}), which reserving every request's remaining tokens would never allow; "
            f"max KV used {kv}; no retraction")


def chk_sg_chunked(o):
    sg_common(o)
    c = sg_counts(o)
    chunk = o.case.engine_keys["chunked_prefill_size"]
    chunked_steps = sum(1 for r in o.steps if r["chunked"] == "1")
    multi = sum(1 for r in o.reqs if int(r["prefill_steps"]) >= 3)
    need(chunked_steps > 0 and multi > 0, "no chunking")
    need(max(int(r["extend_tokens"]) for r in o.steps) <= chunk, "a prefill above the chunk size")
    return (f"{chunked_steps} of {c['prefill']} prefill steps leave a chunked request in progress; "
            f"{multi} of {len(o.reqs)} requests take 3 or more prefill steps (prompts up to "
            f"{max(w.prompt for w in o.rows)} tokens, chunk {chunk})")


def chk_sg_max_running(o):
    sg_common(o)
    c = sg_counts(o)
    cap = o.case.engine_keys["max_running_requests"]
    dec = [int(r["batch_size"]) for r in o.steps if r["kind"] == "decode"]
    need(max(dec) == cap, f"max decode batch {max(dec)}")
    at = sum(1 for b in dec if b == cap)
    need(at >= 0.5 * len(dec), f"only {at} decode steps at the cap")
    qmax = max(int(r["queued"]) for r in o.steps)
    return (f"decode batch = max_running_requests = {cap} in {at} of {len(dec)} decode steps, never "
            f"above; up to {qmax} requests queued; {c['retracted']} retractions")


def chk_sg_reorder(o):
    sg_common(o)
    c = sg_counts(o)
    n = out_of_order_admissions(o, "admitted")
    need(n > 0, "admissions in send order")
    return (f"{n} of {len(o.reqs)} requests admitted before a request sent earlier "
            f"(FCFS admits in send order); {c['retracted']} retractions")


def chk_sg_latch(o):
    sg_common(o)
    c = sg_counts(o)
    s0, s1 = o.steps[0], o.steps[1]
    need(s0["kind"] == "prefill" and s1["kind"] == "prefill", "two prefills at the start")
    need(float(s0["t_start"]) == 0.0 and s1["t_start"] == s0["t_end"], "the second prefill at once")
    need(s0["batch_is_full"] == "1", "latch closed by the first admission")
    n0, n1 = int(s0["batch_size"]), int(s1["batch_size"])
    # the next prefill after the first two
    third = next(r for r in o.steps[2:] if r["kind"] != "decode")
    first_fin = next(r for r in o.steps if r["finished"] != "0")
    conc = o.case.closed
    return (f"at t = 0 the first prefill admits {n0} of {conc} requests and sets the latch (NO_TOKEN), "
            f"the first prefill batch becomes the running batch and loses it, so a second prefill "
            f"admits {n1} more at t = {float(s1['t_start']):.4f} s; then the latch holds: the next "
            f"prefill is step {third['step']} at t = {float(third['t_start']):.2f} s (first finish "
            f"at t = {float(first_fin['t_end']):.2f} s); {c['steps']} steps, {c['retracted']} "
            f"retractions, {c['finished']} finished by the horizon")


def chk_sg_case_study(o):
    sg_common(o)
    c = sg_counts(o)
    s0, s1 = o.steps[0], o.steps[1]
    need(c["retracted"] > 0, "no retraction")
    dec = [int(r["batch_size"]) for r in o.steps if r["kind"] == "decode"]
    # time-weighted mean running (decode batch) over decode steps
    tw = sum((float(r["t_end"]) - float(r["t_start"])) * int(r["batch_size"])
             for r in o.steps if r["kind"] == "decode")
    tt = sum(float(r["t_end"]) - float(r["t_start"]) for r in o.steps if r["kind"] == "decode")
    return (f"first prefills admit {s0['batch_size']} then {s1['batch_size']} at "
            f"t = {float(s1['t_start']):.3f} s; by the horizon {c['finished']} finished, "
            f"{c['retracted']} retractions in {c['retr_events']} events, mean decode batch "
            f"{tw / tt:.1f} (time-weighted), max {max(dec)}")


def chk_sg_radix_retract(o):
    sg_common(o)
    c = sg_counts(o)
    need(c["retr_events"] > 0, "no retraction")
    need(o.summary["args"]["enable_radix_cache"], "radix cache")
    # the same workload with the cache off (recorded before this case in CASES order)
    off = os.path.join(FIXTURES, "sglang", "retract-closed-long-b", "requests.csv")
    need(os.path.exists(off), f"{off} missing: record retract-closed-long-b first")
    need(read_csv(off) == o.reqs, "per-request results differ from retract-closed-long-b's")
    steps_kv_max = max(int(r["kv_used"]) for r in o.steps)
    return (f"radix cache on, no shared prefixes: {c['retracted']} retractions in "
            f"{c['retr_events']} events ({c['retr_reqs']} requests), {c['steps']} steps; "
            f"requests.csv identical to retract-closed-long-b's (cache off); max kv_used "
            f"{steps_kv_max} (tree tokens included)")


def chk_sg_clipped(o):
    sg_common(o)
    c = sg_counts(o)
    clipped = [(w, r) for w, r in zip(o.rows, o.reqs) if int(r["max_new_tokens"]) < w.max_new]
    need(clipped, "no max_new_tokens clipped")
    pool = o.case.engine_keys["kv_capacity_tokens"]
    need(all(int(r["max_new_tokens"]) == pool - w.prompt - 2 for w, r in clipped), "clip value")
    length = sum(1 for r in o.reqs if r["finish_reason"] == "FINISH_LENGTH")
    need(length > 0, "no length stop at the clipped value")
    dec = max(int(r["batch_size"]) for r in o.steps if r["kind"] == "decode")
    return (f"{len(clipped)} of {len(o.reqs)} requests have max_new_tokens clipped to "
            f"pool - prompt - 2 (below the 4,096 reservation cap), {length} stop there by length; "
            f"each new request is then charged pool - 1 tokens, so it is admitted only into an empty "
            f"pool: decode batch at most {dec}; {c['retracted']} retractions, {c['steps']} steps")


def chk_sg_lone_at_cap(o):
    """A retraction leaves one request, whose max_new_tokens the empty pool clipped, alone in the
    batch; it grows to that cap and finishes by length: SGLang's abort of a last request that
    cannot grow (`retract_decode`) is not taken."""
    sg_common(o)
    c = sg_counts(o)
    pool = o.case.engine_keys["kv_capacity_tokens"]
    retractions = [r for r in o.steps if r["retracted"] != "0"]
    need(retractions, "no retraction")
    need(all(r["batch_size"] == "1" for r in retractions), "a retraction left more than one")
    capped = [r for w, r in zip(o.rows, o.reqs) if int(r["max_new_tokens"]) == pool - w.prompt - 2]
    need(capped, "no request clipped to pool - prompt - 2")
    need(all(r["finish_reason"] == "FINISH_LENGTH"
             and r["output_tokens"] == r["max_new_tokens"] for r in capped),
         "a clipped request stopped short of its cap")
    need(all(r["finish_reason"] in ("FINISH_LENGTH", "FINISH_MATCHED_TOKEN") for r in o.reqs),
         "a request was aborted")
    alone = max(int(r["kv_used"]) for r in o.steps if r["kind"] == "decode"
                and r["batch_size"] == "1")
    return (f"{c['retracted']} retraction(s), each leaving one request; "
            + ", ".join(f"request {r['id']} (prompt {r['prompt_tokens']}) reaches its cap of "
                        f"{r['max_new_tokens']} new tokens by length" for r in capped)
            + f"; alone, the batch uses up to {alone} of the pool's {pool} tokens; "
            f"no request is aborted; {c['steps']} steps")


def chk_sg_context_caps(o):
    """A context shorter than the pool sets the request-length limits: max_new_tokens is clipped
    to max_req_len - prompt - 1, where max_req_len = context_len - 1."""
    sg_common(o)
    c = sg_counts(o)
    ctx = o.case.context_len
    clipped = [(w, r) for w, r in zip(o.rows, o.reqs) if int(r["max_new_tokens"]) < w.max_new]
    need(clipped, "no max_new_tokens clipped")
    need(all(int(r["max_new_tokens"]) == ctx - 1 - w.prompt - 1 for w, r in clipped), "clip value")
    longest = max(w.prompt for w in o.rows)
    need(longest == ctx - 1 - 5 - 1, "the longest prompt is not one below the refusal bound")
    length = sum(1 for r in o.reqs if r["finish_reason"] == "FINISH_LENGTH")
    need(length > 0, "no length stop at the clipped value")
    return (f"{len(clipped)} of {len(o.reqs)} requests have max_new_tokens clipped to "
            f"context_len - prompt - 2 (the pool would allow more), {length} stop there by "
            f"length; the longest prompt, {longest} tokens, is one below the refusal bound "
            f"context_len - 6; {c['steps']} steps")


def chk_sg_mixed(o):
    sg_common(o)
    c = sg_counts(o)
    need(c["mixed"] > 0, "no mixed step")
    return (f"{c['mixed']} mixed steps (a prefill chunk plus the running decodes), "
            f"{c['prefill']} pure prefill steps, {c['decode']} decode steps")


def chk_sg_first_prefill_alone(why):
    """The first prefill takes request 0 alone while the others sent at t = 0 wait (`why` says which
    budget stops it); they are admitted later."""
    def chk(o):
        sg_common(o)
        first = o.steps[0]
        need(first["kind"] == "prefill" and first["prefill_ids"] == "0", "the first prefill "
             f"is not request 0 alone: {first['prefill_ids']}")
        waiting = int(first["queued"])
        need(waiting >= 1, "nobody waits after the first prefill")
        later = [r for r in o.steps if r["kind"] == "prefill" and r["prefill_ids"] != "0"]
        need(later, "the others are never admitted")
        return (f"the first prefill admits request 0 alone with {waiting} waiting ({why}); the next "
                f"admission at {later[0]['t_start']} s; {len(o.steps)} steps")
    return chk


def chk_sg_mixed_chunks(o):
    sg_common(o)
    c = sg_counts(o)
    chunked = sum(1 for r in o.steps if r["chunked"] == "1")
    need(c["mixed"] > 0 and chunked > 0, "no mixed step with a chunk to go on")
    return (f"{c['mixed']} mixed steps, {chunked} steps with a prompt still being chunked, "
            f"{c['retracted']} retractions, {c['steps']} steps")


def chk_sg_some_ignore_eos(o):
    sg_common(o)
    c = sg_counts(o)
    ie = sum(1 for r in o.reqs if r["ignore_eos"] == "1")
    need(0 < ie < len(o.reqs), "not a mix of ignore_eos and other requests")
    return (f"{ie} of {len(o.reqs)} requests ignore_eos, {c['prefill']} prefill steps, "
            f"{c['retracted']} retractions, {c['steps']} steps")


def chk_sg_first_above_input_budget(o):
    sg_common(o)
    first = o.steps[0]
    cap = o.case.engine_keys["max_prefill_tokens"]
    need(first["kind"] == "prefill" and first["prefill_ids"] == "0"
         and int(first["extend_tokens"]) > cap, "the first prefill is not request 0 above the cap")
    return (f"chunking off: request 0's {first['extend_tokens']} prompt tokens are prefilled at "
            f"once although max_prefill_tokens is {cap} (the first request of a pass may exceed "
            f"it); {len(o.steps)} steps")


def chk_sg_ignore_eos_queue(o):
    sg_common(o)
    need(all(r["ignore_eos"] == "1" for r in o.reqs), "ignore_eos")
    both = [r for r in o.steps if r["kind"] == "prefill" and int(r["batch_size"]) >= 2
            and int(r["running"]) >= 1]
    need(both, "no prefill admitting two requests while another runs")
    return (f"ignore_eos with the radix cache off: requests {both[0]['prefill_ids']} are admitted "
            f"in one prefill at {both[0]['t_start']} s while {both[0]['running']} runs "
            f"(add_one_req_ignore_eos counts the tokens the earlier-finishing ones free); "
            f"finishes at " + ", ".join(r["finish"] for r in o.reqs) + " s")


class Crash:
    """What the oracle left when SGLang raised out of memory: its steps, and the error's numbers."""
    def __init__(self, out_dir, stderr):
        self.steps = read_csv(os.path.join(out_dir, "steps.csv"))
        ask = re.search(r"Try to allocate (\d+) tokens", stderr)
        free = re.search(r"Available full tokens: (\d+)", stderr)
        need("Out of memory. Try to lower your batch size." in stderr and ask and free,
             "the oracle failed, but not with SGLang's out-of-memory error")
        self.need_tokens = int(ask.group(1))
        self.free_tokens = int(free.group(1))
        # The batch that could not be allocated was being built when the last step ended.
        self.at = self.steps[-1]["t_end"]


def chk_sg_out_of_memory(o):
    last = o.steps[-1]
    need(last["kind"] == "mixed" and last["chunked"] == "1",
         "the last step before the error is not a mixed step with a chunk to go on")
    need(o.need_tokens > o.free_tokens, "the error asked for no more than was free")
    return (f"after {len(o.steps)} steps (the last a mixed step with a prompt still being chunked) "
            f"SGLang raises out of memory at {o.at} s: {o.need_tokens} tokens to allocate, "
            f"{o.free_tokens} free")


def chk_sg_conservative(o):
    sg_common(o)
    c = sg_counts(o)
    nt = o.summary["new_token_ratio"]
    need(nt["init"] != 0.7, "conservativeness without effect")
    return (f"new_token_ratio init {nt['init']:g}, floor {nt['min']:g}, decay {nt['decay']:.7f} per "
            f"step: {c['retracted']} retractions in {c['retr_events']} events ({c['retr_reqs']} "
            f"requests); {c['steps']} steps, {c['sim']:.1f} s")


def sg_prefix_stats(o):
    pc = o.summary["prefix_cache"]
    need(pc["radix_cache_enabled"], "radix cache")
    first = {}
    partial = 0
    full = 0
    zero = 0
    for r in o.reqs:
        g = r["prefix_group"]
        if not g or r["admitted"] == "":
            continue
        p, ct = int(r["prefix_tokens"]), int(r["cached_tokens"])
        if g not in first:
            first[g] = r["id"]
        elif ct >= p:
            full += 1
        else:
            partial += 1
            zero += ct == 0
    o.zero_hits = zero
    return pc, full, partial


def chk_sg_prefix_evict(o):
    sg_common(o)
    pc, full, partial = sg_prefix_stats(o)
    need(pc["evicted_tokens"] > 0, "no eviction")
    need(partial > 0, "no request missed its evicted prefix")
    return (f"{pc['evicted_tokens']} tokens evicted; of the grouped requests after each group's "
            f"first, {full} hit their whole prefix and {partial} found it evicted (partly or wholly); "
            f"cached {pc['cached_tokens_at_first_admission']} of {pc['prompt_tokens_admitted']} "
            f"prompt tokens")


def chk_sg_prefix_retract(o):
    sg_common(o)
    c = sg_counts(o)
    pc, full, partial = sg_prefix_stats(o)
    need(c["retr_events"] > 0, "no retraction")
    ret_grouped = sum(1 for r in o.reqs if r["retractions"] != "0" and r["prefix_group"])
    need(ret_grouped > 0, "no retracted grouped request")
    readmit_hits = sum(int(r["cached_tokens"]) for r in o.steps) - \
        pc["cached_tokens_at_first_admission"]
    return (f"{c['retracted']} retractions in {c['retr_events']} events, {ret_grouped} of the retracted "
            f"requests have a shared prefix; re-admissions hit {readmit_hits} cached tokens in all; "
            f"{pc['evicted_tokens']} tokens evicted")


def chk_sg_prefix_groups(o):
    sg_common(o)
    pc, full, partial = sg_prefix_stats(o)
    need(full > 0, "no hit")
    groups = ", ".join(f"{g} {v['prefix_tokens']}" for g, v in pc["groups"].items())
    chunked = sum(1 for r in o.steps if r["chunked"] == "1")
    need(o.zero_hits > 0, "no member computing its prefix again")
    return (f"groups {groups}: {full} later members hit their whole prefix, "
            f"{partial - o.zero_hits} a part of it and {o.zero_hits} nothing (admitted in the same "
            f"batch as the first or while it was being prefilled); {chunked} steps with a chunked "
            f"prefill in progress; cached {pc['cached_tokens_at_first_admission']} of "
            f"{pc['prompt_tokens_admitted']} prompt tokens")


def chk_sg_prefix_policy(o):
    sg_common(o)
    c = sg_counts(o)
    pc, full, partial = sg_prefix_stats(o)
    n = out_of_order_admissions(o, "admitted")
    need(n > 0, "admissions in send order")
    return (f"{n} of {len(o.reqs)} requests admitted before a request sent earlier (FCFS: none); "
            f"cached {pc['cached_tokens_at_first_admission']} of {pc['prompt_tokens_admitted']} "
            f"prompt tokens; {c['retracted']} retractions; {pc['evicted_tokens']} tokens evicted")


def chk_sg_prefix_ignore_eos(o):
    sg_common(o)
    c = sg_counts(o)
    pc, full, partial = sg_prefix_stats(o)
    need(full > 0, "no hit")
    kv = max(int(r["kv_used"]) for r in o.steps)
    return (f"ignore_eos requests with the radix cache on (PrefillAdder.add_one_req, not the "
            f"ignore_eos rule): {full} hits of a whole prefix, cached "
            f"{pc['cached_tokens_at_first_admission']} of {pc['prompt_tokens_admitted']} prompt "
            f"tokens, max KV used {kv}, {c['retracted']} retractions, {pc['evicted_tokens']} evicted")


def chk_sg_prefix_past_chunk(o):
    """A prefix one token longer than a chunk: the first request publishes it in two inserts, so
    the tree has a node boundary one token before the prefix ends; later members hit it whole."""
    sg_common(o)
    first, *later = o.reqs
    need(int(first["prefill_steps"]) > 1, "the first prompt is not chunked")
    chunk = o.case.engine_keys["chunked_prefill_size"]
    need(all(int(r["prefix_tokens"]) == chunk + 1 for r in o.reqs), "prefix of chunk + 1 tokens")
    need(later and all(int(r["cached_tokens"]) == chunk + 1 for r in later), "a later hit")
    return (f"the first request is prefilled in {first['prefill_steps']} chunks of {chunk}; "
            f"the later ones hit all {chunk + 1} prefix tokens")

def chk_sg_retract_frees_for_remaining(o):
    """Retractions with the radix cache holding shared prefixes: each release evicts the tree until
    the remaining requests' next RETRACT_DECODE_STEPS tokens are free, and later members hit what
    is left."""
    sg_common(o)
    retracted = sum(int(r["retractions"]) for r in o.reqs)
    need(retracted > 0, "no retraction")
    hits = sum(1 for r in o.reqs if int(r["cached_tokens"]) > 0)
    need(hits > 0, "no hit")
    return (f"{retracted} retractions of {sum(1 for r in o.reqs if int(r['retractions']))} "
            f"requests; {hits} of {len(o.reqs)} requests hit a cached prefix")


def chk_sg_whole_prompt_hit(o):
    """A prompt that is wholly a cached prefix hits all of it but its last token; a longer prompt
    of the same group hits the whole prefix."""
    sg_common(o)
    hits = [(int(r["prompt_tokens"]), int(r["prefix_tokens"]), int(r["cached_tokens"]))
            for r in o.reqs[1:]]
    whole = [(p, c) for p, x, c in hits if p == x]
    need(whole and all(c == p - 1 for p, c in whole), "a whole-prompt hit short of its last token")
    longer = [(x, c) for p, x, c in hits if p > x]
    need(longer and all(c == x for x, c in longer), "a longer prompt's hit")
    return ("; ".join(f"a {p}-token prompt that is wholly cached hits {c} tokens" for p, c in whole)
            + "; " + "; ".join(f"a longer one of the same {x}-token prefix hits {c}"
                               for x, c in longer))


def chk_sg_lpm_bounds(o):
    """lpm near its bounds: some requests are admitted out of send order, and some hit."""
    sg_common(o)
    hits = sum(1 for r in o.reqs if int(r["cached_tokens"]) > 0)
    need(hits > 0, "no hit")
    moved = out_of_order_admissions(o, "admitted")
    need(moved > 0, "admission in send order")
    return (f"{moved} requests admitted out of send order; {hits} of {len(o.reqs)} requests hit "
            f"a cached prefix")


# ---- vLLM checks --------------------------------------------------------------------------------
def chk_vl_preempt(o):
    vl_common(o)
    c = vl_counts(o)
    need(c["preemptions"] > 0, "no preemption")
    usable = o.summary["effective"]["usable_blocks"]
    peak = max(int(r["kv_blocks_used"]) for r in o.steps)
    return (f"{c['preemptions']} preemptions in {c['pre_steps']} steps ({c['pre_reqs']} requests "
            f"preempted at least once); peak KV {peak} of {usable} usable blocks")


def chk_vl_chunked(o):
    vl_common(o)
    c = vl_counts(o)
    k = vl_prefill_steps_per_request(o)
    multi = sum(1 for x in k if x >= 2)
    budget = o.case.engine_keys["max_num_batched_tokens"]
    need(multi > 0, "no chunked prompt")
    full = sum(1 for r in o.steps if int(r["num_scheduled_tokens"]) == budget)
    return (f"{multi} of {len(o.reqs)} prompts span 2 or more steps (up to {max(k)}), {full} steps "
            f"use the whole {budget}-token budget; {c['preemptions']} preemptions")


def chk_vl_no_chunk(o):
    vl_common(o)
    c = vl_counts(o)
    k = vl_prefill_steps_per_request(o)
    budget = o.case.engine_keys["max_num_batched_tokens"]
    # no prompt is split: every request gets its first token at the end of its first step
    need(all(x == 1 for x in k), "a prompt split over steps")
    need(c["preemptions"] == 0, "preemptions (the waiting list below assumes none)")
    # head-of-line blocking: the first waiting request does not fit the budget left in the step,
    # while a later waiting one would have
    arr = [w.arrival for w in o.rows]
    first = [float(r["first_scheduled"]) for r in o.reqs]
    prompt = [w.prompt for w in o.rows]
    hol = 0
    for st in o.steps:
        t, rem = float(st["t_start"]), budget - int(st["num_scheduled_tokens"])
        waiting = [i for i in range(len(arr)) if arr[i] <= t < first[i]]
        if len(waiting) >= 2 and prompt[waiting[0]] > rem and any(
                prompt[i] <= rem for i in waiting[1:]):
            hol += 1
    need(hol > 0, "no head-of-line blocking")
    return (f"every prompt is prefilled in one step; in {hol} of {c['steps']} steps the head of "
            f"WAITING does not fit the {budget}-token budget left and blocks a later request that "
            f"would; no preemption")


def chk_vl_threshold(o):
    vl_common(o)
    c = vl_counts(o)
    thr = o.case.engine_keys["long_prefill_token_threshold"]
    k = vl_prefill_steps_per_request(o)
    capped = sum(1 for r, w in zip(o.reqs, o.rows) if w.prompt > thr)
    over = [r for r in o.steps if int(r["num_prefill_tokens"]) > thr * int(r["num_prefill_reqs"])]
    need(max(k) >= 2, "no split prompt")
    return (f"prefill chunks capped at {thr} tokens per request: {capped} of {len(o.reqs)} prompts "
            f"are longer and take up to {max(k)} steps; steps above the cap (allowed only when a "
            f"single request is running or waiting): {len(over)}; {c['preemptions']} preemptions")


def chk_vl_max_seqs(o):
    vl_common(o)
    c = vl_counts(o)
    cap = o.case.engine_keys["max_num_seqs"]
    run = [int(r["num_running"]) for r in o.steps]
    need(max(run) == cap, f"max running {max(run)}")
    at = sum(1 for x in run if x == cap)
    need(at >= 0.5 * len(run), "cap rarely binding")
    return (f"RUNNING = max_num_seqs = {cap} in {at} of {c['steps']} steps, never above, with up to "
            f"{max(int(r['num_waiting']) for r in o.steps)} waiting; {c['preemptions']} preemptions")


def vl_boundaries_to_first_schedule(o):
    """Per request: how many step starts fall in (arrival, first_scheduled] (sync: 1 when the
    request is scheduled at once; async: at least 2, the one-step lag; 0 = arrived to an idle
    engine)."""
    starts = [float(r["t_start"]) for r in o.steps]
    c = collections.Counter()
    for r in o.reqs:
        i = bisect.bisect_right(starts, float(r["arrival"]))
        j = bisect.bisect_right(starts, float(r["first_scheduled"]) + 1e-12)
        c[j - i] += 1
    return c


def chk_vl_async(o):
    vl_common(o)
    c = vl_counts(o)
    need(o.summary["scheduler_class"] == "AsyncScheduler", "scheduler class")
    text = (f"AsyncScheduler, batch queue of 2: {c['preemptions']} preemptions in {c['pre_steps']} "
            f"steps ({c['pre_reqs']} requests); {c['steps']} steps")
    if not o.case.closed:
        b = vl_boundaries_to_first_schedule(o)
        need(b[1] == 0 and b[2] > 0, f"no one-step lag: {sorted(b.items())[:4]}")
        text += (f"; no request is scheduled at the first step start after its arrival, {b[2]} at "
                 f"the second (the one-step lag; in sync mode the first), {b[0]} arrived to an "
                 f"idle engine")
    return text


def chk_vl_at_max_model_len(o):
    """Every request asks for exactly what max_model_len leaves after its prompt and runs to it;
    some are preempted and resumed on the way."""
    vl_common(o)
    c = vl_counts(o)
    need(o.summary["scheduler_class"] == "AsyncScheduler", "scheduler class")
    mml = o.case.engine_keys["max_model_len"]
    need(all(int(r["prompt_tokens"]) + int(r["output_tokens"]) == mml for r in o.reqs),
         "a request short of max_model_len")
    need(c["pre_reqs"] > 0, "no preemption")
    return (f"AsyncScheduler: all {len(o.reqs)} requests reach max_model_len = {mml} tokens "
            f"(prompt + output); {c['preemptions']} preemptions of {c['pre_reqs']} requests; "
            f"{c['steps']} steps")


def vl_prefix_stats(o):
    pc = o.summary["prefix_cache"]
    need(pc["enabled"], "prefix caching on")
    bs = o.case.engine_keys["block_size"]
    first, full, partial = {}, 0, 0
    for r in o.reqs:
        g = r["prefix_group"]
        if not g:
            continue
        if g not in first:
            first[g] = r["id"]
            continue
        if int(r["num_cached_tokens"]) >= int(r["prefix_tokens"]) // bs * bs:
            full += 1
        else:
            partial += 1
    return pc, full, partial


def chk_vl_prefix_evict(o):
    vl_common(o)
    c = vl_counts(o)
    pc, full, partial = vl_prefix_stats(o)
    need(pc["blocks_evicted"] > 0, "no eviction")
    need(partial > 0, "no prefix found evicted")
    return (f"{pc['blocks_evicted']} cached blocks evicted; of the grouped requests after each "
            f"group's first, {full} hit all the full blocks of their prefix and {partial} found it "
            f"partly or wholly evicted; {pc['num_cached_tokens']} of {pc['prompt_tokens']} prompt "
            f"tokens cached; {c['preemptions']} preemptions")


def chk_vl_prefix_preempt(o):
    vl_common(o)
    c = vl_counts(o)
    pc, full, partial = vl_prefix_stats(o)
    need(c["preemptions"] > 0, "no preemption")
    extra = pc["cache_hit_tokens_incl_resumed"] - pc["num_cached_tokens"]
    need(extra > 0, "no resumed hit")
    return (f"{c['preemptions']} preemptions ({c['pre_reqs']} requests); resumed requests hit "
            f"{extra} cached tokens of their own earlier blocks on top of the "
            f"{pc['num_cached_tokens']} first-admission hits; {pc['blocks_evicted']} blocks evicted")


def chk_vl_prefix_groups(o):
    vl_common(o)
    c = vl_counts(o)
    pc, full, partial = vl_prefix_stats(o)
    need(full > 0, "no hit")
    first_sched = {}
    same = 0
    for r in o.reqs:
        g = r["prefix_group"]
        if not g:
            continue
        if g not in first_sched:
            first_sched[g] = r["first_scheduled"]
        elif r["first_scheduled"] == first_sched[g] and int(r["num_cached_tokens"]) > 0:
            same += 1
    need(same > 0, "no hit in the step that computes the prefix")
    groups = ", ".join(f"{g} {v['prefix_tokens']}" for g, v in pc["groups"].items())
    return (f"groups {groups}: {full} later members hit every full block of their prefix "
            f"({same} of them in the very step that first computes it), {partial} fewer; "
            f"{pc['num_cached_tokens']} of {pc['prompt_tokens']} prompt tokens "
            f"cached; {pc['blocks_evicted']} blocks evicted; {c['preemptions']} preemptions")


def chk_vl_prefix_async(o):
    r = chk_vl_prefix_preempt(o)
    need(o.summary["scheduler_class"] == "AsyncScheduler", "scheduler class")
    return "AsyncScheduler: " + r


def chk_vl_own_cache(o):
    """Prefix caching on, no shared prefixes: only a preempted request's own freed blocks can hit."""
    vl_common(o)
    c = vl_counts(o)
    pc = o.summary["prefix_cache"]
    need(pc["enabled"], "prefix caching on")
    need(c["preemptions"] > 0, "no preemption")
    need(pc["num_cached_tokens"] == 0, "a first admission hit")
    extra = pc["cache_hit_tokens_incl_resumed"]
    need(extra > 0, "no resumed hit")
    text = (f"{c['preemptions']} preemptions in {c['pre_steps']} steps ({c['pre_reqs']} requests); "
            f"no first-admission hit; resumed requests hit {extra} cached tokens of their own "
            f"freed blocks; {pc['blocks_evicted']} blocks evicted; {c['steps']} steps")
    if o.summary["scheduler_class"] == "AsyncScheduler":
        text = "AsyncScheduler: " + text
    return text


def chk_vl_whole_prompt_hit(o):
    """A prompt that is wholly a cached prefix hits all its full blocks but the one holding its last
    token; a longer prompt of the same group hits the whole prefix."""
    vl_common(o)
    bs = o.case.engine_keys["block_size"]
    hits = [(int(r["prompt_tokens"]), int(r["prefix_tokens"]), int(r["num_cached_tokens"]))
            for r in o.reqs[1:]]
    whole = [(p, c) for p, x, c in hits if p == x]
    need(whole and all(c == (p - 1) // bs * bs and p % bs == 0 for p, c in whole),
         "a whole-prompt hit short of its last block")
    longer = [(x, c) for p, x, c in hits if p > x]
    need(longer and all(c == x // bs * bs for x, c in longer), "a longer prompt's hit")
    return ("; ".join(f"a {p}-token prompt that is wholly cached hits {c} tokens" for p, c in whole)
            + "; " + "; ".join(f"a longer one of the same {x}-token prefix hits {c}"
                               for x, c in longer))


# ---- the cases ----------------------------------------------------------------------------------
LONG_B = lambda: gen(1, 300, lognormal(250, 0.3), lognormal(800, 0.6), max_new=900)
B2_LEN = dict(prompt=lognormal(250, 0.5, 32768), output=lognormal(4116, 0.2, 16384), max_new=16384)
VL_README_WL = lambda: gen(1, 200, uniform(100, 400), uniform(50, 500), max_new="output",
                           ignore_eos=True)
VL_PFX_EVICT_WL = lambda: gen(31, 400, uniform(100, 500), uniform(50, 400), rate=5.0,
                              max_new="output", ignore_eos=True, groups=PFX_EIGHT, none=0.1)
VL_PFX_WL = lambda: gen(3, 400, uniform(100, 500), uniform(50, 400), rate=5.0, max_new="output",
                        ignore_eos=True, groups=[("sys", 2000), ("doc", 1000), ("short", 500)],
                        none=0.1)
PFX_EIGHT = [("a", 3000), ("b", 2500), ("c", 2000), ("d", 2000), ("e", 1500), ("f", 1500),
             ("g", 1000), ("h", 1000)]
# the first requests (all at t = 0): two of the longest group, three of g1000, two of g250
PFX_LEAD = ("g9000", "g9000", "g1000", "g1000", "g1000", "g250", "g250")
PFX_SIX = [("g40", 40), ("g250", 250), ("g1000", 1000), ("g2500", 2500), ("g6000", 6000),
           ("g9000", 9000)]
SG_E2 = lambda: gen(3, 300, lognormal(200, 0.8), lognormal(900, 0.6), max_new=1024,
                    groups=[("ctx", 3000), ("q", 800)])
SG_POLICY_WL = lambda: gen(5, 300, lognormal(300, 0.8), lognormal(300, 0.8), max_new=2048,
                           groups=[("sys", 2000), ("doc", 1000), ("short", 300)], none=0.2)

# chunk-out-of-memory: (prompt, output, max_new_tokens, arrival_s).
OOM_ROWS = [(p, o, o, 0.0) for p, o in [
    (20, 2248), (22, 2395), (26, 1209), (14, 1423), (31, 586), (34, 365), (4, 2244), (7, 2819),
    (13, 1963), (29, 2358), (17, 1128), (30, 686), (13, 800), (14, 1201), (40, 834)]] + [
    (2142, 1, 2, 3.0)]

CASES = [
    # ---------------------------------------------------------------- SGLang, no shared prefixes
    sg("open-poisson-baseline",
       "Open-loop Poisson arrivals (8 req/s) of short requests with natural EOS and no memory "
       "pressure: prefill-first scheduling, prefill batches as requests arrive, no retraction.",
       lambda: gen(1, 200, lognormal(500, 0.5), lognormal(64, 0.5), rate=8.0, max_new=256),
       0, SG_README, chk_sg_basic),
    sg("retract-closed-long-b",
       "Closed loop of 64 with long outputs stopping by EOS and max_new_tokens 900 close to them "
       "(the oracle README's long B): decode runs out of pool, retract_decode evicts the requests "
       "with the fewest output tokens, new_token_ratio is re-estimated, retracted requests go to the "
       "tail of the queue and are re-prefilled with their output so far.",
       LONG_B, 64, SG_README, chk_sg_retract(5)),
    sg("ignore-eos-open-saturate",
       "ignore_eos requests (each runs to its max_new_tokens) arriving open-loop faster than the "
       "server finishes them, radix cache disabled: admission by PrefillAdder.add_one_req_ignore_eos, "
       "which simulates the pool draining over the running requests' remaining lengths instead of "
       "reserving each one's clipped remaining tokens, so it admits requests whose final footprints "
       "together exceed the pool, counting on earlier finishes to make room.",
       lambda: gen(2, 500, lognormal(300, 0.5), lognormal(500, 1.0), rate=4.0, max_new="output",
                   ignore_eos=True),
       0, SG_KV, chk_sg_ignore_eos, max_running_requests=256),
    sg("chunked-long-prompts",
       "Prompts several times chunked_prefill_size (2,048) arriving open-loop: chunked prefill "
       "(the chunked request stashed and continued first in the next prefill), decodes waiting while "
       "chunks run, max_prefill_tokens 4,096.",
       lambda: gen(3, 80, lognormal(6000, 0.3), lognormal(150, 0.5), rate=1.0, max_new=1024),
       0, SG_KV, chk_sg_chunked, kv_capacity_tokens=60000, chunked_prefill_size=2048,
       max_prefill_tokens=4096),
    sg("max-running-binding",
       "Closed loop of 48 against max_running_requests 16 with a large pool: the request-row budget "
       "binds (the latch closes on it) and the other 32 requests wait.",
       lambda: gen(4, 400, lognormal(300, 0.5), lognormal(200, 0.6), max_new=1024),
       48, SG_README, chk_sg_max_running, kv_capacity_tokens=60000, max_running_requests=16),
    sg("policy-lof",
       "schedule_policy lof (longest output first, by max_new_tokens, which differs per request) "
       "with a standing queue (closed loop 64, max_running_requests 24): admission order differs from "
       "send order. (random is not recorded: its shuffle uses Python's RNG.)",
       lambda: gen(5, 300, lognormal(300, 0.5), lognormal(300, 0.8),
                   max_new=[128, 256, 512, 1024, 2048]),
       64, SG_README, chk_sg_reorder, kv_capacity_tokens=40000, max_running_requests=24,
       schedule_policy="lof"),
    sg("latch-first-prefill",
       "The first-prefill latch, the case study scaled down by 5: 30 closed-loop slots all sent at "
       "t = 0, pool 23,234, B2 lengths and step times. The first admission stops on the pool "
       "(each new request is charged prompt + min(max_new_tokens, 4096) + 1), but the first prefill "
       "batch becomes the running batch and the latch is lost, so a second prefill runs at once; "
       "then the latch holds until the first finish. Horizon 300 s.",
       lambda: gen(6, 60, **B2_LEN), 30, SG_B2, chk_sg_latch, max_sim_s="300.0",
       kv_capacity_tokens=23234, max_running_requests=2048),
    sg("case-study-b2",
       "The case study (issue 11): 3,000 requests, 150 closed-loop slots sent at t = 0, pool 116,171, "
       "the B2 lengths (prompts lognormal 250 cv 0.5, outputs lognormal 4,116 cv 0.2, max_new_tokens "
       "16,384) and the B2 step-time model, stopped at the 4,000 s horizon.",
       lambda: gen(7, 3000, **B2_LEN), 150, SG_B2, chk_sg_case_study, max_sim_s="4000.0",
       kv_capacity_tokens=116171, max_running_requests=2048),
    sg("radix-retract-closed",
       "The retraction-heavy closed loop of retract-closed-long-b (same workload) with the radix "
       "cache on and no shared prefixes: finished requests stay in the tree as evictable tokens that "
       "count as free for admission (the steps' kv_used includes them), a retracted request is "
       "released without inserting its output, and its re-prefill finds nothing cached. The "
       "per-request results equal retract-closed-long-b's.",
       LONG_B, 64, SG_README, chk_sg_radix_retract, disable_radix_cache=False),
    sg("max-new-clipped-small-pool",
       "A pool (1,500 tokens) smaller than prompt + max_new_tokens (4,096): SGLang clips "
       "max_new_tokens at intake to min(max_new_tokens, max_req_len - prompt - 1, pool - prompt - 2), "
       "the clipped value is what admission reserves and where a request stops by length; closed "
       "loop of 4, natural EOS.",
       lambda: gen(10, 30, lognormal(200, 0.5), lognormal(500, 1.0), max_new=4096),
       4, SG_README, chk_sg_clipped, kv_capacity_tokens=1500),
    sg("context-len-caps-requests",
       "A model context of 1,024 tokens in a pool of 20,000: max_req_len = min(context_len - 1, "
       "pool - 1) = 1,023 sets the request-length limits, so max_new_tokens (4,096 asked) is "
       "clipped to 1,023 - prompt - 1 and prompts reach 1,017 tokens, one below the refusal "
       "bound max_req_len - 5. Closed loop of 8, natural EOS.",
       lambda: gen(43, 60, uniform(100, 1017), uniform(1, 1100), max_new=4096)
       + [Row(prompt=1017, output=50, arrival=0.0, max_new=4096, ignore_eos=False)],
       8, SG_README, chk_sg_context_caps, context_len=1024),
    sg("lone-request-at-its-cap",
       "A request whose max_new_tokens the empty pool clips (a 100-token prompt asking for 4,096 "
       "in a pool of 1,000 tokens: 898) runs alone; at 6 s a 50-token prompt asking for 200 is "
       "admitted beside it (the reservation of the first has decayed with new_token_ratio). "
       "Together they overfill the pool, the newcomer is retracted, and the first is left alone to "
       "grow to its cap, where SGLang's retract_decode would abort a last request that cannot grow.",
       lambda: [Row(prompt=100, output=2000, arrival=0.0, max_new=4096, ignore_eos=False),
                Row(prompt=50, output=200, arrival=6.0, max_new=200, ignore_eos=False)],
       0, SG_README, chk_sg_lone_at_cap, kv_capacity_tokens=1000),
    sg("mixed-chunk",
       "--enable-mixed-chunk: with decodes running, a prefill (chunk) batch is mixed with the "
       "running decodes in one forward (step time: the prefill formula over the extend tokens, "
       "one per decode row included). Open loop, prompts averaging 1,500 tokens, chunk 1,024.",
       lambda: gen(9, 300, lognormal(1500, 0.6), lognormal(250, 0.6), rate=3.0, max_new=1024),
       0, SG_KV, chk_sg_mixed, kv_capacity_tokens=40000, max_running_requests=128,
       chunked_prefill_size=1024, max_prefill_tokens=4096, enable_mixed_chunk=True),
    sg("chunk-out-of-memory",
       "--enable-mixed-chunk with a pool that fills while a prompt is chunked: fifteen short "
       "prompts with long answers (max_new_tokens = the answer) from t = 0, and at 3 s a "
       "2,142-token prompt asking for 2 tokens; chunks of 16, a pool of 8,760 tokens. Admitted at "
       "6.6 s with its whole prompt within the budget, that prompt is chunked 3 tokens at a time "
       "beside 13 decode rows, which grow by 13 tokens a step while their reservations shrink by "
       "13 x new_token_ratio (decayed to 0.12); once the budget is spent a continuing chunk still "
       "gets a whole chunk (PrefillBudget.available_chunk_tokens), and SGLang's alloc_token_slots "
       "raises out of memory: the oracle stops with that error.",
       lambda: [Row(prompt=p, output=o, arrival=a, max_new=m, ignore_eos=False)
                for p, o, m, a in OOM_ROWS],
       0, SG_README, chk_sg_out_of_memory, crashes=True, kv_capacity_tokens=8760,
       chunked_prefill_size=16, enable_mixed_chunk=True),
    sg("boundary-need-equals-remaining",
       "Admission at its memory bound: a pool of 52 tokens, two requests of 5 prompt tokens asking "
       "for 20 sent at t = 0. Request 0 takes 5 + 1 + 20 = 26 of the budget; request 1 needs "
       "5 + 20 + 1 = 26 and exactly 26 remain: PrefillBudget.check_prefill admits only strictly "
       "below what remains, so it waits.",
       lambda: [Row(prompt=5, output=10, arrival=0.0, max_new=20, ignore_eos=False)] * 2,
       2, SG_README, chk_sg_first_prefill_alone("it needs exactly what remains"),
       kv_capacity_tokens=52),
    sg("boundary-input-budget-spent",
       "The input budget spent exactly: max_prefill_tokens 16, chunks of 64, two 16-token prompts "
       "sent at t = 0. Request 0 uses the whole input budget; budget_state then answers OTHER "
       "(rem_input_tokens <= 0) and the pass stops, though the chunk budget has 48 left.",
       lambda: [Row(prompt=16, output=4, arrival=0.0, max_new=20, ignore_eos=False)] * 2,
       2, SG_README, chk_sg_first_prefill_alone("the input budget is spent"),
       kv_capacity_tokens=1000, chunked_prefill_size=64, max_prefill_tokens=16),
    sg("boundary-first-above-input-budget",
       "Chunking off and a prompt (20 tokens) above max_prefill_tokens (16): the first request of "
       "a pass may exceed the input budget, so it is prefilled at once.",
       lambda: [Row(prompt=20, output=10, arrival=0.0, max_new=20, ignore_eos=False)],
       1, SG_README, chk_sg_first_above_input_budget,
       kv_capacity_tokens=200, chunked_prefill_size=-1, max_prefill_tokens=16),
    sg("boundary-later-request-fills-input-budget",
       "Chunking off, max_prefill_tokens 16, two 8-token prompts sent at t = 0: after the first, "
       "8 input tokens remain and the second's 8 are not below them, so it waits "
       "(only the first request of a pass may reach or exceed the input budget).",
       lambda: [Row(prompt=8, output=4, arrival=0.0, max_new=20, ignore_eos=False)] * 2,
       2, SG_README, chk_sg_first_prefill_alone("a later request filling the input budget "
                                                "exactly waits"),
       kv_capacity_tokens=1000, chunked_prefill_size=-1, max_prefill_tokens=16),
    sg("ignore-eos-input-equals-remaining",
       "ignore_eos and other requests mixed with the radix cache off, in a closed loop of 8: "
       "nine small requests (mixed_rows(138, half_ignore_eos=True)), a pool of 1,514 tokens, "
       "chunks of 16. An ignore_eos request is refused when its paged input is not below "
       "min(the current remainder, the total one) (add_one_req_ignore_eos); here one meets it "
       "exactly.",
       lambda: mixed_rows(138, half_ignore_eos=True), 8, SG_README, chk_sg_some_ignore_eos,
       kv_capacity_tokens=1514, chunked_prefill_size=16),
    sg("last-chunk-exactly-allowed",
       "A continuing chunk whose tokens left equal what the chunk budget allows is the last "
       "chunk (truncated only when more is left), so it reserves its max_new_tokens, which can "
       "stop the pass for memory (NO_TOKEN, closing the latch) where it would otherwise go on. "
       "Open loop: 24 small requests (mixed_rows(656, half_ignore_eos=True)) arriving within "
       "1.55 s, a pool of 1,294 tokens, chunks of 16.",
       lambda: mixed_rows(656, half_ignore_eos=True), 0, SG_README, chk_sg_some_ignore_eos,
       kv_capacity_tokens=1294, chunked_prefill_size=16),
    sg("ignore-eos-freed-tokens",
       "ignore_eos requests with the radix cache off (add_one_req_ignore_eos): three requests "
       "(545, 309 and 455 prompt tokens, 143, 286 and 1,726 new tokens) arriving within 64 ms "
       "at a pool of 4,698 tokens, servesim's default step times. The second and third are "
       "admitted together while the first runs: for the third, SGLang walks the requests it "
       "would run with by tokens left and counts the tokens each one finishing earlier frees "
       "(without them the third would wait).",
       lambda: [Row(prompt=545, output=143, arrival=0.0, max_new=143, ignore_eos=True),
                Row(prompt=309, output=286, arrival=0.007479, max_new=286, ignore_eos=True),
                Row(prompt=455, output=1726, arrival=0.063973, max_new=1726, ignore_eos=True)],
       0, SG_DEFAULTS, chk_sg_ignore_eos_queue, kv_capacity_tokens=4698),
    sg("mixed-chunk-budget-spent",
       "A continuing chunk when the admission budget's remainder truncates to 0: it still gets a "
       "whole chunk (PrefillBudget.available_chunk_tokens returns the chunk limit when "
       "int(remaining) <= 0). Mixed chunks of 32, a pool of 2,010 tokens, 11 small requests "
       "(mixed_rows(109)) in a closed loop of 8.",
       lambda: mixed_rows(109), 8, SG_README, chk_sg_mixed_chunks, kv_capacity_tokens=2010,
       chunked_prefill_size=32, enable_mixed_chunk=True),
    sg("conservativeness-0.5",
       "schedule_conservativeness 0.5 on the workload of retract-closed-long-b (same requests, "
       "same step times): new_token_ratio starts at 0.7 x 0.5 = 0.35 with floor 0.049 and decays "
       "half as fast; a retraction re-estimates the ratio regardless of it.",
       LONG_B, 64, SG_README, chk_sg_conservative, schedule_conservativeness=Num("0.5")),
    sg("conservativeness-1.5",
       "schedule_conservativeness 1.5 on the workload of retract-closed-long-b: new_token_ratio "
       "starts at min(0.7 x 1.5, 1) = 1.0 (clipped) with floor 0.14, so admission first reserves "
       "every running request's whole remaining max_new_tokens.",
       LONG_B, 64, SG_README, chk_sg_conservative, schedule_conservativeness=Num("1.5")),
    # ---------------------------------------------------------------- SGLang, shared prefixes
    sg("prefix-evict-small-pool",
       "Eight shared prefixes of 1,000-3,000 tokens (14,500 in all; 10 % of requests ungrouped) with "
       "the radix cache on and a smaller pool (12,000 tokens), open loop: cached prefixes are "
       "evicted (LRU) when allocations need room, and later members of a group recompute them.",
       lambda: gen(11, 400, lognormal(300, 0.8), lognormal(250, 1.0), rate=4.0, max_new=2048,
                   groups=PFX_EIGHT, none=0.1),
       0, SG_KV, chk_sg_prefix_evict, prefix_columns=True, kv_capacity_tokens=12000,
       max_running_requests=256, chunked_prefill_size=4096, disable_radix_cache=False),
    sg("prefix-retract-closed",
       "Retraction of requests with cached prefixes (the oracle README's E2): closed loop of 48, "
       "groups ctx 3,000 and q 800, max_new_tokens 1,024 close to the outputs. A retracted request "
       "is released without inserting its output; on re-admission it hits only its group's prefix, "
       "kept by the others.",
       SG_E2, 48, SG_KV, chk_sg_prefix_retract, prefix_columns=True, kv_capacity_tokens=30000,
       max_running_requests=1024, chunked_prefill_size=4096, disable_radix_cache=False),
    sg("prefix-groups-lengths",
       "Six prefix groups of different lengths (40 to 9,000 tokens, the longest above the 4,096 "
       "chunk, so its prefix is published chunk by chunk) and 15 % ungrouped requests, open loop, "
       "a pool large enough to keep them; the first 24 requests arrive together at t = 0 (the first "
       "two of group g9000, three of g1000, two of g250), the rest "
       "Poisson: requests admitted in the same batch each compute their prefix, a request admitted "
       "during a chunked prefix prefill hits the chunks published so far, later ones hit it whole.",
       lambda: gen(13, 300, lognormal(200, 0.8), lognormal(200, 0.8), rate=3.0, max_new=1024,
                   groups=PFX_SIX, none=0.15, burst=24, lead=PFX_LEAD),
       0, SG_KV, chk_sg_prefix_groups, prefix_columns=True, kv_capacity_tokens=80000,
       max_running_requests=256, chunked_prefill_size=4096, disable_radix_cache=False),
    sg("prefix-one-past-a-chunk",
       "A shared prefix one token longer than a chunk (17 tokens, chunks of 16), radix cache on, "
       "three requests one at a time (0, 1 and 2 s): the first request's prompt is published in "
       "two inserts (cache_unfinished_req after its first chunk), so the tree has a node boundary "
       "at token 16, inside the prefix; the child below it is keyed by the prefix's last token "
       "(RadixKey.child_key), which the later members share, and they hit all 17 tokens.",
       lambda: one_at_a_time(17, [40, 30, 25], output=5, max_new=10),
       0, SG_README, chk_sg_prefix_past_chunk, prefix_columns=True, chunked_prefill_size=16,
       disable_radix_cache=False),
    sg("prefix-retract-tiny-pool",
       "Retraction with the radix cache holding shared prefixes in a pool of 308 tokens: 154 short "
       "requests (prompts lognormal 20, outputs lognormal 50, each stopping by length) in three "
       "groups of 29, 94 and 35 tokens (20 % ungrouped), closed loop of 16. Each retracted "
       "request is released (release_req) with an eviction of the tree until the remaining "
       "requests' next SGLANG_RETRACT_DECODE_STEPS (20) tokens each are free, so how many remain "
       "decides which cached prefixes later members still hit.",
       lambda: gen(303460, 154, lognormal(20, 0.6, 2000), lognormal(50, 0.3, 3000),
                   max_new="output", groups=[("a", 29), ("b", 94), ("c", 35)], none=0.2),
       16, SG_KV, chk_sg_retract_frees_for_remaining, prefix_columns=True,
       kv_capacity_tokens=308, disable_radix_cache=False),
    sg("prefix-whole-prompt-cached",
       "A prompt that is wholly a cached prefix (prefix_tokens = prompt_tokens = 64), radix cache "
       "on: SGLang matches at most input - 1 tokens (Req._compute_max_prefix_len), so the request "
       "computes its last prompt token and hits 63; a later request of the same group with a "
       "longer prompt (100) hits all 64. Three requests, one at a time (0, 1 and 2 s).",
       lambda: one_at_a_time(64, [64, 64, 100], output=5, max_new=10),
       0, SG_README, chk_sg_whole_prompt_hit, prefix_columns=True, disable_radix_cache=False),
    sg("prefix-lpm-threshold-prefix",
       "lpm with a group whose prefix is exactly IN_BATCH_THRESHOLD (32 tokens) long, and one of 338 "
       "(20 % ungrouped), closed loop of 4, a pool of 862 tokens, schedule_conservativeness 0.5: "
       "_compute_prefix_matches deprioritizes a waiting request whose cached prefix is at most 32 "
       "tokens and that shares at least 32 with one already put in the queue's own tree.",
       lambda: gen(653159, 165, lognormal(20, 0.6, 2000), lognormal(200, 0.3, 3000),
                   max_new="output", groups=[("a", 32), ("b", 338)], none=0.2),
       4, SG_README, chk_sg_lpm_bounds, prefix_columns=True, kv_capacity_tokens=862,
       schedule_policy="lpm", schedule_conservativeness=Num("0.5"), disable_radix_cache=False),
    sg("prefix-lpm-128-waiting",
       "lpm with 186 requests sent at t = 0 (three groups of 323, 310 and 15 tokens, 20 % "
       "ungrouped), a pool of 2,939 tokens, schedule_conservativeness 0.1: the queue is sorted by "
       "cached prefix only while it holds at most WAITING_QUEUE_PREFIX_MATCH_MAX (128) requests "
       "(SchedulePolicy._determine_active_policy falls back to fcfs above it), and it passes "
       "through 128 as requests are admitted.",
       lambda: gen(918394, 186, lognormal(20, 0.6, 2000), lognormal(600, 1.0, 3000),
                   max_new=[300, 900, 2000], groups=[("a", 323), ("b", 310), ("c", 15)],
                   none=0.2),
       0, SG_README, chk_sg_lpm_bounds, prefix_columns=True, kv_capacity_tokens=2939,
       schedule_policy="lpm", schedule_conservativeness=Num("0.1"), disable_radix_cache=False),
    sg("prefix-lpm",
       "schedule_policy lpm (longest prefix match first) with shared prefixes and a standing queue "
       "of fewer than 128 requests (closed loop 96, max_running_requests 32): the waiting queue is "
       "re-sorted by cached prefix length before each admission.",
       SG_POLICY_WL, 96, SG_KV, chk_sg_prefix_policy, prefix_columns=True,
       kv_capacity_tokens=40000, max_running_requests=32, chunked_prefill_size=4096,
       disable_radix_cache=False, schedule_policy="lpm"),
    sg("prefix-dfs-weight",
       "schedule_policy dfs-weight on the workload and server of prefix-lpm: the waiting queue is "
       "ordered by a depth-first walk of the radix tree weighted by waiting requests per node.",
       SG_POLICY_WL, 96, SG_KV, chk_sg_prefix_policy, prefix_columns=True,
       kv_capacity_tokens=40000, max_running_requests=32, chunked_prefill_size=4096,
       disable_radix_cache=False, schedule_policy="dfs-weight"),
    sg("prefix-ignore-eos",
       "ignore_eos requests with shared prefixes and the radix cache on, open loop saturating a "
       "20,000-token pool: with the cache on SGLang admits them by the ordinary add_one_req "
       "(the ignore_eos drain rule applies only with the cache disabled).",
       lambda: gen(17, 400, lognormal(300, 0.6), lognormal(400, 0.5), rate=4.0, max_new="output",
                   ignore_eos=True, groups=[("sys", 1500), ("tool", 600)], none=0.2),
       0, SG_KV, chk_sg_prefix_ignore_eos, prefix_columns=True, max_running_requests=256,
       chunked_prefill_size=4096, disable_radix_cache=False),
    # ---------------------------------------------------------------- vLLM, no prefix caching
    vl("preempt-closed",
       "Closed loop of 32 with a KV cache of 600 blocks (9,584 usable tokens) against ~17k tokens "
       "of demand (the oracle README's check): running requests cannot grow, the last of RUNNING is "
       "preempted (repeatedly), frees all its blocks and is prepended to WAITING; a step with a "
       "preemption admits nothing.",
       VL_README_WL, 32, VL_README, chk_vl_preempt, max_model_len=1024),
    vl("open-poisson-long-prompts",
       "Open-loop Poisson arrivals (1.5 req/s) of long prompts (2,000-8,000 tokens) with chunked "
       "prefill and a 2,048-token budget: prompts span several steps, mixed with the decodes of "
       "running requests (RUNNING first, then WAITING).",
       lambda: gen(21, 150, uniform(2000, 8000), uniform(50, 300), rate=1.5, max_new="output",
                   ignore_eos=True),
       0, VL_KV, chk_vl_chunked, num_gpu_blocks_override=2500, max_model_len=8704),
    vl("no-chunked-prefill",
       "enable_chunked_prefill = false, budget = max_model_len = 4,096: a prompt is prefilled in one "
       "step or not at all, and a waiting request whose prompt exceeds the remaining budget stops "
       "admission for the step (head-of-line blocking). Requests arrive in bunches of 8 (Poisson, "
       "0.7 bunches/s), so queues form.",
       lambda: gen(22, 1000, uniform(500, 3500), uniform(50, 400), rate=0.7, max_new="output",
                   ignore_eos=True, per_arrival=8),
       0, VL_KV, chk_vl_no_chunk, num_gpu_blocks_override=40000, max_num_batched_tokens=4096,
       max_model_len=4096, enable_chunked_prefill=False),
    vl("long-prefill-threshold",
       "long_prefill_token_threshold = 256: each request's prefill chunk per step is capped at 256 "
       "tokens (ignored when running + waiting <= 1), open loop, 2,048-token budget.",
       lambda: gen(23, 200, uniform(500, 3000), uniform(50, 300), rate=3.0, max_new="output",
                   ignore_eos=True),
       0, VL_KV, chk_vl_threshold, num_gpu_blocks_override=2000, max_model_len=4096,
       long_prefill_token_threshold=256),
    vl("max-num-seqs-binding",
       "Closed loop of 48 against max_num_seqs 16 with a large KV cache: RUNNING is capped at 16, "
       "WAITING is served only while len(running) < max_num_seqs.",
       lambda: gen(24, 400, uniform(100, 400), uniform(50, 500), max_new="output", ignore_eos=True),
       48, VL_README, chk_vl_max_seqs, num_gpu_blocks_override=3000, max_num_seqs=16,
       max_model_len=1024),
    vl("async-preempt-closed",
       "Async scheduling (AsyncScheduler, batch queue of 2: batch k+1 scheduled before batch k's "
       "output is processed; one-step lag on admissions and finishes) on the workload and cache of "
       "preempt-closed.",
       VL_README_WL, 32, VL_README, chk_vl_async, max_model_len=1024, async_scheduling=True),
    vl("async-at-max-model-len",
       "Async scheduling with every request asking for exactly what max_model_len (1,024) leaves "
       "after its prompt (prompts 100-1,000 tokens, ignore_eos), a closed loop of 16 in a pool of "
       "160 blocks of 16 that preempts: each request runs to the model length, and a preempted "
       "one resumes with its prompt and output so far, at most 1,023 tokens.",
       lambda: [Row(prompt=w.prompt, output=1024 - w.prompt, arrival=0.0, max_new=1024 - w.prompt,
                    ignore_eos=True)
                for w in gen(41, 120, uniform(100, 1000), uniform(1, 2))],
       16, VL_README, chk_vl_at_max_model_len, num_gpu_blocks_override=160, max_model_len=1024,
       async_scheduling=True),
    vl("async-open-poisson",
       "Async scheduling with open-loop Poisson arrivals (4 req/s) and chunked prompts: an arrival "
       "is seen by the scheduler one step later than in sync mode.",
       lambda: gen(26, 300, uniform(200, 2500), uniform(50, 400), rate=4.0, max_new="output",
                   ignore_eos=True),
       0, VL_KV, chk_vl_async, num_gpu_blocks_override=1200, max_model_len=4096,
       async_scheduling=True),
    vl("reserve-full-isl-off",
       "scheduler_reserve_full_isl = false (vLLM 0.33's default is true): a waiting request is "
       "admitted when its first chunk fits, not its whole prompt; long prompts, a 512-token budget "
       "and a tight cache (800 blocks), closed loop of 24.",
       lambda: gen(27, 200, uniform(500, 2000), uniform(100, 400), max_new="output",
                   ignore_eos=True),
       24, VL_KV, chk_vl_preempt, num_gpu_blocks_override=800, max_num_batched_tokens=512,
       max_model_len=2400, scheduler_reserve_full_isl=False),
    # ---------------------------------------------------------------- vLLM, prefix caching
    vl("prefix-evict-small-pool",
       "Prefix caching with eight groups of 1,000-3,000 tokens (14,500 in all; 10 % ungrouped), "
       "open loop at 5 req/s and a smaller cache (700 blocks, 11,184 usable tokens): freed blocks "
       "keep their hash and stay hittable until reused (LRU, a request's blocks freed tail first), "
       "so prefixes are partly or wholly evicted.",
       VL_PFX_EVICT_WL, 0, VL_KV, chk_vl_prefix_evict, prefix_columns=True,
       num_gpu_blocks_override=700, max_num_batched_tokens=4096, max_model_len=4000,
       enable_prefix_caching=True),
    vl("prefix-preempt-closed",
       "Prefix caching under preemption (the oracle README's closed run): closed loop of 32, 700 "
       "blocks; a preempted request's blocks keep their hashes, so its resumption usually hits its "
       "own earlier prompt and output blocks.",
       VL_PFX_WL, 32, VL_KV, chk_vl_prefix_preempt, prefix_columns=True,
       num_gpu_blocks_override=700, max_model_len=3000, enable_prefix_caching=True),
    vl("prefix-groups-lengths",
       "Six prefix groups of different lengths (40 to 9,000 tokens, not all multiples of the 16-token "
       "block) and 15 % ungrouped, a cache large enough to keep them; the first 24 requests arrive "
       "together at t = 0 (the first two of group g9000, three of g1000, two of g250), the rest "
       "Poisson: members hit floor(prefix / 16) blocks, and hits start as soon as the first "
       "member's blocks are allocated (same step, or during its chunked prefill).",
       lambda: gen(33, 300, uniform(50, 400), uniform(50, 300), rate=3.0, max_new="output",
                   ignore_eos=True, groups=PFX_SIX, none=0.15, burst=24, lead=PFX_LEAD),
       0, VL_KV, chk_vl_prefix_groups, prefix_columns=True, num_gpu_blocks_override=5000,
       max_model_len=10000, enable_prefix_caching=True),
    vl("cache-preempt-closed",
       "preempt-closed with prefix caching on (vLLM 0.33's default) and no shared prefixes: a "
       "preempted request's full blocks keep their hashes in the free queue (freed last block "
       "first, appended at its tail), so on re-admission it hits those not yet reused.",
       VL_README_WL, 32, VL_README, chk_vl_own_cache, max_model_len=1024,
       enable_prefix_caching=True),
    vl("cache-async-preempt-closed",
       "async-preempt-closed with prefix caching on and no shared prefixes: a preempted request "
       "hits its own freed blocks once its stale in-flight output has arrived.",
       VL_README_WL, 32, VL_README, chk_vl_own_cache, max_model_len=1024,
       enable_prefix_caching=True, async_scheduling=True),
    vl("prefix-async-preempt",
       "Async scheduling with prefix caching and preemption: the workload and cache of "
       "prefix-preempt-closed under AsyncScheduler.",
       VL_PFX_WL, 32, VL_KV, chk_vl_prefix_async, prefix_columns=True,
       num_gpu_blocks_override=700, max_model_len=3000, enable_prefix_caching=True,
       async_scheduling=True),
    vl("prefix-whole-prompt-cached",
       "A prompt that is wholly a cached prefix (prefix_tokens = prompt_tokens = 64, four full "
       "blocks of 16): vLLM looks for hits over num_tokens - 1 tokens "
       "(KVCacheManager.get_computed_blocks), so the block holding the last prompt token is "
       "computed again and the request hits 48 tokens; a later request of the same group with a "
       "longer prompt (100) hits all 64. Three requests, one at a time (0, 1 and 2 s).",
       lambda: one_at_a_time(64, [64, 64, 100], output=10, max_new=10, ignore_eos=True),
       0, VL_README, chk_vl_whole_prompt_hit, prefix_columns=True, num_gpu_blocks_override=100,
       max_num_seqs=8, max_model_len=1000, enable_prefix_caching=True),
]


# ------------------------------------------------------------------------------------------------
# Oracle command lines
# ------------------------------------------------------------------------------------------------
def oracle_args(case):
    e, st = case.engine_keys, case.step
    if case.engine == "sglang":
        assert e["disable_overlap_schedule"], "the oracle runs the non-overlapped loop only"
        assert e["page_size"] == 1
        args = ["--workload", "workload.oracle.csv", "--out", "out", "--quiet",
                "--concurrency", str(case.closed), "--client-latency", "0",
                "--max-total-tokens", str(e["kv_capacity_tokens"]),
                "--page-size", str(e["page_size"]),
                "--max-running-requests", str(e["max_running_requests"]),
                "--chunked-prefill-size", str(e["chunked_prefill_size"]),
                "--max-prefill-tokens", str(e["max_prefill_tokens"]),
                "--schedule-policy", e["schedule_policy"],
                "--schedule-conservativeness", e["schedule_conservativeness"].scaled(1),
                "--context-length", str(case.context_len)]
        if not e["disable_radix_cache"]:
            args.append("--enable-radix-cache")
        if e["enable_mixed_chunk"]:
            args.append("--enable-mixed-chunk")
        args += ["--decode-a", st["decode_base_ms"].scaled(1000),
                 "--decode-b", st["decode_per_seq_ms"].scaled(1000),
                 "--decode-c", st["decode_per_kv_token_ns"].scaled(10 ** 9),
                 "--prefill-p0", st["prefill_base_ms"].scaled(1000),
                 "--prefill-p1", st["prefill_per_token_us"].scaled(10 ** 6)]
        if case.max_sim_s:
            args += ["--horizon", case.max_sim_s.scaled(1)]
        return [SGLANG_PY, "sglang_oracle.py"], args
    assert "prefill_base_ms" not in st
    args = ["run", "--workload", "workload.oracle.csv", "--out-dir", "out",
            "--closed-loop", str(case.closed),
            "--scheduling", "async" if e["async_scheduling"] else "sync",
            "--num-gpu-blocks", str(e["num_gpu_blocks_override"]),
            "--block-size", str(e["block_size"]),
            "--max-num-seqs", str(e["max_num_seqs"]),
            "--max-num-batched-tokens", str(e["max_num_batched_tokens"]),
            "--max-model-len", str(e["max_model_len"]),
            "--enable-chunked-prefill" if e["enable_chunked_prefill"] else "--no-enable-chunked-prefill",
            "--long-prefill-token-threshold", str(e["long_prefill_token_threshold"]),
            "--scheduler-reserve-full-isl" if e["scheduler_reserve_full_isl"]
            else "--no-scheduler-reserve-full-isl",
            "--watermark", "0.0",
            "--enable-prefix-caching" if e["enable_prefix_caching"] else "--no-enable-prefix-caching",
            "--a", st["decode_base_ms"].scaled(1000),
            "--b", st["decode_per_seq_ms"].scaled(1000),
            "--c", st["prefill_per_token_us"].scaled(10 ** 6),
            "--d", st["decode_per_kv_token_ns"].scaled(10 ** 9)]
    return [VLLM_PY, "vllm_oracle.py"], args


# ------------------------------------------------------------------------------------------------
# Fixture writing
# ------------------------------------------------------------------------------------------------
def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def wrap(text, width=98, prefix="# "):
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width - len(prefix):
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    if cur:
        lines.append(cur)
    return "\n".join(prefix + l for l in lines)


def scenario_toml(case, recorded):
    e = case.engine_keys
    eng = "SGLang 0.5.23" if case.engine == "sglang" else "vLLM 0.33.0"
    lines = [wrap(f"Golden trace {case.key}. {case.what}"), "#",
             wrap(f"Recorded from {eng}'s own scheduler code by scripts/golden/record.py (the oracle "
                  f"command line is in oracle.txt): {recorded}. Generated; do not edit by hand — "
                  f"change the case in record.py and rerun it."),
             f"name = {toml_value('golden ' + case.engine + ': ' + case.name)}",
             f"description = {toml_value(case.what + ' Recorded: ' + recorded + '.')}"]
    if case.max_sim_s:
        lines += ["", "[run]", f"max_sim_s = {toml_value(case.max_sim_s)}"
                  "   # the oracle's --horizon: it stops after the first step that ends at or after it"]
    if case.context_len:
        lines += ["", "[model]", f"context_len = {case.context_len}"]
    lines += ["", "[engine]", f'kind = "{case.engine}"']
    for k, v in e.items():
        lines.append(f"{k} = {toml_value(v)}")
    lines += ["", "[engine.step_time]"]
    for k, v in case.step.items():
        lines.append(f"{k} = {toml_value(v)}")
    lines += ["", "[workload]", 'trace = "workload.csv"', "", "[client]"]
    if case.closed:
        lines += ['mode = "closed"', f"concurrency = {case.closed}"]
    else:
        lines += ['mode = "trace"']
    return "\n".join(lines) + "\n"


def steps_digest(engine, src, dst):
    """The decision rows of steps.csv: SGLang rows that are not plain decode steps (prefill or mixed,
    a retraction, a finish); vLLM rows with a prefill, a preemption or a finish."""
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    ix = {c: i for i, c in enumerate(head)}
    if engine == "sglang":
        keep = [r for r in body if r[ix["kind"]] != "decode" or r[ix["retracted"]] != "0"
                or r[ix["finished"]] != "0"]
    else:
        keep = [r for r in body if r[ix["num_prefill_reqs"]] != "0" or r[ix["preemptions"]] != "0"
                or r[ix["finished"]] != "0"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n" if engine == "sglang" else "\r\n")
    w.writerow(head)
    w.writerows(keep)
    data = buf.getvalue().encode()
    if len(data) > STEPS_LIMIT_BYTES:
        return None, len(keep)
    with open(dst, "wb") as f:
        f.write(data)
    return dst, len(keep)


def count_rows(path):
    with open(path, newline="") as f:
        return sum(1 for _ in csv.reader(f)) - 1


def new_fixture(case, rows, recorded):
    """The case's fixture directory, emptied, with its workload.csv and scenario.toml."""
    dst = os.path.join(FIXTURES, case.engine, case.name)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    write_servesim_workload(os.path.join(dst, "workload.csv"), rows, case.prefix_columns)
    with open(os.path.join(dst, "scenario.toml"), "w") as f:
        f.write(scenario_toml(case, recorded))
    return dst


def oracle_files(out_dir):
    """oracle.txt's lines listing every file the oracle wrote."""
    lines = ["files the oracle wrote (sha256, bytes, data rows):"]
    for fn in sorted(os.listdir(out_dir)):
        path = os.path.join(out_dir, fn)
        nrows = count_rows(path) if fn.endswith(".csv") else "-"
        lines.append(f"  {fn:13s} {sha256_file(path)} {os.path.getsize(path):>9} {nrows:>7}")
    return lines


def record(case, scratch):
    work = os.path.join(scratch, case.engine, case.name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rows = case.rows()
    write_oracle_workload(os.path.join(work, "workload.oracle.csv"), case.engine, rows,
                          case.prefix_columns)
    script = f"{case.engine}_oracle.py"
    shutil.copyfile(os.path.join(HERE, script), os.path.join(work, script))
    py, args = oracle_args(case)
    env = dict(os.environ, PYTHONHASHSEED="0")
    t0 = time.time()
    p = subprocess.run(py + args, cwd=work, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    if case.crashes:
        return record_crash(case, work, rows, p, wall, script, args)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"{case.key}: the oracle failed (exit {p.returncode})")
    out_dir = os.path.join(work, "out")
    stdout = p.stdout.strip()
    o = Out(case, out_dir, rows, stdout)
    if case.engine == "sglang":
        # the oracle's echo of the workload it used must be ours
        echo = read_csv(os.path.join(out_dir, "workload.csv"))
        need(len(echo) == len(rows), "workload echo length")
        for e, r in zip(echo, rows):
            need((int(e["prompt_tokens"]), int(e["output_tokens"]), int(e["max_new_tokens"]),
                  e["ignore_eos"] == "1") == (r.prompt, r.output, r.max_new, r.ignore_eos),
                 f"workload echo differs at {e['id']}")
    recorded = case.check(o)

    dst = new_fixture(case, rows, recorded)
    shutil.copyfile(os.path.join(out_dir, "requests.csv"), os.path.join(dst, "requests.csv"))
    jname = "summary.json" if case.engine == "sglang" else "meta.json"
    shutil.copyfile(os.path.join(out_dir, jname), os.path.join(dst, jname))
    steps_src = os.path.join(out_dir, "steps.csv")
    steps_size = os.path.getsize(steps_src)
    if steps_size <= STEPS_LIMIT_BYTES:
        shutil.copyfile(steps_src, os.path.join(dst, "steps.csv"))
        steps_note = "committed as steps.csv"
    else:
        got, n = steps_digest(case.engine, steps_src, os.path.join(dst, "steps-digest.csv"))
        steps_note = (f"too large to commit; its {n} decision rows are steps-digest.csv" if got
                      else f"too large to commit, and so are its {n} decision rows")

    version = (f"sglang {o.summary['sglang_version']}" if case.engine == "sglang"
               else f"vllm {o.summary['vllm_version']}")
    cmd = (["$SGLANG_PY" if case.engine == "sglang" else "$VLLM_PY",
            f"scripts/golden/{script}"] + args)
    lines = [f"Golden trace {case.key}: how it was recorded (written by scripts/golden/record.py).",
             "",
             f"engine: {version}",
             f"oracle: scripts/golden/{script} (sha256 {sha256_file(os.path.join(HERE, script))})",
             "",
             "command (run in a scratch directory; workload.oracle.csv is workload.csv in the "
             "oracle's input format: id = row index, arrival = arrival_s"
             + (", max_new_tokens, ignore_eos as 0/1" if case.engine == "sglang" else
                "; max_new_tokens = output_tokens and ignore_eos = true for every row, as the "
                "oracle sets them") + "):",
             "  " + " ".join(cmd),
             ""]
    if stdout:
        lines += ["oracle output line:", "  " + stdout, ""]
    lines += oracle_files(out_dir)
    lines += ["",
              f"steps.csv: {steps_note}.",
              f"requests.csv, {jname}: committed unchanged."
              + (" workload.csv (the oracle's echo of its input) is not committed." if
                 case.engine == "sglang" else ""),
              ""]
    with open(os.path.join(dst, "oracle.txt"), "w") as f:
        f.write("\n".join(lines))
    c = sg_counts(o) if case.engine == "sglang" else vl_counts(o)
    case.results = dict(requests=len(rows), sent=len(o.reqs), steps=len(o.steps),
                        sim=c["sim"], wall=wall, recorded=recorded)
    return case.results


def record_crash(case, work, rows, p, wall, script, args):
    """A case whose engine raises out of memory: the oracle must stop with that error. The fixture
    keeps the workload, the scenario, `crash.csv` (when the error was raised — the end of the last
    step — the tokens the batch asked for and the tokens free), the steps and `oracle.txt`; there is
    no requests.csv (the oracle writes it only at a normal end)."""
    if p.returncode == 0:
        raise CheckFailed("the oracle ended normally; the case expects out of memory")
    out_dir = os.path.join(work, "out")
    o = Crash(out_dir, p.stderr)
    recorded = case.check(o)
    dst = new_fixture(case, rows, recorded)
    with open(os.path.join(dst, "crash.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["at_s", "need_tokens", "free_tokens"])
        w.writerow([o.at, o.need_tokens, o.free_tokens])
    steps_src = os.path.join(out_dir, "steps.csv")
    need(os.path.getsize(steps_src) <= STEPS_LIMIT_BYTES, "steps.csv too large to commit")
    shutil.copyfile(steps_src, os.path.join(dst, "steps.csv"))
    # The exception's message (SGLang also logs it once before raising).
    err = p.stderr.splitlines()
    first = max(i for i, l in enumerate(err) if l.startswith("RuntimeError"))
    error = [err[first]] + [l for l in err[first + 1:]
                            if l.startswith(("Try to allocate", "Available full tokens"))]
    cmd = ["$SGLANG_PY", f"scripts/golden/{script}"] + args
    lines = [f"Golden trace {case.key}: how it was recorded (written by scripts/golden/record.py).",
             "",
             f"engine: sglang {EXPECTED['sglang']}",
             f"oracle: scripts/golden/{script} (sha256 {sha256_file(os.path.join(HERE, script))})",
             "",
             "command (run in a scratch directory; workload.oracle.csv is workload.csv in the "
             "oracle's input format: id = row index, arrival = arrival_s, max_new_tokens, "
             "ignore_eos as 0/1):",
             "  " + " ".join(cmd),
             "",
             f"the oracle stopped (exit {p.returncode}) with SGLang's error:"]
    lines += ["  " + l for l in error]
    lines += [""] + oracle_files(out_dir)
    lines += ["", "steps.csv: committed as steps.csv. crash.csv: the error's numbers and the end of "
              "the last step (when the failing batch was being built).", ""]
    with open(os.path.join(dst, "oracle.txt"), "w") as f:
        f.write("\n".join(lines))
    sent = sum(1 for r in rows if r.arrival <= float(o.at))
    case.results = dict(requests=len(rows), sent=sent, steps=len(o.steps), sim=float(o.at),
                        wall=wall, recorded=recorded)
    return case.results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated cases (engine/case or case)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--scratch", default="", help="scratch directory (default: a temporary one, "
                    "removed at the end)")
    ap.add_argument("--keep-going", action="store_true",
                    help="on a failed check, report it and go on with the next case")
    a = ap.parse_args()
    if a.list:
        for c in CASES:
            print(f"{c.key:40s} {c.what}")
        return
    names = [x.strip() for x in a.only.split(",") if x.strip()]
    todo = [c for c in CASES if not names or c.key in names or c.name in names]
    unknown = [n for n in names if not any(n in (c.key, c.name) for c in CASES)]
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(unknown)}")
    assert len({c.key for c in CASES}) == len(CASES)
    for py in {c.engine: (SGLANG_PY if c.engine == "sglang" else VLLM_PY) for c in todo}.values():
        if not os.path.exists(py):
            raise SystemExit(f"{py} not found: set up the oracle virtualenv (see this script's "
                             "docstring) or set SGLANG_PY / VLLM_PY")
    if not names:
        # from scratch: every case directory is rewritten, stale ones removed
        for eng in ("sglang", "vllm"):
            shutil.rmtree(os.path.join(FIXTURES, eng), ignore_errors=True)
    scratch = a.scratch or tempfile.mkdtemp(prefix="servesim-golden-")
    t0 = time.time()
    failed = []
    try:
        for c in todo:
            print(f"== {c.key} ...", flush=True)
            try:
                r = record(c, scratch)
            except CheckFailed as e:
                msg = f"{c.key}: the check failed: {e} (scratch: {scratch})"
                if not a.keep_going:
                    raise SystemExit(msg)
                print("   " + msg, flush=True)
                failed.append(c.key)
                continue
            print(f"   {r['requests']} requests ({r['sent']} sent), {r['steps']} steps, "
                  f"{r['sim']:.1f} sim s, {r['wall']:.0f} s wall\n   {r['recorded']}", flush=True)
    finally:
        if not a.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n| engine | case | requests | steps | sim s | wall s | what the oracle shows |")
    print("|---|---|---|---|---|---|---|")
    for c in todo:
        r = c.results
        if not r:
            continue
        print(f"| {c.engine} | {c.name} | {r['requests']} | {r['steps']} | {r['sim']:.1f} | "
              f"{r['wall']:.0f} | {r['recorded']} |")
    print(f"\ntotal wall time {time.time() - t0:.0f} s")
    write_index(todo)
    if failed:
        raise SystemExit(f"failed checks: {', '.join(failed)}")


def write_index(cases):
    """tests/fixtures/golden/cases.md: every case with the numbers its check found. Rows of the cases
    recorded now are rewritten, the other rows kept (no wall-clock times, so that it is
    byte-identical on rerun)."""
    path = os.path.join(FIXTURES, "cases.md")
    old = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                for c in CASES:
                    if line.startswith(f"| {c.engine} | [{c.name}]("):
                        old[c.key] = line.rstrip("\n")
    lines = ["# Golden cases", "",
             "Written by `scripts/golden/record.py` (do not edit). Per case: the requests in the "
             "workload (and how many the client sent before the run stopped), the oracle's steps and "
             "simulated seconds, and what the case's check found. What each case exercises is in its "
             "`scenario.toml`.", "",
             "| engine | case | requests (sent) | steps | sim s | what the oracle shows |",
             "|---|---|---|---|---|---|"]
    for c in CASES:
        r = c.results
        if r:
            lines.append(f"| {c.engine} | [{c.name}]({c.engine}/{c.name}/scenario.toml) | "
                         f"{r['requests']} ({r['sent']}) | {r['steps']} | {r['sim']:.1f} | "
                         f"{r['recorded']} |")
        elif c.key in old:
            lines.append(old[c.key])
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")

if __name__ == "__main__":
    main()
