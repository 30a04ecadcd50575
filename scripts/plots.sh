#!/usr/bin/env bash
# Regenerates the figures in plots/ — the ones the README shows — from the built-in scenarios.
# Usage: scripts/plots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/servesim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" run scenarios/case-study-b2.toml --out "$tmp/b2" > /dev/null
"$bin" run scenarios/case-study-b1.toml --out "$tmp/b1" > /dev/null
"$bin" run scenarios/teaching/kv-bound.toml --out "$tmp/kv" > /dev/null
"$bin" run scenarios/teaching/system-prompt.toml --out "$tmp/system" > /dev/null
"$bin" sweep scenarios/teaching/system-prompt.toml \
  --vary engine.disable_radix_cache=false,true --out "$tmp/prefix" > /dev/null
"$bin" sweep scenarios/case-study-b2-memory.toml \
  --vary engine.mem_fraction_static=0.80:0.95:0.01 --out "$tmp/sweep" > /dev/null
"$bin" memory scenarios/case-study-b2-memory.toml \
  --vary engine.mem_fraction_static=0.80:0.95:0.01 --out "$tmp/memory" > /dev/null
"$bin" plan scenarios/plan-llama-3.1-70b.toml --gpus a100-80gb,h100,h200,l40s,rtx-pro-6000 \
  --counts 2,4,8 --tp 2,4,8 --deadline-h 24 --out "$tmp/plan" > /dev/null

mkdir -p plots
cp "$tmp/b2/throughput.png"   plots/b2-throughput.png
cp "$tmp/b2/engine-state.png" plots/b2-engine-state.png
cp "$tmp/b2/latency-cdf.png"  plots/b2-latency-cdf.png
cp "$tmp/b1/throughput.png"   plots/b1-throughput.png
cp "$tmp/kv/engine-state.png" plots/teaching-kv-bound-engine-state.png
cp "$tmp/system/prefix-cache.png" plots/teaching-system-prompt-prefix-cache.png
cp "$tmp/prefix/sweep-engine-disable_radix_cache.png" plots/teaching-system-prompt-cache.png
cp "$tmp/sweep/sweep-engine-mem_fraction_static.png" plots/b2-memory-sweep.png
cp "$tmp/memory/memory.png"   plots/b2-memory.png
cp "$tmp/plan/plan.png"       plots/plan-llama-3.1-70b.png
echo "wrote $(ls plots/*.png | wc -l) figures to plots/"
