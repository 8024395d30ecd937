#!/usr/bin/env bash
# Runs benches/cluster-run.sh several times in a row, etcd first in odd runs and Ballast first
# in even ones, and writes one report of them all: per scenario, each run's Ballast / etcd
# throughput ratio and their median, lowest and highest, with the medians of throughput and of
# server CPU per op. One run on this shared machine moves by up to 1.7× between hours; the
# spread over several, in both orders, is what says whether a ratio holds.
# Writes benches/results/<date>-<commit>-cluster-repeat.md (the runs' raw results included).
#
#   bash benches/cluster-repeat.sh                        # 6 runs of put at 16 and 100 in flight
#   REPEAT=4 SCENARIOS="put_c16_v256 txn_cas_c16_k1000" bash benches/cluster-repeat.sh
#   BALLAST_BIN=/path/to/ballast DURATION=10 SHARDS=4 ... # as cluster-run.sh (no failovers here)
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/store.sh
source benches/three-members.sh
repeat=${REPEAT:-6}
scenarios=${SCENARIOS:-put_c16_v256 put_c100_v256}
duration=${DURATION:-10}
if [[ -z "${BALLAST_BIN:-}" ]]; then
  cargo build --release -p ballast -p ballast-load
fi
commit=$(git rev-parse --short HEAD)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One copy for every run: a rebuild in this checkout during the runs changes none of them.
use_binaries
cp "$ballast_bin" "$work/ballast"
reports=()
for i in $(seq "$repeat"); do
  first=""
  ((i % 2 == 0)) && first=1
  echo "run $i of $repeat${first:+ (Ballast first)}" >&2
  BALLAST_BIN="$work/ballast" BALLAST_FIRST="$first" OUT="$work/run-$i.md" FAILOVERS=0 SCENARIOS="$scenarios" \
    DURATION="$duration" bash benches/cluster-run.sh >"$work/run-$i.log" 2>&1 || {
    tail -n 20 "$work/run-$i.log" >&2
    exit 1
  }
  reports+=("$work/run-$i.md")
done
out=$(results_file cluster-repeat "$commit")
command="REPEAT=$repeat SCENARIOS=\"$scenarios\" DURATION=$duration${SHARDS:+ SHARDS=$SHARDS}${BALLAST_BIN:+ BALLAST_BIN=$BALLAST_BIN} bash benches/cluster-repeat.sh"
python3 benches/cluster_repeat_report.py "$out" "$commit" "$command" "${BALLAST_BIN:-}" "${SHARDS:-1}" "${reports[@]}"
echo "$out"
