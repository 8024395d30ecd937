#!/usr/bin/env bash
# Runs every ballast-load scenario against stock etcd and against Ballast on this machine, one
# after the other, each on a fresh server and data directory, and writes
# benches/results/<date>-<commit>.md with both figures and their ratio.
#
#   bash benches/run.sh            # 10 s per scenario
#   bash benches/run.sh --quick    # 3 s per scenario (smoke run)
#   SCENARIOS="put_c16_v256 watch_fanout_w1000_r100_prevkv" bash benches/run.sh
#   BALLAST_SHARDS=2 SCENARIOS=put_ns64_c100_v256 bash benches/run.sh   # Ballast with --shards 2
#   BALLAST_PLACEMENT=per-core ...                                        # and --shard-placement
#   BASELINE=/path/to/older/ballast ...   # also runs an earlier Ballast build, as "previous"
set -euo pipefail
cd "$(dirname "$0")/.."
duration=10
[[ "${1:-}" == "--quick" ]] && duration=3
cargo build --release -p ballast -p ballast-load
load=target/release/ballast-load
scenarios=${SCENARIOS:-$($load list)}
source benches/store.sh
bench_workdir

raw="$work/raw.jsonl"
port=23800
targets="etcd ballast"
[[ -n "${BASELINE:-}" ]] && targets="etcd previous ballast"
for s in $scenarios; do
  for target in $targets; do
    port=$((port + 2))
    if [[ $target == previous ]]; then
      start_store ballast "$port" "$work/$target-$port" "$BASELINE"
    else
      start_store "$target" "$port" "$work/$target-$port" target/release/ballast
    fi
    # Bounded: the timed part plus preloading and the fan-out's registration and drain time.
    if line=$(timeout $((duration + 300)) "$load" run --endpoint "http://127.0.0.1:$port" --scenario "$s" --duration "$duration" --server-pid "$store_pid"); then
      rss=$(ps -o rss= -p "$store_pid" | tr -d ' ')
      echo "{\"target\":\"$target\",\"server_rss_kb\":${rss:-0},\"result\":$line}" | tee -a "$raw"
    else
      echo "{\"target\":\"$target\",\"result\":{\"scenario\":\"$s\",\"failed\":true}}" | tee -a "$raw"
    fi
    kill -9 "$store_pid" 2>/dev/null || true
    wait "$store_pid" 2>/dev/null || true
    store_pid=
    # Settle before the next server: a killed server leaves dirty pages behind, which the kernel
    # would write back during the next run and charge to its fsyncs. Deleting the data directory
    # drops most of them; sync writes the rest now.
    rm -rf "$work/$target-$port"
    sync
    sleep 2
  done
done

commit=$(git rev-parse --short HEAD)
out=$(results_file)
mkdir -p benches/results
command="bash benches/run.sh $*"
[[ -n "${SCENARIOS:-}" ]] && command="SCENARIOS=\"$SCENARIOS\" $command"
[[ -n "${BALLAST_SHARDS:-}" ]] && command="BALLAST_SHARDS=$BALLAST_SHARDS $command"
[[ -n "${BALLAST_PLACEMENT:-}" ]] && command="BALLAST_PLACEMENT=$BALLAST_PLACEMENT $command"
[[ -n "${BASELINE:-}" ]] && command="BASELINE=$BASELINE $command"
python3 - "$raw" "$out" "$commit" "$duration" "$command" "${BASELINE:-}" <<'PY'
import json, subprocess, sys
raw, out, commit, duration, args, base = sys.argv[1:7]
rows = [json.loads(l) for l in open(raw)]
by = {}
for r in rows:
    by.setdefault(r["result"]["scenario"], {})[r["target"]] = r
def sh(c):
    return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
mem = sh("free -g | awk '/Mem:/ {print $2}'")
disk = sh("df -h /tmp | tail -1 | awk '{print $1, $2}'")
lines = [
    f"# Load results, commit {commit}",
    "",
    f"* Machine: {sh('nproc')} cores, {mem} GiB, kernel {sh('uname -r')}, "
    f"disk {disk}; shared and noisy, so read medians and ratios.",
    f"* Reference: {sh('etcd --version | head -1')} (Debian etcd-server), default flags, same machine, same run.",
    f"* Command: `{args}`; {duration} s per scenario, fresh server and data directory per scenario.",
] + ([f"* Previous: the Ballast binary at `{base}`, an earlier build run the same way (name it after its commit)."] if base else []) + [
    "",
    "Throughput is shared-machine throughput: the load client runs on the same 2 cores. Server CPU",
    "per op (user + system time of the server process over the timed part, divided by ops) is the",
    "cost figure that does not depend on how much CPU the client left; its ratio is etcd / Ballast.",
    "",
    "| scenario | etcd ops/s | Ballast ops/s | ratio | etcd p50 / p99 ms | Ballast p50 / p99 ms | server CPU µs/op etcd / Ballast | CPU ratio |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
]
# With BASELINE, "previous" is an earlier Ballast build run in the same way.
prev = any("previous" in t for t in by.values())
if prev:
    lines[-2:] = ["| scenario | etcd ops/s | previous ops/s | Ballast ops/s | ratio to etcd | ratio to previous | etcd p50 / p99 ms | previous p50 / p99 ms | Ballast p50 / p99 ms | server CPU µs/op etcd / previous / Ballast |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for s, t in by.items():
    e, b = t.get("etcd", {}).get("result", {}), t.get("ballast", {}).get("result", {})
    if s.startswith("watch"):
        continue
    er, br = e.get("ops_per_sec", 0), b.get("ops_per_sec", 0)
    ratio = f"{br / er:.2f}x" if er else "n/a"
    ec, bc = e.get("server_cpu_us_per_op", 0), b.get("server_cpu_us_per_op", 0)
    cpu_ratio = f"{ec / bc:.2f}x" if ec and bc else "n/a"
    if prev:
        p = t.get("previous", {}).get("result", {})
        pr, pc = p.get("ops_per_sec", 0), p.get("server_cpu_us_per_op", 0)
        to_prev = f"{br / pr:.2f}x" if pr else "n/a"
        lines.append(f"| {s} | {er:,.0f} | {pr:,.0f} | {br:,.0f} | {ratio} | {to_prev} | {e.get('p50_ms', 0):.2f} / {e.get('p99_ms', 0):.2f} | {p.get('p50_ms', 0):.2f} / {p.get('p99_ms', 0):.2f} | {b.get('p50_ms', 0):.2f} / {b.get('p99_ms', 0):.2f} | {ec:,.1f} / {pc:,.1f} / {bc:,.1f} |")
        continue
    lines.append(f"| {s} | {er:,.0f} | {br:,.0f} | {ratio} | {e.get('p50_ms', 0):.2f} / {e.get('p99_ms', 0):.2f} | {b.get('p50_ms', 0):.2f} / {b.get('p99_ms', 0):.2f} | {ec:,.1f} / {bc:,.1f} | {cpu_ratio} |")
cols = ["etcd", "previous", "ballast"] if prev else ["etcd", "ballast"]
names = {"etcd": "etcd", "previous": "previous Ballast", "ballast": "Ballast"}
for s, t in by.items():
    if not s.startswith("watch"):
        continue
    lines += ["", f"## {s}", "", "| figure | " + " | ".join(names[c] for c in cols) + " |", "|---|" + "---:|" * len(cols)]
    res = {c: t.get(c, {}).get("result", {}) for c in cols}
    for k, label in [("secs", "timed part or registration, s"), ("register_secs", "watcher registration, s"), ("bytes_per_watcher", "server memory per idle watcher, B"),
                     ("server_rss_before_mib", "server RSS before watchers (MiB)"), ("server_rss_after_mib", "server RSS with watchers (MiB)"),
                     ("ops_per_sec", "delivered events/s (idle: watchers registered/s)"), ("delivery_p50_ms", "delivery p50 ms"), ("delivery_p99_ms", "delivery p99 ms"),
                     ("puts_sent", "puts sent"), ("puts", "puts acknowledged"), ("events_expected", "events expected"), ("events_missed", "events missed"), ("watchers_registered", "watchers registered"),
                     ("watchers_canceled", "watchers canceled"), ("put_p99_ms", "writer put p99 ms"),
                     ("server_cpu_s", "server CPU s (timed part)"), ("client_cpu_s", "client CPU s (timed part)")]:
        if any(k in r for r in res.values()):
            lines.append(f"| {label} | " + " | ".join(f"{res[c].get(k, 0):,.2f}" for c in cols) + " |")
    lines.append("| server RSS after run (MiB) | " + " | ".join(f"{t.get(c, {}).get('server_rss_kb', 0) / 1024:,.0f}" for c in cols) + " |")
lines += ["", "## Raw results", "", "```"] + [json.dumps(r) for r in rows] + ["```", ""]
open(out, "w").write("\n".join(lines))
print(out)
PY
