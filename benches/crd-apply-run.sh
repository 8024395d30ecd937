#!/usr/bin/env bash
# Time to install a big CustomResourceDefinition with `kubectl apply --server-side` (the only way
# such definitions fit: client-side apply's annotation is limited to 256 KiB), and the frontend's
# CPU for it. Operators' definitions reach 800 KB (a Prometheus definition is 830 KB); the
# definition here is generated to that size with the same shape: nested objects, map lists,
# long descriptions. The frontend runs on a fresh stock etcd. Writes
# benches/results/<date>-<commit>-crd-apply.md.
#
#   bash benches/crd-apply-run.sh
#   BALLAST_BIN=/path/to/release/ballast REPEATS=7 SIZE_KB=800 bash benches/crd-apply-run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${REPEATS:-5}
size_kb=${SIZE_KB:-800}
target_dir=${CARGO_TARGET_DIR:-target}
if [[ -z "${BALLAST_BIN:-}" ]]; then
  cargo build --release -p ballast
  binary=$target_dir/release/ballast
  built="this checkout's release build"
else
  binary=$BALLAST_BIN
  built="\`$BALLAST_BIN\` (not built from this checkout)"
fi
work=$(mktemp -d)
store_pid= frontend_pid=
cleanup() {
  for p in $frontend_pid $store_pid; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
source benches/store.sh

# A structural schema of the size asked for, shaped like operators' definitions: every field typed,
# list maps keyed by name, patterns, enums, int-or-string fields and a CEL rule per section.
python3 - "$size_kb" "$work/crd.yaml" "$work/crd-changed.yaml" <<'PY'
import json, sys
size_kb, out, changed = int(sys.argv[1]), sys.argv[2], sys.argv[3]
words = "the value the controller reads when it reconciles this field of the resource".split()
def desc(i):
    return " ".join(words[(i + k) % len(words)] for k in range(30)) + "."
def leaf(i):
    kinds = [{"type": "string"}, {"type": "integer", "format": "int32"}, {"type": "boolean"},
             {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"},
             {"type": "object", "additionalProperties": {"type": "string"}},
             {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
             {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
             {"type": "string", "enum": ["Always", "Never", "IfNotPresent"]}]
    return dict(kinds[i % len(kinds)], description=desc(i))
def obj(depth, i):
    props = {f"field{depth}x{k}": leaf(i + k) for k in range(8)}
    if depth < 3:
        props[f"nested{depth}"] = obj(depth + 1, i + 11)
        props[f"items{depth}"] = {"type": "array", "x-kubernetes-list-type": "map",
                                  "x-kubernetes-list-map-keys": ["name"], "description": desc(i + 3),
                                  "items": {"type": "object", "required": ["name"],
                                            "properties": dict(name={"type": "string"}, **obj(depth + 1, i + 7)["properties"])}}
    out = {"type": "object", "description": desc(i), "properties": props}
    if depth == 0:
        props["replicas"] = {"type": "integer", "format": "int32"}
        out["x-kubernetes-validations"] = [{"rule": "!has(self.replicas) || self.replicas >= 0",
                                            "message": "replicas must not be negative"}]
    return out
def render(n, marker):
    spec = {"type": "object", "properties": {f"section{s}": obj(0, s) for s in range(n)}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "bigs.bench.example.com", "annotations": {"bench": marker}},
           "spec": {"group": "bench.example.com", "scope": "Namespaced",
                    "names": {"plural": "bigs", "singular": "big", "kind": "Big", "listKind": "BigList"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]}}
    return json.dumps(crd, indent=1)
n = 1
while len(render(n, "a")) < size_kb * 1000:
    n += 1
open(out, "w").write(render(n, "a"))
open(changed, "w").write(render(n, "b"))
PY
bytes=$(wc -c <"$work/crd.yaml")

port=25900
start_store etcd "$port" "$work/store" "$binary"
dir="$work/frontend"
mkdir -p "$dir"
"$binary" frontend --etcd-servers "http://127.0.0.1:$port" --secure-port $((port + 5)) --cert-dir "$dir/certs" >"$dir.log" 2>&1 &
frontend_pid=$!
kubeconfig="$dir/certs/admin.kubeconfig"
for _ in $(seq 300); do
  [[ -s "$kubeconfig" ]] && kubectl --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1 && break
  sleep 0.1
done
ticks=$(getconf CLK_TCK)
cpu() { awk -v t="$ticks" '{print ($14 + $15) / t}' "/proc/$frontend_pid/stat"; }
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", a - b }'; }
raw="$work/raw.jsonl"
# One timed `kubectl apply --server-side`: wall time of the command and the frontend's CPU in it.
timed_apply() {
  local what=$1 file=$2 repeat=$3 c0 c1 t0 t1
  c0=$(cpu)
  t0=$(date +%s.%N)
  kubectl --kubeconfig "$kubeconfig" apply --server-side --field-manager bench -f "$file" >/dev/null
  t1=$(date +%s.%N)
  c1=$(cpu)
  echo "{\"what\":\"$what\",\"repeat\":$repeat,\"wall_s\":$(minus "$t1" "$t0"),\"frontend_cpu_s\":$(minus "$c1" "$c0")}" | tee -a "$raw"
}
# kubectl's own start-up, for reading the figures: a GET of one small object.
for r in $(seq "$repeats"); do
  t0=$(date +%s.%N)
  kubectl --kubeconfig "$kubeconfig" get namespace default -o name >/dev/null
  t1=$(date +%s.%N)
  echo "{\"what\":\"kubectl_get\",\"repeat\":$r,\"wall_s\":$(minus "$t1" "$t0"),\"frontend_cpu_s\":0}" | tee -a "$raw"
done
for r in $(seq "$repeats"); do
  timed_apply create "$work/crd.yaml" "$r"
  timed_apply update "$work/crd-changed.yaml" "$r"
  kubectl --kubeconfig "$kubeconfig" delete crd bigs.bench.example.com --wait=false >/dev/null
  for _ in $(seq 100); do
    kubectl --kubeconfig "$kubeconfig" get crd bigs.bench.example.com >/dev/null 2>&1 || break
    sleep 0.1
  done
done

commit=$(git rev-parse --short HEAD)
out=$(results_file crd-apply)
command="REPEATS=$repeats SIZE_KB=$size_kb bash benches/crd-apply-run.sh"
python3 - "$raw" "$out" "$commit" "$command" "$built" "$bytes" <<'PY'
import json, statistics, subprocess, sys
raw, out, commit, command, built, size = sys.argv[1:7]
rows = [json.loads(l) for l in open(raw)]
def sh(c):
    return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
def med(what, key):
    return statistics.median(r[key] for r in rows if r["what"] == what)
mem = sh("free -g | awk '/Mem:/ {print $2}'")
load = " ".join(open("/proc/loadavg").read().split()[:3])
lines = [
    f"# Installing a {int(size) // 1000} KB CustomResourceDefinition with server-side apply, commit {commit}",
    "",
    f"* Machine: {sh('nproc')} cores, {mem} GiB, kernel {sh('uname -r')}, load {load} at the end; shared and noisy, so read medians.",
    f"* Frontend: {built}, on a fresh stock etcd ({sh('etcd --version | head -1')}).",
    f"* Command: `{command}`; the definition is generated ({size} bytes of JSON, structural, list maps, descriptions).",
    "* Wall time is the whole `kubectl apply --server-side` command (kubectl's start-up, discovery from its cache, the request); CPU is the frontend process's only.",
    "",
    "| step | median wall s | median frontend CPU s |",
    "|---|---:|---:|",
]
for what in ["kubectl_get", "create", "update"]:
    lines.append(f"| {what} | {med(what, 'wall_s'):.3f} | {med(what, 'frontend_cpu_s'):.3f} |")
lines += ["", "## Raw results", "", "```"] + [json.dumps(r) for r in rows] + ["```", ""]
open(out, "w").write("\n".join(lines))
print(out)
PY
