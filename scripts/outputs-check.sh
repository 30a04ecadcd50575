#!/usr/bin/env bash
# Full-size behaviour check: run every scenario in scenarios/ with the release binary, hash what
# it writes (summary.json, timeseries.csv, server.log, the requests CSV, the printed report), and
# compare with tests/fixtures/outputs-full.sha256. `--bless` records the hashes instead.
# The cargo test `outputs` does the same on shortened runs; this is the slower, whole check.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/servesim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/digests"
for f in $(find scenarios -name '*.toml' | sort); do
  d="$tmp/run"
  rm -rf "$d"
  "$bin" run "$f" --out "$d/out" --no-plots --requests-csv "$d/requests.csv" 2>"$tmp/stderr" \
    | sed "s#$d/out#OUT#g" > "$tmp/report"
  for x in report out/summary.json out/timeseries.csv out/server.log requests.csv; do
    p="$d/$x"; [ "$x" = report ] && p="$tmp/report"
    printf '%s  %s %s\n' "$(sha256sum < "$p" | cut -d' ' -f1)" "$f" "$(basename "$x")" >> "$tmp/digests"
  done
done
if [ "${1:-}" = "--bless" ]; then
  cp "$tmp/digests" tests/fixtures/outputs-full.sha256
  echo "recorded $(wc -l < "$tmp/digests") digests in tests/fixtures/outputs-full.sha256"
  exit 0
fi
# A scenario with no line in the recorded file is new: it joins when the digests are re-recorded.
cut -d' ' -f3 tests/fixtures/outputs-full.sha256 | sort -u > "$tmp/known"
awk 'NR == FNR { known[$1]; next } ($2 in known)' "$tmp/known" "$tmp/digests" > "$tmp/compared"
new=$(cut -d' ' -f3 "$tmp/digests" | sort -u | comm -23 - "$tmp/known")
[ -z "$new" ] || echo "not recorded yet (re-record with --bless to pin them): $new"
if diff -u tests/fixtures/outputs-full.sha256 "$tmp/compared"; then
  echo "every recorded scenario's outputs are byte-identical to the recorded ones"
else
  echo "outputs differ (lines above); if that is meant, re-record with --bless" >&2
  exit 1
fi
