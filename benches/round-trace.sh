#!/usr/bin/env bash
# Traces the rounds of a 3-member Ballast cluster under load and says where a round's time goes,
# on the leader and on the follower whose acknowledgement commits it. Writes
# benches/results/<date>-<commit>-round-trace.md.
#
#   bash benches/round-trace.sh                        # 10 s of put_c16_v256 through the leader
#   SCENARIO=put_c1_v256 DURATION=5 bash benches/round-trace.sh
#   BALLAST_BIN=/path/ballast LOAD_BIN=/path/ballast-load bash benches/round-trace.sh
#   KEEP=/tmp/rounds bash benches/round-trace.sh       # keep the members' trace files
#
# How: the members run with `--round-trace-file` (engine/src/round_trace.rs), which writes a line
# with the wall-clock time for each point a shard's round passes: a round begun, raft messages
# handed to the transport or received, the log written (and synced), a follower's apply, the
# answers. The members share the machine's clock, so the three files line up; the report takes
# shard 0's lines after the first tenth of the run. The marks cost a buffered line each, so
# traced figures run a little slower than untraced ones.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-10}
scenario=${SCENARIO:-put_c16_v256}
source benches/three-members.sh
source benches/store.sh
use_binaries
setup_work '*.trace'
port=${PORT:-24800}
[[ -n "${BALLAST_BIN:-}" ]] || cargo build --release -p ballast -p ballast-load

start_three ballast "$work" "$port" --round-trace-file "$work/%m.trace"
all=$(IFS=,; echo "${pids[*]}")
load_txt=$("$load_bin" run --endpoint "http://${endpoints[$leader]}" --scenario "$scenario" --duration "$duration" \
  --server-pid "${pids[$leader]}" --server-pids "$all")
# A stopping member writes out what its trace buffered.
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do timeout 10 tail --pid="$p" -f /dev/null || kill -9 "$p" 2>/dev/null || true; done
out=$(results_file round-trace "$commit")
python3 benches/round_trace_report.py "$work" "$out" "$((leader + 1))" "$commit" \
  "bash benches/round-trace.sh (SCENARIO=$scenario DURATION=$duration${BALLAST_BIN:+ BALLAST_BIN=$BALLAST_BIN})" \
  "$load_txt" "$(uptime)"
echo "$out"
