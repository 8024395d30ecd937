#!/usr/bin/env bash
# Traces puts at one in flight on a 3-member cluster (Ballast or stock etcd) and says, for every
# slow one, where its time went: which member's fdatasync it waited for, and on which file, or
# a member's thread that was runnable but not running. Writes
# benches/results/<date>-<commit>-put-trace[-<target>].md.
#
#   bash benches/put-trace.sh                          # Ballast, 10 s of put_c1_v256
#   TARGET=etcd bash benches/put-trace.sh              # the same against stock etcd
#   BALLAST_BIN=/path/ballast LOAD_BIN=/path/ballast-load SLOW_MS=5 DURATION=10 bash benches/put-trace.sh
#   KEEP=/tmp/trace bash benches/put-trace.sh          # keep perf.data and the parsed events
#
# How: `perf record -a` of syscall tracepoints (fdatasync, fsync, sync_file_range, the socket
# reads and writes) and the scheduler's wake-ups and switches, while `ballast-load run` puts at
# one in flight through the leader. Tracepoints are recorded in the kernel, so the members run
# as they do untraced (no ptrace stop per system call). A put is, at the client, from the send
# of its request to the first read that returns data after it; its stages on the members are
# the system calls of theirs that fall inside it. The files behind the synced descriptors, and
# the sockets behind the peers' and the client's, are read from /proc and `ss` before the
# cluster stops.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${TARGET:-ballast}
duration=${DURATION:-10}
slow_ms=${SLOW_MS:-5}
scenario=${SCENARIO:-put_c1_v256}
target_dir=${CARGO_TARGET_DIR:-target}
ballast_bin=${BALLAST_BIN:-$target_dir/release/ballast}
load_bin=${LOAD_BIN:-$target_dir/release/ballast-load}
commit=$(git rev-parse --short HEAD)
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -n "${KEEP:-}" ]]; then mkdir -p "$KEEP" && cp "$work"/perf.data "$work"/*.txt "$KEEP"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export ETCDCTL_API=3
port=${PORT:-24700}

ic=""
endpoints=()
for i in 1 2 3; do
  ic+="${ic:+,}m$i=http://127.0.0.1:$((port + 2 * i + 1))"
  endpoints+=("127.0.0.1:$((port + 2 * i))")
done
for i in 1 2 3; do
  client="http://127.0.0.1:$((port + 2 * i))" peer="http://127.0.0.1:$((port + 2 * i + 1))"
  args=(--name "m$i" --data-dir "$work/data/m$i" --listen-client-urls "$client" --advertise-client-urls "$client"
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" --initial-cluster "$ic"
    --initial-cluster-token "trace-$port" --initial-cluster-state new --quota-backend-bytes 8589934592)
  if [[ $target == etcd ]]; then
    etcd "${args[@]}" >"$work/m$i.log" 2>&1 &
  else
    "$ballast_bin" engine "${args[@]}" --shards 1 >"$work/m$i.log" 2>&1 &
  fi
  pids+=($!)
done
eps=$(IFS=,; echo "${endpoints[*]}")
leader=""
until=$((SECONDS + 30))
while ((SECONDS < until)); do
  if st=$(timeout 5 etcdctl --endpoints="$eps" endpoint status -w json 2>/dev/null); then
    leader=$(python3 -c '
import json, sys
st = json.loads(sys.stdin.read())
leaders = {s["Status"].get("leader", 0) for s in st}
if len(st) == 3 and len(leaders) == 1 and 0 not in leaders:
    (l,) = leaders
    print([i for i, s in enumerate(st) if s["Status"]["header"]["member_id"] == l][0])
' <<<"$st" 2>/dev/null) || true  # no leader named yet
    [[ -n $leader ]] && break
  fi
  sleep 0.2
done
[[ -n $leader ]] || { echo "the cluster did not elect a leader" >&2; tail -n 20 "$work"/m*.log >&2; exit 1; }
# Plain read and write are left out: every other process's file I/O would be in a system-wide
# trace; the client and Ballast's network threads use recvfrom / sendto / writev.
events=fdatasync,fsync,sync_file_range,writev,sendto,sendmsg,recvfrom,recvmsg
ev_args=()
for e in ${events//,/ }; do ev_args+=(-e "syscalls:sys_enter_$e" -e "syscalls:sys_exit_$e"); done
perf record -q -a -k CLOCK_MONOTONIC "${ev_args[@]}" -e sched:sched_wakeup -e sched:sched_switch \
  -o "$work/perf.data" -- sleep $((duration + 3)) >/dev/null 2>&1 &
perf_pid=$!
sleep 1
all=$(IFS=,; echo "${pids[*]}")
"$load_bin" run --endpoint "http://${endpoints[$leader]}" --scenario "$scenario" --duration "$duration" \
  --server-pid "${pids[$leader]}" --server-pids "$all" >"$work/load.json" &
load_pid=$!
sleep 2
# What the descriptors are: files by path, sockets by their two ports.
for i in 0 1 2; do
  for f in /proc/"${pids[$i]}"/fd/*; do echo "${pids[$i]} ${f##*/} $(readlink "$f" 2>/dev/null)"; done
done >"$work/fds.txt"
for f in /proc/"$load_pid"/fd/*; do echo "$load_pid ${f##*/} $(readlink "$f" 2>/dev/null)"; done >>"$work/fds.txt"
ss -tnpH state established >"$work/ss.txt" 2>/dev/null || true
wait "$load_pid"
wait "$perf_pid" || true
perf script -i "$work/perf.data" -F pid,tid,time,event,trace --ns 2>/dev/null >"$work/events.txt"
load_txt=$(cat "$work/load.json")
out="benches/results/$(date -u +%Y-%m-%d)-$commit-put-trace${TARGET:+-$target}.md"
n=2
while [[ -e "$out" ]]; do out="benches/results/$(date -u +%Y-%m-%d)-$commit-put-trace${TARGET:+-$target}-$n.md"; n=$((n + 1)); done
python3 benches/put_trace_report.py "$work" "$out" "$target" "$leader" "${pids[*]}" "$load_pid" "$slow_ms" \
  "$commit" "bash benches/put-trace.sh (TARGET=$target DURATION=$duration SLOW_MS=$slow_ms)" "$load_txt" "$(uptime)"
echo "$out"
