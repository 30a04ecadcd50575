#!/usr/bin/env bash
# servesim's side of the speed comparison in issue 16: the workload of benches/side-by-side.toml
# at 20,000 and 200,000 requests, each run three times with the release binary (whole process:
# reading, simulating, analysing and printing the JSON report); prints requests, simulated
# output tokens, the least CPU time (user + system, from the kernel's rusage of the process, to
# the 0.1 ms) of the three, and output tokens per CPU-second.
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

# cpu_seconds OUT CMD...: runs CMD with its stdout in OUT and prints the user + system CPU
# seconds it used (`/usr/bin/time` prints only hundredths: 0.00 for a 20,000-request run).
cpu_seconds() {
  python3 - "$@" <<'PY'
import os, subprocess, sys
with open(sys.argv[1], "wb") as out:
    child = subprocess.Popen(sys.argv[2:], stdout=out)
    _, status, usage = os.wait4(child.pid, 0)
code = os.waitstatus_to_exitcode(status)
if code != 0:
    sys.exit(f"{sys.argv[2]} exited with {code}")
print(f"{usage.ru_utime + usage.ru_stime:.4f}")
PY
}

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
echo "| requests | output tokens | CPU s | output tok per CPU-s |"
echo "|---|---|---|---|"
for n in "${sizes[@]}"; do
  best=""
  for _ in 1 2 3; do
    cpu=$(cpu_seconds "$tmp.json" "$bin" run "$scenario" --set "workload.requests=$n" --json)
    if [ -z "$best" ] || awk -v a="$cpu" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$cpu; fi
  done
  tokens=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["output_tokens"])' "$tmp.json")
  rate=$(awk -v t="$tokens" -v c="$best" 'BEGIN { if (c > 0) printf "%.3g", t / c; else print "—" }')
  echo "| $n | $tokens | $best | $rate |"
done
