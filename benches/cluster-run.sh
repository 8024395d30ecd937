#!/usr/bin/env bash
# Runs load scenarios against a 3-member stock etcd cluster and a 3-member Ballast cluster on
# this machine (loopback), one after the other, each on fresh members and data directories, then
# measures leader failover, and writes benches/results/<date>-<commit>-cluster.md.
#
#   bash benches/cluster-run.sh            # 10 s per scenario, 3 failovers per server
#   bash benches/cluster-run.sh --quick    # 3 s per scenario, 1 failover each (smoke run)
#   SCENARIOS="put_c16_v256 put_c16_v256@follower" FAILOVERS=0 bash benches/cluster-run.sh
#   SCENARIOS="" FAILOVERS=5 bash benches/cluster-run.sh     # failover only
#   LOG_DIR=/tmp/cluster-logs bash benches/cluster-run.sh    # keep every member's log
#   SHARDS=4 SCENARIOS="put_ns64_c100_v256" FAILOVERS=0 bash benches/cluster-run.sh
#                                          # Ballast members with --shards 4 (leaders spread)
#   SHARDS=4 TOGETHER=1 ...                # also Ballast with --spread-shard-leaders=false (one
#                                          # member leads every shard), a third cluster per scenario
#   PERF_DIR=/tmp/perf ...                 # perf record (cpu-clock, call graphs) of the Ballast
#                                          # members over each scenario's timed part
#   BALLAST_BIN=/path/to/other/ballast ... # run another build (for an A/B); no cargo build then
#   BASE_BIN=/path/to/earlier/ballast ...  # also a cluster of this build per scenario (default
#                                          # flags, --shards as above), compared with the first
#   BARE=1 SCENARIOS="put_c1_v256" ...     # also the bare chain (`ballast-load bare-member`,
#                                          # benches/load/src/bare.rs): three processes that only
#                                          # relay a put to two followers and fdatasync it, the
#                                          # least a replicated put at one in flight costs here
#                                          # (put_c1_v256 through the leader only)
#   OUT=/tmp/run.md ...                    # write the report there instead (benches/cluster-repeat.sh)
#   BALLAST_FIRST=1 ...                    # each scenario runs the Ballast clusters before etcd's
#                                          # (default: etcd's first); a cluster that starts
#                                          # right after another may meet its leftovers on the disk
#
# Binaries come from $CARGO_TARGET_DIR/release (target/release when unset), or from $BALLAST_BIN
# and $LOAD_BIN (benches/three-members.sh, `use_binaries`).
#
# A scenario runs against the leader's client endpoint (`etcdctl endpoint status`), or against
# a follower's with `@follower` (writes forwarded to the leader). Server CPU per op is the user +
# system time of all three member processes over the timed part (`ballast-load run
# --server-pids`). Failover: writers put through all three endpoints while `ballast-load
# failover` kills the leader with SIGKILL; the figure is the time from the kill to the first
# acknowledged put sent after it (median of FAILOVERS tries, each on a fresh cluster).
# The report also splits each Ballast member's CPU time and wake-ups by thread (its shard
# threads, its raft connections' threads, its network runtime's) and, for puts, gives the ops
# per round (per entry the leader's shard 0 appended), so costs per round and per op can be told
# apart between scenarios; and it gives the load client's own CPU per op, which comes out of the
# same two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/three-members.sh
source benches/store.sh
duration=${DURATION:-10}
shards=${SHARDS:-1}
failovers=${FAILOVERS:-3}
if [[ "${1:-}" == "--quick" ]]; then
  duration=3
  failovers=${FAILOVERS:-1}
fi
default_scenarios="put_c1_v256 put_c16_v256 put_c16_v256@follower put_c100_v256 txn_cas_c16_k1000 txn_cas_c100_k1000 get_linearizable_c100 list_page500_of100k_c1 watch_fanout_w1000_r100_prevkv"
scenarios=${SCENARIOS-$default_scenarios}
if [[ -z "${BALLAST_BIN:-}" ]]; then
  cargo build --release -p ballast -p ballast-load
fi
# The commit, the uncommitted changes and the binaries as built now: others working in the same
# checkout may commit or rebuild during the run.
commit=$(git rev-parse --short HEAD)
work=$(mktemp -d)
git --no-optional-locks status --porcelain >"$work/dirty"
mkdir "$work/bin"
use_binaries
cp "$ballast_bin" "$work/bin/ballast"
cp "$load_bin" "$work/bin/ballast-load"
[[ -n "${BASE_BIN:-}" ]] && cp "$BASE_BIN" "$work/bin/ballast-base"
load=$work/bin/ballast-load
ballast=$work/bin/ballast
logs=${LOG_DIR:-$work/logs}
mkdir -p "$logs"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export ETCDCTL_API=3
raw="$work/raw.jsonl"
: >"$raw"
port=24000

# start_cluster <etcd|ballast> <dir>: starts members m1..m3 on the next six ports (24010 and up,
# client port and peer port = client + 1 per member), sets pids and endpoints (their client
# URLs, in member order) and, through find_leader, leader and follower; returns once all three
# answer and name the same leader (at most 30 s).
start_cluster() {
  local target=$1 dir=$2 i args
  port=$((port + 10))
  endpoints=()
  for i in 1 2 3; do endpoints+=("http://127.0.0.1:$((port + 2 * i))"); done
  pids=()
  for i in 1 2 3; do
    member_args "$i" "$port" "$dir" "bench-$port"
    if [[ $target == etcd ]]; then
      etcd "${args[@]}" >"$logs/$target-$port-m$i.log" 2>&1 &
    elif [[ $target == ballast_base ]]; then
      "$work/bin/ballast-base" engine "${args[@]}" --shards "$shards" >"$logs/$target-$port-m$i.log" 2>&1 &
    elif [[ $target == ballast_together ]]; then
      "$ballast" engine "${args[@]}" --shards "$shards" --spread-shard-leaders=false >"$logs/$target-$port-m$i.log" 2>&1 &
    else
      "$ballast" engine "${args[@]}" --shards "$shards" >"$logs/$target-$port-m$i.log" 2>&1 &
    fi
    pids+=($!)
  done
  wait_started "$target" cluster_ready
}

# cluster_ready: true once all three members answer and name the same leader (find_leader).
cluster_ready() {
  timeout 5 etcdctl --endpoints="$(ctl_endpoints)" endpoint health >/dev/null 2>&1 && find_leader
}

# wait_started <target> <check...>: runs the check every 100 ms until it succeeds, or for at
# most 30 s, then prints the members' last log lines and fails.
wait_started() {
  local target=$1 until=$((SECONDS + 30))
  shift
  while ((SECONDS < until)); do
    "$@" && return 0
    sleep 0.1
  done
  echo "$target cluster did not start" >&2
  tail -n 20 "$logs/$target-$port"-m*.log >&2
  return 1
}

# start_bare bare <dir>: starts the bare chain's three processes as start_cluster does a cluster's
# (the leader m1 serves KV.Put on its client port, the followers listen on their peer ports) and
# returns once the leader takes connections (at most 30 s); it dials the followers first.
start_bare() {
  local dir=$2 f2 f3
  port=$((port + 10))
  f2="127.0.0.1:$((port + 5))" f3="127.0.0.1:$((port + 7))"
  endpoints=("http://127.0.0.1:$((port + 2))")
  pids=()
  "$load" bare-member --listen "127.0.0.1:$((port + 2))" --followers "$f2,$f3" --dir "$dir/m1" >"$logs/bare-$port-m1.log" 2>&1 &
  pids+=($!)
  "$load" bare-member --listen "$f2" --dir "$dir/m2" >"$logs/bare-$port-m2.log" 2>&1 &
  pids+=($!)
  "$load" bare-member --listen "$f3" --dir "$dir/m3" >"$logs/bare-$port-m3.log" 2>&1 &
  pids+=($!)
  leader=0 follower=1
  wait_started bare port_open "$((port + 2))"
}

# port_open <port>: true when something takes connections on the loopback port.
port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# ctl_endpoints: the members' endpoints for etcdctl, as host:port. (etcdctl 3.4 sends a URL
# endpoint's whole `http://host:port` as the HTTP/2 authority for `endpoint status`; etcd accepts
# that, Ballast answers PROTOCOL_ERROR.)
ctl_endpoints() {
  local e out=()
  for e in "${endpoints[@]}"; do out+=("${e#http://}"); done
  (IFS=,; echo "${out[*]}")
}

# find_leader: sets leader and follower (indexes into endpoints/pids) when all three members
# name the same leader.
find_leader() {
  local eps status
  eps=$(ctl_endpoints)
  status=$(timeout 5 etcdctl --endpoints="$eps" endpoint status -w json 2>/dev/null) || return 1
  local found
  found=$(python3 -c '
import json, sys
eps = sys.argv[1].split(",")
st = json.loads(sys.stdin.read())
leaders = {s["Status"]["leader"] for s in st}
if len(st) != 3 or len(leaders) != 1 or 0 in leaders:
    sys.exit(1)
(lead,) = leaders
idx = [i for i, e in enumerate(eps) for s in st if s["Endpoint"] == e and s["Status"]["header"]["member_id"] == lead]
if len(idx) != 1:
    sys.exit(1)
print(idx[0], (idx[0] + 1) % 3)
' "$eps" <<<"$status") || return 1
  read -r leader follower <<<"$found"
}

stop_cluster() {
  local target=$1 dir=$2
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
  # Settle before the next cluster, as run.sh does: deleting the data directories drops most
  # of the killed members' dirty pages, sync writes the rest now.
  rm -rf "$dir"
  sync
  sleep 2
}

record() { echo "$1" | tee -a "$raw"; }

# wakeups: the voluntary context switches of every thread of the members so far (a thread
# blocks, then is woken: what a hop between threads costs in the chain of a request).
wakeups() {
  local p
  for p in "${pids[@]}"; do cat /proc/"$p"/task/*/status 2>/dev/null; done |
    awk '/^voluntary_ctxt_switches/ {s += $2} END {print s + 0}'
}

# threads: one line per thread of the members so far: the member's part in the scenario
# (leader; serving: the follower the load goes to; follower), the thread's name, its voluntary
# context switches and its CPU time in clock ticks (user + system).
threads() {
  local k t part
  for k in "${!pids[@]}"; do
    if ((k == leader)); then part=leader; elif ((k == i)); then part=serving; else part=follower; fi
    for t in /proc/"${pids[$k]}"/task/*; do
      echo "$part $(cat "$t/comm") $(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status") $(cut -d' ' -f14,15 "$t/stat")"
    done 2>/dev/null
  done
}

# raft_index: the leader's raft index (Ballast: shard 0's; one entry per round of writes; the
# bare chain has none).
raft_index() {
  [[ $target == bare ]] && { echo 0; return; }
  timeout 5 etcdctl --endpoints="${endpoints[$leader]#http://}" endpoint status -w json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["Status"]["raftIndex"])' 2>/dev/null || echo 0
}

# per_thread <before> <after>: JSON {"<part> <thread>": [wake-ups, CPU µs]} over the two samples;
# numbered threads (ballast-shard-3) count under one name.
per_thread() {
  python3 - "$1" "$2" "$(getconf CLK_TCK)" <<'PY'
import json, re, sys
def read(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) != 5:
            continue
        key = f[0] + " " + re.sub(r"-\d+$", "", f[1])
        w, c = out.get(key, (0, 0))
        out[key] = (w + int(f[2]), c + int(f[3]) + int(f[4]))
    return out
a, b, tck = read(sys.argv[1]), read(sys.argv[2]), int(sys.argv[3])
print(json.dumps({k: [b[k][0] - a.get(k, (0, 0))[0], (b[k][1] - a.get(k, (0, 0))[1]) * 1_000_000 // tck] for k in sorted(b)}))
PY
}

ballasts="${BASE_BIN:+ballast_base} ballast ${TOGETHER:+ballast_together}"
order="etcd $ballasts ${BARE:+bare}"
[[ -n "${BALLAST_FIRST:-}" ]] && order="$ballasts etcd ${BARE:+bare}"
load_before=$(uptime)
top_before=$(top -bn1 | head -15)
for s in $scenarios; do
  scenario=${s%@*}
  via=leader
  [[ $s == *@follower ]] && via=follower
  for target in $order; do
    [[ $target == bare && $s != put_c1_v256 ]] && continue
    dir="$work/data-$target"
    if [[ $target == bare ]]; then started=start_bare; else started=start_cluster; fi
    if ! $started "$target" "$dir"; then
      record "{\"target\":\"$target\",\"via\":\"$via\",\"result\":{\"scenario\":\"$scenario\",\"failed\":true,\"why\":\"cluster did not start\"}}"
      stop_cluster "$target" "$dir"
      continue
    fi
    if [[ $via == leader ]]; then i=$leader; else i=$follower; fi
    all=$(IFS=,; echo "${pids[*]}")
    perf_pid=""
    if [[ -n "${PERF_DIR:-}" && $target == ballast* ]]; then
      mkdir -p "$PERF_DIR"
      perf record -q -e cpu-clock -F 499 -g -p "$all" -o "$PERF_DIR/$target-$s.perf" -- sleep "$duration" \
        >/dev/null 2>&1 &
      perf_pid=$!
    fi
    woken=$(wakeups)
    threads >"$work/threads-before"
    index=$(raft_index)
    # Bounded: the timed part plus preloading and the fan-out's registration and drain time.
    if line=$(timeout $((duration + 300)) "$load" run --endpoint "${endpoints[$i]}" --scenario "$scenario" \
      --duration "$duration" --server-pid "${pids[$leader]}" --server-pids "$all"); then
      rss=0
      for p in "${pids[@]}"; do
        kb=$(ps -o rss= -p "$p" | tr -d ' ') || true
        rss=$((rss + ${kb:-0}))
      done
      woken=$(($(wakeups) - woken))
      threads >"$work/threads-after"
      index=$(($(raft_index) - index))
      split=$(per_thread "$work/threads-before" "$work/threads-after")
      record "{\"target\":\"$target\",\"via\":\"$via\",\"members_rss_kb\":$rss,\"members_wakeups\":$woken,\"raft_entries\":$index,\"threads\":$split,\"load1\":$(cut -d' ' -f1 /proc/loadavg),\"result\":$line}"
    else
      record "{\"target\":\"$target\",\"via\":\"$via\",\"result\":{\"scenario\":\"$scenario\",\"failed\":true}}"
    fi
    [[ -n $perf_pid ]] && { wait "$perf_pid" || true; }
    stop_cluster "$target" "$dir"
  done
done

for n in $(seq "$failovers"); do
  for target in etcd ballast; do
    dir="$work/data-$target"
    if ! start_cluster "$target" "$dir"; then
      record "{\"target\":\"$target\",\"try\":$n,\"result\":{\"scenario\":\"failover\",\"failed\":true}}"
      stop_cluster "$target" "$dir"
      continue
    fi
    eps=$(IFS=,; echo "${endpoints[*]}")
    if line=$(timeout 60 "$load" failover --endpoints "$eps" --kill-pid "${pids[$leader]}" --deadline 30); then
      record "{\"target\":\"$target\",\"try\":$n,\"killed\":\"m$((leader + 1))\",\"result\":$line}"
    else
      record "{\"target\":\"$target\",\"try\":$n,\"result\":{\"scenario\":\"failover\",\"failed\":true}}"
    fi
    stop_cluster "$target" "$dir"
  done
done
load_after=$(uptime)
top_after=$(top -bn1 | head -15)

out=${OUT:-$(results_file cluster "$commit")}
mkdir -p benches/results
command="bash benches/cluster-run.sh $*"
[[ -n "${SCENARIOS+set}" ]] && command="SCENARIOS=\"$SCENARIOS\" $command"
[[ -n "${FAILOVERS:-}" ]] && command="FAILOVERS=$FAILOVERS $command"
[[ -n "${DURATION:-}" ]] && command="DURATION=$DURATION $command"
[[ -n "${SHARDS:-}" ]] && command="SHARDS=$SHARDS $command"
[[ -n "${TOGETHER:-}" ]] && command="TOGETHER=$TOGETHER $command"
[[ -n "${BARE:-}" ]] && command="BARE=$BARE $command"
[[ -n "${PERF_DIR:-}" ]] && command="PERF_DIR=$PERF_DIR $command"
[[ -n "${BALLAST_BIN:-}" ]] && command="BALLAST_BIN=$BALLAST_BIN $command"
[[ -n "${BASE_BIN:-}" ]] && command="BASE_BIN=$BASE_BIN $command"
[[ -n "${BALLAST_FIRST:-}" ]] && command="BALLAST_FIRST=$BALLAST_FIRST $command"
printf '%s\n' "$load_before" "$top_before" >"$work/load-before"
printf '%s\n' "$load_after" "$top_after" >"$work/load-after"
python3 - "$raw" "$out" "$commit" "$duration" "$command" "$work/load-before" "$work/load-after" "$work/dirty" "$shards" "${BALLAST_BIN:-}" "${BASE_BIN:-}" "$order" <<'PY'
import json, statistics, subprocess, sys
raw, out, commit, duration, args, before, after, dirty_file, shards, other_bin, base_bin, order = sys.argv[1:13]
rows = [json.loads(l) for l in open(raw)]
def sh(c):
    return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
mem = sh("free -g | awk '/Mem:/ {print $2}'")
# Files changed but not committed outside benches/ (other work in the same checkout) are in the build.
dirty = sorted({(l[3:].split("/")[0] + "/" if "/" in l[3:] else l[3:]) for l in open(dirty_file).read().splitlines()
                if not l[3:].startswith("benches/") and not l[3:].startswith(".")})
disk = sh("df -h /tmp | tail -1 | awk '{print $1, $2}'")
lines = [
    f"# Load results, 3-member clusters, commit {commit}",
    "",
    f"* Machine: {sh('nproc')} cores, {mem} GiB, kernel {sh('uname -r')}, "
    f"disk {disk}; shared and noisy, so read medians and ratios.",
    f"* Reference: {sh('etcd --version | head -1')} (Debian etcd-server), three members, default flags "
    "(heartbeat 100 ms, election timeout 1 s), same machine, same run.",
    f"* Ballast: three `ballast engine` members with the same etcd flags and `--shards {shards}`, "
    + (f"the binary {other_bin} (not built from this checkout)." if other_bin else "built from "
       + (f"the working tree: commit {commit} plus uncommitted changes in {', '.join(dirty)}." if dirty else f"commit {commit}.")),
    f"* Command: `{args}`; {duration} s per scenario, fresh members and data directories per scenario, "
    "all six processes, the load client and both clusters' disks on the same machine.",
    f"* Order within each scenario: {', '.join(order.split())}.",
    "",
    "Each scenario's client talks to the leader's endpoint unless the scenario says `@follower`",
    "(writes forwarded to the leader). Server CPU per op is the user + system time of all three",
    "members over the timed part, divided by ops; its ratio is etcd / Ballast. Throughput is",
    "shared-machine throughput: the client and three members share the 2 cores.",
    "",
    "| scenario | etcd ops/s | Ballast ops/s | ratio | etcd p50 / p99 ms | Ballast p50 / p99 ms | server CPU µs/op etcd / Ballast | CPU ratio |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
]
by = {}
for r in rows:
    res = r["result"]
    if res.get("scenario") == "failover":
        continue
    name = res["scenario"] + ("@follower" if r.get("via") == "follower" else "")
    by.setdefault(name, {})[r["target"]] = res
if not any(not s.startswith("watch") for s in by):
    del lines[-8:]  # no KV scenario in this run: neither the table nor its preamble
for s, t in by.items():
    if s.startswith("watch"):
        continue
    e, b = t.get("etcd", {}), t.get("ballast", {})
    er, br = e.get("ops_per_sec", 0), b.get("ops_per_sec", 0)
    ratio = f"{br / er:.2f}x" if er else "n/a"
    ec, bc = e.get("server_cpu_us_per_op", 0), b.get("server_cpu_us_per_op", 0)
    cpu_ratio = f"{ec / bc:.2f}x" if ec and bc else "n/a"
    fail = lambda r: " (failed)" if r.get("failed") else ""
    lines.append(f"| {s} | {er:,.0f}{fail(e)} | {br:,.0f}{fail(b)} | {ratio} | {e.get('p50_ms', 0):.2f} / {e.get('p99_ms', 0):.2f} | "
                 f"{b.get('p50_ms', 0):.2f} / {b.get('p99_ms', 0):.2f} | {ec:,.1f} / {bc:,.1f} | {cpu_ratio} |")
def pair(o, b):
    # Two Ballast clusters' ops/s, CPU µs per op and "p50 / p99 | p50 / p99" for one row.
    lat = f"{o.get('p50_ms', 0):.2f} / {o.get('p99_ms', 0):.2f} | {b.get('p50_ms', 0):.2f} / {b.get('p99_ms', 0):.2f}"
    return (o.get("ops_per_sec", 0), b.get("ops_per_sec", 0), o.get("server_cpu_us_per_op", 0),
            b.get("server_cpu_us_per_op", 0), lat)
if any("ballast_together" in t for t in by.values()):
    lines += ["", "## Spread leaders against one member leading every shard", "",
              "The same scenarios on a third cluster, its members started with `--spread-shard-leaders=false`",
              "(one member leads every shard and orders every write); ratios are spread / one leader.", "",
              "| scenario | one leader ops/s | spread ops/s | ratio | one leader p50 / p99 ms | spread p50 / p99 ms | server CPU µs/op one leader / spread | CPU ratio |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s, t in by.items():
        if s.startswith("watch") or "ballast_together" not in t:
            continue
        orr, br, oc, bc, lat = pair(t["ballast_together"], t.get("ballast", {}))
        lines.append(f"| {s} | {orr:,.0f} | {br:,.0f} | " + (f"{br / orr:.2f}x" if orr else "n/a")
                     + f" | {lat} | {oc:,.1f} / {bc:,.1f} | " + (f"{bc / oc:.2f}x" if oc and bc else "n/a") + " |")
if any("ballast_base" in t for t in by.values()):
    lines += ["", "## Against an earlier build", "",
              f"The same scenarios on another cluster per scenario, its members running {base_bin} with the same",
              "flags, started just before this build's; ratios are this build / the earlier one (CPU: earlier /",
              "this), and the earlier build's throughput over etcd's for reference.", "",
              "| scenario | earlier ops/s | this build ops/s | ratio | earlier / etcd | earlier p50 / p99 ms | this p50 / p99 ms | server CPU µs/op earlier / this | CPU ratio |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s, t in by.items():
        if s.startswith("watch") or "ballast_base" not in t:
            continue
        orr, br, oc, bc, lat = pair(t["ballast_base"], t.get("ballast", {}))
        er = t.get("etcd", {}).get("ops_per_sec", 0)
        lines.append(f"| {s} | {orr:,.0f} | {br:,.0f} | " + (f"{br / orr:.2f}x" if orr else "n/a")
                     + " | " + (f"{orr / er:.2f}x" if er else "n/a")
                     + f" | {lat} | {oc:,.1f} / {bc:,.1f} | " + (f"{oc / bc:.2f}x" if oc and bc else "n/a") + " |")
if any("bare" in t for t in by.values()):
    lines += ["", "## The bare chain: the least a replicated put costs here", "",
              "Three `ballast-load bare-member` processes in the same run: the leader takes the gRPC call (tonic's",
              "server), sends the put's bytes to both followers over loopback TCP, writes and fdatasyncs its own",
              "log file, and answers once one follower has written and fdatasynced them too; no raft, no storage",
              "engine, no index, one put at a time (benches/load/src/bare.rs). Any server with a synced quorum of",
              "two of three walks at least this chain for a put at one in flight, so 2x etcd is within reach",
              "of a server here only if the bare chain itself is past 2x.", "",
              "| scenario | etcd ops/s | bare ops/s | Ballast ops/s | bare / etcd | Ballast / bare | p50 / p99 ms etcd, bare, Ballast | server CPU µs/op etcd / bare / Ballast |",
              "|---|---:|---:|---:|---:|---:|---|---:|"]
    for s, t in by.items():
        if "bare" not in t:
            continue
        e, x, b = t.get("etcd", {}), t["bare"], t.get("ballast", {})
        er, xr, br = e.get("ops_per_sec", 0), x.get("ops_per_sec", 0), b.get("ops_per_sec", 0)
        lat = ", ".join(f"{r.get('p50_ms', 0):.2f} / {r.get('p99_ms', 0):.2f}" for r in (e, x, b))
        cpu = " / ".join(f"{r.get('server_cpu_us_per_op', 0):,.0f}" for r in (e, x, b))
        lines.append(f"| {s} | {er:,.0f} | {xr:,.0f} | {br:,.0f} | " + (f"{xr / er:.2f}x" if er else "n/a")
                     + " | " + (f"{br / xr:.2f}x" if xr else "n/a") + f" | {lat} | {cpu} |")
woke = {}
for r in rows:
    res = r["result"]
    if "members_wakeups" in r and res.get("ops"):
        name = res["scenario"] + ("@follower" if r.get("via") == "follower" else "")
        woke.setdefault(name, {})[r["target"]] = r["members_wakeups"] / res["ops"]
if woke:
    cols = [c for c in ("etcd", "ballast_base", "ballast", "bare") if any(c in w for w in woke.values())]
    names = {"etcd": "etcd", "ballast_base": "earlier build", "ballast": "Ballast", "bare": "bare chain"}
    lines += ["", "## Wake-ups per op", "",
              "Voluntary context switches of every thread of the three members (a thread blocked, then woken)",
              "over the whole load run (its connecting and preloading too), divided by the timed part's ops.", "",
              "| scenario | " + " | ".join(names[c] for c in cols) + " |", "|---|" + "---:|" * len(cols)]
    for s, w in woke.items():
        lines.append(f"| {s} | " + " | ".join(f"{w[c]:.1f}" if c in w else "n/a" for c in cols) + " |")
client = {}
for r in rows:
    res = r["result"]
    if res.get("client_cpu_s") is not None and res.get("ops") and not res["scenario"].startswith("watch"):
        name = res["scenario"] + ("@follower" if r.get("via") == "follower" else "")
        client.setdefault(name, {})[r["target"]] = (res["client_cpu_s"] * 1e6 / res["ops"],
                                                    res.get("server_cpu_us_per_op", 0))
if client:
    cols = [c for c in ("etcd", "ballast_base", "ballast", "bare") if any(c in w for w in client.values())]
    names = {"etcd": "etcd", "ballast_base": "earlier build", "ballast": "Ballast", "bare": "bare chain"}
    lines += ["", "## The load client's CPU per op", "",
              "The load client shares the cores with the members: its own CPU time (user + system) over the",
              "timed part per op, and that plus the members' server CPU per op (what one op costs the machine).", "",
              "| scenario | " + " | ".join(f"{names[c]} client / client + server µs" for c in cols) + " |",
              "|---|" + "---:|" * len(cols)]
    for s, w in client.items():
        lines.append(f"| {s} | " + " | ".join(f"{w[c][0]:,.1f} / {w[c][0] + w[c][1]:,.1f}" if c in w else "n/a"
                                                for c in cols) + " |")
split = [r for r in rows if r.get("threads") and r["result"].get("ops") and r["target"].startswith("ballast")]
if split:
    names = {"ballast_base": "earlier build", "ballast": "this build", "ballast_together": "one leader"}
    lines += ["", "## Per thread and per round (Ballast)", "",
              "CPU time (user + system) and wake-ups (voluntary context switches) of each member's threads over",
              "the whole load run (connecting and preloading too), per op of the timed part; `serving` is the",
              "follower the load goes to, `follower` the other one (both when the load goes to the leader).",
              "Ops per round, for puts: the timed part's ops over the entries the leader's shard 0 appended",
              "during the run (a round of writes is one entry; with several shards, shard 0's only). Threads",
              "with less than 1 µs per op are left out.", "",
              "| scenario | build | ops per round | member, thread: CPU µs / wake-ups per op |", "|---|---|---:|---|"]
    for r in split:
        res = r["result"]
        ops = res["ops"]
        name = res["scenario"] + ("@follower" if r.get("via") == "follower" else "")
        puts = res["scenario"].startswith("put") and r.get("raft_entries", 0) > 0
        per_round = f"{ops / r['raft_entries']:.1f}" if puts else "n/a"
        parts = [f"{k}: {c / ops:,.0f} / {w / ops:.2f}" for k, (w, c) in r["threads"].items() if c / ops >= 1]
        lines.append(f"| {name} | {names.get(r['target'], r['target'])} | {per_round} | " + "; ".join(parts) + " |")
for s, t in by.items():
    if not s.startswith("watch"):
        continue
    lines += ["", f"## {s}", "", "| figure | etcd | Ballast |", "|---|---:|---:|"]
    for k, label in [("register_secs", "watcher registration, s"), ("ops_per_sec", "delivered events/s"),
                     ("delivery_p50_ms", "delivery p50 ms"), ("delivery_p99_ms", "delivery p99 ms"),
                     ("puts_sent", "puts sent"), ("puts", "puts acknowledged"), ("events_expected", "events expected"),
                     ("events_missed", "events missed"), ("watchers_registered", "watchers registered"),
                     ("watchers_canceled", "watchers canceled"), ("put_p99_ms", "writer put p99 ms"),
                     ("server_cpu_s", "CPU s of the three members (timed part)"), ("client_cpu_s", "client CPU s (timed part)")]:
        if any(k in r for r in t.values()):
            lines.append(f"| {label} | " + " | ".join(f"{t.get(c, {}).get(k, 0):,.2f}" for c in ("etcd", "ballast")) + " |")
fo = {}
for r in rows:
    if r["result"].get("scenario") == "failover":
        fo.setdefault(r["target"], []).append(r["result"])
if fo:
    lines += ["", "## Leader failover", "",
              "Writers (8 per endpoint, each put with a 100 ms timeout and sent again on failure) put",
              "through all three endpoints; the leader is killed with SIGKILL (kill(1)) after 2 s of writes. Time",
              "from the kill (kill(1) returned) to the first acknowledged put sent after it, which only a new",
              "leader can commit; in brackets, to the first acknowledgement of any put (one sent before the",
              "kill may have been committed before it). etcd's reference: election timeout 1 s.",
              "",
              "| server | tries, ms | median ms |", "|---|---|---:|"]
    for c, name in (("etcd", "etcd"), ("ballast", "Ballast")):
        res = fo.get(c, [])
        ok = [r["failover_ms"] for r in res if not r.get("failed") and r.get("failover_ms", -1) >= 0]
        tries = ", ".join("failed" if r.get("failed") or r.get("failover_ms", -1) < 0
                          else f"{r['failover_ms']:,.0f} ({r['first_ack_any_ms']:,.0f})" for r in res)
        med = f"{statistics.median(ok):,.0f}" if ok else "n/a"
        lines.append(f"| {name} | {tries} | {med} |")
def busy(path):
    # Processes of others on top's list using 20% of a core or more at that moment.
    out = set()
    for l in open(path).read().splitlines():
        f = l.split()
        if len(f) >= 12 and f[0].isdigit():
            try:
                if float(f[8]) >= 20:
                    out.add(f[11])
            except ValueError:
                pass
    return sorted(out)
others = sorted(set(busy(before)) | set(busy(after)))
if others:
    lines[6:6] = [f"* Other work on the 2 cores (processes this run did not start; top is read before its first and after "
                  f"its last cluster): {', '.join(others)} busy when the run started or ended (top below); "
                  "the load is not constant, so compare the two servers within a scenario and across runs by median."]
lines += ["", "## Machine load", "", "Before the run:", "", "```"] + open(before).read().rstrip().splitlines() + ["```", "",
          "After the run:", "", "```"] + open(after).read().rstrip().splitlines() + ["```"]
lines += ["", "## Raw results", "", "```"] + [json.dumps(r) for r in rows] + ["```", ""]
open(out, "w").write("\n".join(lines))
print(out)
PY
