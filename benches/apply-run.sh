#!/usr/bin/env bash
# What server-side apply and managedFields cost the frontend: its CPU per server-side apply of a
# typical Deployment, and create/update throughput and CPU of this build against an earlier
# one (BASELINE, e.g. main's build from before managedFields), both frontends on a fresh stock
# etcd, one after the other in one run. Writes benches/results/<date>-<commit>-apply.md.
#
#   BASELINE=/tmp/ballast-<commit> bash benches/apply-run.sh
#   DURATION=10 REPEATS=5 BASELINE=... bash benches/apply-run.sh
#   BASELINE_APPLIES=1 BASELINE=/tmp/ballast-<later commit> bash benches/apply-run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-5}
repeats=${REPEATS:-3}
baseline=${BASELINE:?BASELINE must name an earlier ballast binary}
target_dir=${CARGO_TARGET_DIR:-target}
cargo build --release -p ballast -p ballast-kube-load
load=$target_dir/release/ballast-kube-load
current=$target_dir/release/ballast
work=$(mktemp -d)
store_pid= frontend_pid=
stop_all() {
  for p in $frontend_pid $store_pid; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  store_pid= frontend_pid=
}
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
source benches/store.sh

raw="$work/raw.jsonl"
port=25800
for build in baseline current; do
  binary=$current
  [[ $build == baseline ]] && binary=$baseline
  port=$((port + 10))
  start_store etcd "$port" "$work/$build-store" "$binary"
  dir="$work/$build-frontend"
  mkdir -p "$dir"
  "$binary" frontend --etcd-servers "http://127.0.0.1:$port" --secure-port $((port + 5)) --cert-dir "$dir/certs" >"$dir.log" 2>&1 &
  frontend_pid=$!
  for _ in $(seq 300); do
    [[ -s "$dir/certs/admin.kubeconfig" ]] && kubectl --kubeconfig "$dir/certs/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1 && break
    sleep 0.1
  done
  scenarios="create_c16 update_c16"
  # A baseline from before managedFields answers apply patches with 415; BASELINE_APPLIES=1
  # says this one serves them, so applies are compared too.
  [[ $build == current || -n "${BASELINE_APPLIES:-}" ]] && scenarios="$scenarios apply_deploy_c16"
  for s in $scenarios; do
    for r in $(seq "$repeats"); do
      line=$(timeout $((duration + 240)) "$load" run --kubeconfig "$dir/certs/admin.kubeconfig" --scenario "$s" \
        --duration "$duration" --server-pid "$frontend_pid")
      echo "{\"build\":\"$build\",\"repeat\":$r,\"result\":$line}" | tee -a "$raw"
    done
  done
  stop_all
done

commit=$(git rev-parse --short HEAD)
out=$(results_file apply)
command="${BASELINE_APPLIES:+BASELINE_APPLIES=1 }BASELINE=$baseline DURATION=$duration REPEATS=$repeats bash benches/apply-run.sh"
python3 - "$raw" "$out" "$commit" "$command" "$baseline" <<'PY'
import json, statistics, subprocess, sys
raw, out, commit, command, baseline = sys.argv[1:6]
rows = [json.loads(l) for l in open(raw)]
by = {}
for r in rows:
    by.setdefault(r["result"]["scenario"], {}).setdefault(r["build"], []).append(r["result"])
def sh(c):
    return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
def med(results, key):
    vals = [x[key] for x in results if key in x]
    return statistics.median(vals) if vals else None
mem = sh("free -g | awk '/Mem:/ {print $2}'")
def fmt(v, p=0):
    return "n/a" if v is None else f"{v:,.{p}f}"
lines = [
    f"# Server-side apply and managedFields, commit {commit}",
    "",
    f"* Machine: {sh('nproc')} cores, {mem} GiB, kernel {sh('uname -r')}; shared and noisy, so read medians.",
    f"* Storage: {sh('etcd --version | head -1')} (Debian etcd-server), fresh per build. Frontends: `{baseline}` (baseline) and this commit's release build, one after the other.",
    f"* Command: `{command}`; figures are medians over repeats; CPU is the frontend process's only.",
    "* Client: `ballast-kube-load` (HTTP/2 over TLS, 16 requests in flight over 4 connections) on the same 2 cores.",
    "",
    "| scenario | baseline ops/s | this ops/s | ratio | baseline CPU µs/op | this CPU µs/op | baseline p50 / p99 ms | this p50 / p99 ms |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
]
for s, t in by.items():
    b, c = t.get("baseline", []), t.get("current", [])
    bo, co = med(b, "ops_per_sec"), med(c, "ops_per_sec")
    ratio = f"{co / bo:.2f}x" if bo and co else "n/a"
    lines.append(f"| {s} | {fmt(bo)} | {fmt(co)} | {ratio} | {fmt(med(b, 'server_cpu_us_per_op'))} | {fmt(med(c, 'server_cpu_us_per_op'))} | "
                 f"{fmt(med(b, 'p50_ms'), 2)} / {fmt(med(b, 'p99_ms'), 2)} | {fmt(med(c, 'p50_ms'), 2)} / {fmt(med(c, 'p99_ms'), 2)} |")
lines += ["", "## Raw results", "", "```"] + [json.dumps(r) for r in rows] + ["```", ""]
open(out, "w").write("\n".join(lines))
print(out)
PY
