#!/usr/bin/env bash
# Memory of `ballast serve` while CustomResourceDefinitions come and go: each cycle creates a
# definition (its own group and kind), waits until it is served, creates a few objects of it,
# lists them, and deletes the definition (which deletes the objects). The process's resident
# set (VmRSS, from /proc) is sampled every EVERY cycles, with the engine's and frontend's
# allocation gauges from `/metrics` where they exist, so growth that follows the number of
# definitions ever created shows as a slope. Prints a table; with OUT set, writes it there too.
# SPLIT=1 runs `ballast engine` and `ballast frontend` as two processes instead, to tell which
# of the two holds what grows; ENGINE_WRAP then runs the engine under a profiler.
#
# CRD_KB pads each definition's schema with descriptions to about that size (operators'
# definitions run from tens to hundreds of KB; every write of a definition carries all of it).
#
#   BALLAST_BIN=/path/to/ballast CYCLES=200 EVERY=20 OBJECTS=3 CRD_KB=1 [SPLIT=1] bash benches/crd-churn-run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${BALLAST_BIN:?set BALLAST_BIN to a ballast binary}
cycles=${CYCLES:-200}
every=${EVERY:-20}
objects=${OBJECTS:-3}
crd_kb=${CRD_KB:-1}
client_port=${CLIENT_PORT:-27379}
peer_port=${PEER_PORT:-27380}
secure_port=${SECURE_PORT:-27443}
work=$(mktemp -d)
pid= engine_pid=
cleanup() {
  for p in $pid $engine_pid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

if [[ -n "${SPLIT:-}" ]]; then
  # ENGINE_WRAP: a command to run the engine under (`heaptrack -o FILE`, to see what holds memory).
  ${ENGINE_WRAP:-} "$binary" engine --data-dir "$work/engine" --listen-client-urls "http://127.0.0.1:$client_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" >"$work/engine.log" 2>&1 &
  engine_pid=$!
  "$binary" frontend --etcd-servers "http://127.0.0.1:$client_port" --cert-dir "$work/data" \
    --secure-port "$secure_port" --bind-address 127.0.0.1 >"$work/frontend.log" 2>&1 &
  pid=$!
  pids="frontend=$pid,engine=$engine_pid"
else
  "$binary" serve --data-dir "$work/data" --listen-client-urls "http://127.0.0.1:$client_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --secure-port "$secure_port" \
    --bind-address 127.0.0.1 >"$work/serve.log" 2>&1 &
  pid=$!
  pids="serve=$pid"
fi
for _ in $(seq 1 100); do
  [[ -f "$work/data/admin.kubeconfig" ]] && break
  sleep 0.2
done

python3 - "$work/data/admin.kubeconfig" "$secure_port" "$client_port" "$pids" "$cycles" "$every" "$objects" "${OUT:-}" "$crd_kb" <<'PY'
import base64, http.client, json, os, ssl, sys, tempfile, time

kubeconfig, port, client_port, pids, cycles, every, objects, out, crd_kb = sys.argv[1:10]
crd_kb = int(crd_kb)
port, cycles, every, objects = int(port), int(cycles), int(every), int(objects)
pids = [(name, int(p)) for name, p in (kv.split("=") for kv in pids.split(","))]
# The kubeconfig is YAML of a fixed shape; read the three base64 fields without a YAML parser.
fields = {}
for line in open(kubeconfig):
    line = line.strip()
    for key in ("certificate-authority-data", "client-certificate-data", "client-key-data"):
        if line.startswith(key + ":"):
            fields[key] = base64.b64decode(line.split(":", 1)[1].strip())
tmp = tempfile.mkdtemp()
paths = {}
for key, data in fields.items():
    paths[key] = os.path.join(tmp, key)
    open(paths[key], "wb").write(data)
ctx = ssl.create_default_context(cafile=paths["certificate-authority-data"])
ctx.check_hostname = False
ctx.load_cert_chain(paths["client-certificate-data"], paths["client-key-data"])

def call(method, path, body=None):
    for attempt in range(200):
        try:
            c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
            c.request(method, path, body=None if body is None else json.dumps(body),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            c.close()
            return r.status, data
        except (ConnectionError, OSError):
            time.sleep(0.1)
    raise SystemExit(f"{method} {path}: no answer")

def rss_kib():
    """VmRSS of each process, KiB."""
    out = []
    for _, pid in pids:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                out.append(int(line.split()[1]))
    return out

def metrics():
    """Gauges from both ports' /metrics whose names say memory, allocation, cache or count."""
    wanted = {}
    for host, p, secure in (("127.0.0.1", port, True), ("127.0.0.1", int(client_port), False)):
        try:
            c = (http.client.HTTPSConnection(host, p, context=ctx, timeout=10) if secure
                 else http.client.HTTPConnection(host, p, timeout=10))
            c.request("GET", "/metrics")
            text = c.getresponse().read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("#") or " " not in line:
                continue
            name, value = line.rsplit(" ", 1)
            if any(w in name for w in ("jemalloc", "allocated", "resident", "cache", "watchers", "rings", "memtable")):
                try:
                    wanted[name] = float(value)
                except ValueError:
                    pass
    return wanted

status, _ = call("GET", "/readyz")
rows = []
start = time.time()
base_metrics = metrics()
rows.append((0, rss_kib(), 0.0))
for cycle in range(1, cycles + 1):
    group = f"c{cycle}.churn.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"widgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "properties": {
                                          "size": {"type": "integer"}, "color": {"type": "string"}}}}}}}]}}
    # Padding: fields with long descriptions, as operators' schemas have.
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    for i in range(max(0, crd_kb - 1)):
        props[f"field{i}"] = {"type": "string", "description": ("the value the controller reads " * 34)[:1000]}
    s, body = call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert s == 201, (s, body[:300])
    coll = f"/apis/{group}/v1/namespaces/default/widgets"
    for _ in range(300):
        s, _ = call("GET", coll)
        if s == 200:
            break
        time.sleep(0.05)
    else:
        raise SystemExit(f"{group} never served")
    for i in range(objects):
        obj = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": f"w{i}"},
               "spec": {"size": i, "color": "blue"}}
        # A create that meets the definition's own status write (names accepted, established)
        # is refused with "retry", as kube's is; it is sent again.
        for _ in range(50):
            s, body = call("POST", coll, obj)
            # A 404 here: the definition's kind was served to the list but not yet to writes.
            if s != 404 and (s != 422 or b"retry" not in body):
                break
            time.sleep(0.02)
        assert s == 201, (s, body[:300])
    # The list may be answered from the watch cache, a moment behind the creates.
    for _ in range(100):
        s, body = call("GET", coll)
        assert s == 200, (s, body[:300])
        if len(json.loads(body)["items"]) == objects:
            break
        time.sleep(0.02)
    else:
        raise SystemExit(f"{group}: the list never held the {objects} objects")
    s, body = call("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}")
    assert s == 200, (s, body[:300])
    if cycle % every == 0:
        rows.append((cycle, rss_kib(), time.time() - start))
        print(f"cycle {cycle}: RSS {[r // 1024 for r in rows[-1][1]]} MiB", file=sys.stderr, flush=True)
# Wait for the last definitions' deletions (their objects are deleted in the background).
for _ in range(600):
    s, body = call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    if s == 200 and not json.loads(body)["items"]:
        break
    time.sleep(0.1)
rows.append(("settled", rss_kib(), time.time() - start))
end_metrics = metrics()

names = [name for name, _ in pids]
lines = ["| cycle | " + " | ".join(f"RSS {n} (MiB)" for n in names) + " | seconds |",
         "|---|" + "---|" * len(names) + "---|"]
for cycle, rss, secs in rows:
    lines.append(f"| {cycle} | " + " | ".join(f"{r / 1024:.1f}" for r in rss) + f" | {secs:.0f} |")
# The slope (least squares) over the samples after the first two: the first definitions warm
# caches and allocator arenas that later ones reuse.
samples = [(c, rss) for c, rss, _ in rows[3:-1]]
if len(samples) >= 2:
    xs = [c for c, _ in samples]
    mean_x = sum(xs) / len(xs)
    lines.append("")
    for i, n in enumerate(names):
        ys = [rss[i] for _, rss in samples]
        mean_y = sum(ys) / len(ys)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
        lines.append(f"RSS of {n} from cycle {xs[0]} to {xs[-1]}: {slope:.0f} KiB a cycle (least squares), "
                     f"{(ys[-1] - ys[0]) / 1024:.1f} MiB in all.")
changed = sorted((k, base_metrics.get(k, 0.0), v) for k, v in end_metrics.items() if v != base_metrics.get(k, 0.0))
if changed:
    lines += ["", "| metric | start | end |", "|---|---|---|"]
    lines += [f"| `{k}` | {a:g} | {b:g} |" for k, a, b in changed[:40]]
text = "\n".join(lines)
print(text)
if out:
    open(out, "w").write(text + "\n")
PY
