#!/usr/bin/env bash
# `etcdctl check perf` (etcd's own pass/fail check of a cluster: 60 s of puts at a fixed rate,
# failing when throughput is under 90% of the rate, the slowest put over 0.5 s or the standard
# deviation over 0.1 s) on stock etcd and on Ballast in one run, alternating, each on a fresh
# data directory. Records the machine's load before each run (the check's slowest request
# follows the load of a shared machine) and, for Ballast, its fsync and commit histograms after
# the run, to see whether the slowest put waited on the disk. Writes
# benches/results/<date>-<commit>-check-perf.md.
#
#   bash benches/check-perf-run.sh              # --load=s, 2 repeats
#   LOAD=m REPEATS=1 bash benches/check-perf-run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
load=${LOAD:-s}
repeats=${REPEATS:-2}
cargo build --release -p ballast
ballast=${CARGO_TARGET_DIR:-target}/release/ballast
source benches/store.sh
bench_workdir

commit=$(git rev-parse --short HEAD)
out=$(results_file check-perf)
{
  echo "# etcdctl check perf --load=$load, etcd vs Ballast ($commit)"
  echo
  echo "Machine: $(nproc) cores, $(uname -r); etcd $(etcd --version | head -1 | awk '{print $3}'), etcdctl $(etcdctl version | head -1 | awk '{print $3}')."
  echo "Command: \`ETCDCTL_API=3 etcdctl --endpoints=http://127.0.0.1:<port> check perf --load=$load\` on a fresh server, one after the other."
  echo
} >"$out"
port=25800
for r in $(seq "$repeats"); do
  for target in etcd ballast; do
    port=$((port + 2))
    start_store "$target" "$port" "$work/$target-$port" "$ballast"
    before=$(cut -d' ' -f1-3 /proc/loadavg)
    # The verdict lines follow the progress bar's last carriage return.
    result=$(ETCDCTL_API=3 timeout 300 etcdctl --endpoints="http://127.0.0.1:$port" check perf --load="$load" 2>&1 |
      tr '\r' '\n' | grep -aE 'PASS|FAIL|rror' | sed -E 's/^.*%(FAIL|PASS)/\1/' || true)
    after=$(cut -d' ' -f1-3 /proc/loadavg)
    {
      echo "## $target, run $r (load average before: $before; after: $after)"
      echo
      echo '```'
      echo "$result"
      if [[ $target == ballast ]]; then
        curl -s "http://127.0.0.1:$port/metrics" | grep -E '^etcd_disk_(wal_fsync|backend_commit)_duration_seconds_(bucket\{le="(0.016|0.032|0.064|0.128|0.256|0.512|1.024|\+Inf)"\}|count)'
      fi
      echo '```'
      echo
    } >>"$out"
    kill -9 "$store_pid" 2>/dev/null || true
    wait "$store_pid" 2>/dev/null || true
    store_pid=
    rm -rf "$work/$target-$port"
    sync
    sleep 2
  done
done
echo "wrote $out"
cat "$out"
