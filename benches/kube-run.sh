#!/usr/bin/env bash
# Runs every ballast-kube-load scenario against the Kubernetes API frontend on two storage
# backends in one run: (a) stock etcd + `ballast frontend --etcd-servers ...` and (b)
# `ballast engine` + `ballast frontend`, each on fresh data directories; every scenario is
# repeated and the medians compared. Writes benches/results/<date>-<commit>-frontend.md.
#
#   bash benches/kube-run.sh                 # 5 s per scenario, 3 repeats (watch: 1)
#   DURATION=10 REPEATS=5 bash benches/kube-run.sh
#   SCENARIOS="get_c16 list_pods10k_c1" bash benches/kube-run.sh
#   BALLAST=path LOAD=path bash benches/kube-run.sh   # prebuilt binaries, nothing built
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-5}
repeats=${REPEATS:-3}
watch_repeats=${WATCH_REPEATS:-1}
target_dir=${CARGO_TARGET_DIR:-target}
if [[ -z "${BALLAST:-}" || -z "${LOAD:-}" ]]; then
  cargo build --release -p ballast -p ballast-kube-load
fi
load=${LOAD:-$target_dir/release/ballast-kube-load}
ballast=${BALLAST:-$target_dir/release/ballast}
scenarios=${SCENARIOS:-$($load list)}
work=$(mktemp -d)
store_pid= frontend_pid=
stop_all() {
  for p in $frontend_pid $store_pid; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  store_pid= frontend_pid=
}
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
# 10k watch streams need 100 connections plus the load tool's own descriptors.
ulimit -n 65536 2>/dev/null || ulimit -n 16384 2>/dev/null || true

source benches/store.sh

start_frontend() { # target etcd-port api-port
  local dir="$work/$1-frontend"
  mkdir -p "$dir"
  "$ballast" frontend --etcd-servers "http://127.0.0.1:$2" --secure-port "$3" --cert-dir "$dir/certs" \
    >"$dir.log" 2>&1 &
  frontend_pid=$!
  for _ in $(seq 300); do
    [[ -s "$dir/certs/admin.kubeconfig" ]] && kubectl --kubeconfig "$dir/certs/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "frontend on $1 did not start" >&2; cat "$dir.log" >&2; return 1
}

raw="$work/raw.jsonl"
port=24800
for target in etcd ballast; do
  port=$((port + 10))
  start_store "$target" "$port" "$work/$target-store" "$ballast"
  start_frontend "$target" "$port" $((port + 5))
  kubeconfig="$work/$target-frontend/certs/admin.kubeconfig"
  for s in $scenarios; do
    n=$repeats
    [[ $s == watch* ]] && n=$watch_repeats
    for r in $(seq "$n"); do
      if line=$(timeout $((duration + 240)) "$load" run --kubeconfig "$kubeconfig" --scenario "$s" --duration "$duration" --server-pid "$frontend_pid"); then
        echo "{\"target\":\"$target\",\"repeat\":$r,\"result\":$line}" | tee -a "$raw"
      else
        echo "{\"target\":\"$target\",\"repeat\":$r,\"result\":{\"scenario\":\"$s\",\"failed\":true}}" | tee -a "$raw"
      fi
    done
  done
  stop_all
done

commit=$(git rev-parse --short HEAD)
out=$(results_file frontend)
mkdir -p benches/results
command="bash benches/kube-run.sh $*"
[[ -n "${SCENARIOS:-}" ]] && command="SCENARIOS=\"$SCENARIOS\" $command"
python3 - "$raw" "$out" "$commit" "$duration" "$repeats" "$watch_repeats" "$command" <<'PY'
import json, statistics, subprocess, sys
raw, out, commit, duration, repeats, watch_repeats, args = sys.argv[1:8]
rows = [json.loads(l) for l in open(raw)]
by = {}
for r in rows:
    by.setdefault(r["result"]["scenario"], {}).setdefault(r["target"], []).append(r["result"])
def sh(c):
    return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
def med(results, key):
    vals = [x[key] for x in results if not x.get("failed") and key in x]
    return statistics.median(vals) if vals else None
def fmt(v, p=2):
    return "n/a" if v is None else f"{v:,.{p}f}"
def ratio(b, e, lower_is_better=False):
    if not b or not e:
        return "n/a"
    return f"{(e / b if lower_is_better else b / e):.2f}x"
mem = sh("free -g | awk '/Mem:/ {print $2}'")
lines = [
    f"# Kubernetes API frontend results, commit {commit}",
    "",
    f"* Machine: {sh('nproc')} cores, {mem} GiB, kernel {sh('uname -r')}; shared and noisy, so read medians and ratios.",
    f"* Backends: (a) {sh('etcd --version | head -1')} (Debian etcd-server) + `ballast frontend`; (b) `ballast engine` + `ballast frontend`. Same frontend binary, same run, fresh data directories.",
    f"* Command: `{args}` (DURATION={duration}, REPEATS={repeats}, WATCH_REPEATS={watch_repeats}); figures are medians over repeats.",
    "* Client: `ballast-kube-load`, HTTP/2 over TLS with the admin kubeconfig's client certificate, on the same 2 cores as both servers.",
    "* Memory is the frontend process's (`/proc/<pid>/status`), not the storage server's.",
    "",
    "Ratios: throughput Ballast / etcd (higher is better); latency etcd / Ballast (higher is better).",
    "",
    "| scenario | etcd ops/s | Ballast ops/s | ratio | etcd p50 / p99 ms | Ballast p50 / p99 ms | p99 ratio |",
    "|---|---:|---:|---:|---:|---:|---:|",
]
for s, t in by.items():
    e, b = t.get("etcd", []), t.get("ballast", [])
    lines.append(f"| {s} | {fmt(med(e, 'ops_per_sec'), 0)} | {fmt(med(b, 'ops_per_sec'), 0)} | {ratio(med(b, 'ops_per_sec'), med(e, 'ops_per_sec'))} | "
                 f"{fmt(med(e, 'p50_ms'))} / {fmt(med(e, 'p99_ms'))} | {fmt(med(b, 'p50_ms'))} / {fmt(med(b, 'p99_ms'))} | {ratio(med(b, 'p99_ms'), med(e, 'p99_ms'), True)} |")
# Custom resources against built-ins on the same frontend and backend (goal: within 20%).
pairs = [("cr_get_c16", "get_c16"), ("cr_create_c16", "create_c16"), ("cr_list1k_c4", "list_cm1k_c4"),
         ("cr_list10k_c1", "list_pods10k_c1")]
pairs = [(c, b) for c, b in pairs if c in by and b in by]
if pairs:
    lines += ["", "## Custom resources against built-ins (same frontend, same backend)", "",
              "Ratio: custom resource ops/s / built-in ops/s (1.00x = parity; the goal is at least 0.80x).", "",
              "| custom resource | built-in | backend | CR ops/s | built-in ops/s | ratio | CR / built-in server CPU us per op |",
              "|---|---|---|---:|---:|---:|---:|"]
    for c, b in pairs:
        for target in ("etcd", "ballast"):
            cr, bi = by[c].get(target, []), by[b].get(target, [])
            lines.append(f"| {c} | {b} | {target} | {fmt(med(cr, 'ops_per_sec'), 0)} | {fmt(med(bi, 'ops_per_sec'), 0)} | "
                         f"{ratio(med(cr, 'ops_per_sec'), med(bi, 'ops_per_sec'))} | "
                         f"{fmt(med(cr, 'server_cpu_us_per_op'), 1)} / {fmt(med(bi, 'server_cpu_us_per_op'), 1)} |")
if "cr_create_large_c4" in by and "cr_create_large_noschema_c4" in by:
    lines += ["", "## Validating against the large definition", "",
              "Server CPU per create of the same 6 KiB object with the large schema and without one; the difference is what pruning, defaulting, schema validation and CEL rules cost per object (goal: under 1 ms).", "",
              "| backend | with schema us/op | without us/op | difference us |", "|---|---:|---:|---:|"]
    for target in ("etcd", "ballast"):
        a = med(by["cr_create_large_c4"].get(target, []), "server_cpu_us_per_op")
        z = med(by["cr_create_large_noschema_c4"].get(target, []), "server_cpu_us_per_op")
        diff = a - z if a is not None and z is not None else None
        lines.append(f"| {target} | {fmt(a, 1)} | {fmt(z, 1)} | {fmt(diff, 1)} |")
for s, t in by.items():
    extras = sorted({k for r in t.get("etcd", []) + t.get("ballast", []) for k in r if k not in ("scenario", "ops", "errors", "secs", "ops_per_sec", "p50_ms", "p99_ms", "max_ms", "failed")})
    if not extras:
        continue
    e, b = t.get("etcd", []), t.get("ballast", [])
    lines += ["", f"## {s}", "", "| figure (median) | etcd | Ballast |", "|---|---:|---:|"]
    for k in ["p99_ms", "max_ms", "errors"] + extras:
        lines.append(f"| {k} | {fmt(med(e, k))} | {fmt(med(b, k))} |")
lines += ["", "## Raw results", "", "```"] + [json.dumps(r) for r in rows] + ["```", ""]
open(out, "w").write("\n".join(lines))
print(out)
PY
