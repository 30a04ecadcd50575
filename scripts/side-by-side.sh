#!/usr/bin/env bash
# servesim's side of the speed comparison in issue 16: the workload of benches/side-by-side.toml
# at 20,000 and 200,000 requests, each run three times with the release binary (whole process:
# reading, simulating, analysing and printing the JSON report); prints requests, simulated
# output tokens, the least CPU time (user + system) of the three, and output tokens per
# CPU-second.
#
#   scripts/side-by-side.sh [REQUESTS...]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/servesim
scenario=benches/side-by-side.toml
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(20000 200000)
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.json"' EXIT

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
echo "| requests | output tokens | CPU s | output tok per CPU-s |"
echo "|---|---|---|---|"
for n in "${sizes[@]}"; do
  best=""
  for _ in 1 2 3; do
    /usr/bin/time -f "%U %S" -o "$tmp" "$bin" run "$scenario" --set "workload.requests=$n" --json >"$tmp.json"
    cpu=$(awk '{ printf "%.3f", $1 + $2 }' "$tmp")
    if [ -z "$best" ] || awk -v a="$cpu" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$cpu; fi
  done
  tokens=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["output_tokens"])' "$tmp.json")
  rate=$(awk -v t="$tokens" -v c="$best" 'BEGIN { if (c > 0) printf "%.3g", t / c; else print "—" }')
  echo "| $n | $tokens | $best | $rate |"
done
