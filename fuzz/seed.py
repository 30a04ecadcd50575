#!/usr/bin/env python3
"""Write the seed corpus of the `scenario` fuzz target to fuzz/corpus/scenario/ (not committed).

Seeds: every scenario under scenarios/, the bad-input corpus (tests/corpus/, runtime/ included),
the golden scenarios of both engines with their workload as the target's data file (`d.csv`),
the trace, table and lengths fixtures, and a few inputs with `#set`, `#vary`, `#step-by-step`
and `#bench` lines (see fuzz_targets/scenario.rs). Run from anywhere: python3 fuzz/seed.py
"""
import hashlib
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
out = root / "fuzz/corpus/scenario"
out.mkdir(parents=True, exist_ok=True)
MARK = "#--- data\n"
n = 0


def put(text):
    global n
    data = text.encode()
    (out / hashlib.sha1(data).hexdigest()).write_bytes(data)
    n += 1


def with_data(toml, key_file, data):
    """The scenario with its data file `key_file` renamed to the target's d.<ext>."""
    ext = key_file.rsplit(".", 1)[-1]
    return toml.replace(f'"{key_file}"', f'"d.{ext}"') + MARK + data


for p in sorted(root.glob("scenarios/**/*.toml")):
    put(p.read_text())
for p in sorted(root.glob("tests/corpus/**/*.toml")):
    put(p.read_text())
for p in sorted(root.glob("tests/fixtures/golden/*/*/scenario.toml")):
    t = p.read_text()
    w = p.parent / "workload.csv"
    put(with_data(t, "workload.csv", w.read_text()) if w.exists() else t)
trace = root / "tests/fixtures/trace"
replay = (trace / "replay.toml").read_text()
put(with_data(replay, "rows.csv", (trace / "rows.csv").read_text()))
put(with_data(replay, "rows.csv", (trace / "rows.jsonl").read_text()).replace('"d.csv"', '"d.jsonl"'))
put(with_data(replay, "rows.csv", (trace / "rows.csv").read_text()).replace('mode = "closed"', 'mode = "trace"'))
table = root / "tests/fixtures/table"
put(with_data((table / "table.toml").read_text(), "steps.csv", (table / "steps.csv").read_text()))

base = """name = "rows"
seed = 7
[engine]
kv_capacity_tokens = 100000
[workload]
requests = 20
ignore_eos = true
{lengths}
[client]
concurrency = 4
"""
turn = lambda k: '{"from": "x", "value": "text", "tokens": %d}' % k
conv = lambda p, o: '{"conversations": [%s, %s]}' % (turn(p), turn(o))
put(base.format(lengths='lengths = { file = "d.csv", prompt = "p", output = "o" }') + MARK + "p,o\n100,7\n200,9\n300,11\n")
put(base.format(lengths='lengths = { file = "d.jsonl", prompt = "p", output = "o" }') + MARK
    + '{"p": 100, "o": 7}\n{"p": 200, "o": 9}\n{"p": 300, "o": 11}\n')
put(base.format(lengths='lengths = { file = "d.json", prompt = "tokens", output = "tokens" }') + MARK
    + "[%s, %s]" % (conv(100, 7), conv(200, 9)))
put(base.format(lengths='prompt_tokens = { dist = "empirical", file = "d.jsonl", column = "n" }\n'
                'output_tokens = { dist = "constant", value = 5 }') + MARK + '{"n": 50}\n{"n": 60}\n')

b2 = (root / "scenarios/case-study-b2.toml").read_text()
vllm = (root / "scenarios/case-study-b2-vllm.toml").read_text()
for s in (b2, vllm):
    put(s + "#step-by-step\n")
    put(s + "#bench\n")
    put(s + "#vary client.concurrency=1:64:7\n#vary seed=1,2\n")
    put(s + "#vary engine.mem_fraction_static=8e-1:9e-1:5e-2\n")
    put(s + "#set workload.requests=5\n#set run.observe_at_s=[0.5, 1]\n")
    put(s + "#set client.concurrency=\"many\"\n")
    put(s + "#set seed=9007199254740993\n")
# A catalog next to the scenario.
put('catalog = "d.toml"\n' + b2.replace('gpu = "rtx-pro-6000"', 'gpu = "my-gpu"') + MARK
    + '[[gpu]]\nname = "my-gpu"\ndisplay = "a GPU"\nmemory_mib = 97887\nhbm_bandwidth_gb_per_s = 1792\n'
    'bf16_dense_tflops = 500\nfp8_dense_tflops = 1000\ninterconnect = "pcie5"\ninterconnect_gb_per_s = 64\n'
    'collective_latency_us = 40\nprice_usd_per_hour = 1.57\nsource = "fuzz seed"\n')
print(f"{n} seeds in {out}")
