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
source benches/three-members.sh
source benches/store.sh
use_binaries
setup_work perf.data '*.txt'
port=${PORT:-24700}

start_three "$target" "$work" "$port"
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
out=$(results_file "put-trace${TARGET:+-$target}" "$commit")
python3 benches/put_trace_report.py "$work" "$out" "$target" "$leader" "${pids[*]}" "$load_pid" "$slow_ms" \
  "$commit" "bash benches/put-trace.sh (TARGET=$target DURATION=$duration SLOW_MS=$slow_ms)" "$load_txt" "$(uptime)"
echo "$out"
