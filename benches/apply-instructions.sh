#!/usr/bin/env bash
# Instructions per server-side apply of a typical Deployment (`apply_deploy_c16`), counted by
# callgrind on the frontend: unlike CPU time, they hardly move with the load of a shared
# machine, so two builds can be compared a few percent apart. Needs valgrind. Each binary runs
# on a fresh stock etcd under `valgrind --tool=callgrind`; counting starts after a warm-up that
# creates the deployments and ends after DURATION seconds of applies. Prints one line per
# binary.
#
#   bash benches/apply-instructions.sh /tmp/ballast-<before> target/release/ballast
#   DURATION=20 bash benches/apply-instructions.sh <binary>...
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-10}
(( $# > 0 )) || { echo "usage: $0 <ballast binary>..." >&2; exit 2; }
target_dir=${CARGO_TARGET_DIR:-target}
cargo build --release -p ballast-kube-load
load=$target_dir/release/ballast-kube-load
work=$(mktemp -d)
store_pid= frontend_pid=
stop_all() {
  for p in $frontend_pid $store_pid; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  store_pid= frontend_pid=
}
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
source benches/store.sh

port=26900
for binary in "$@"; do
  port=$((port + 10))
  dir="$work/$port"
  mkdir -p "$dir"
  start_store etcd "$port" "$dir/store" "$binary"
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" "$binary" frontend \
    --etcd-servers "http://127.0.0.1:$port" --secure-port $((port + 5)) --cert-dir "$dir/certs" >"$dir/frontend.log" 2>&1 &
  frontend_pid=$!
  # Under valgrind the frontend starts tens of times slower.
  for _ in $(seq 3000); do
    [[ -s "$dir/certs/admin.kubeconfig" ]] && kubectl --kubeconfig "$dir/certs/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1 && break
    sleep 0.2
  done
  run() { timeout $(($1 + 240)) "$load" run --kubeconfig "$dir/certs/admin.kubeconfig" --scenario apply_deploy_c16 --duration "$1"; }
  run 10 >/dev/null
  callgrind_control -z "$frontend_pid" >/dev/null
  result=$(run "$duration")
  callgrind_control -d "$frontend_pid" >/dev/null
  sleep 1
  instructions=$(grep -h '^totals:' "$dir"/cg.*.1 | awk '{print $2}')
  python3 - "$binary" "$result" "$instructions" <<'PY'
import json, sys
binary, result, instructions = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
print(f"{binary}: {result['ops']} applies, {instructions / result['ops'] / 1e6:.3f} M instructions per apply")
PY
  stop_all
done
