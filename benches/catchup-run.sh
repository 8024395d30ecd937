#!/usr/bin/env bash
# Time for a new member to catch up by snapshot: a 3-member stock etcd cluster and a 3-member
# Ballast cluster on this machine (loopback), one after the other in the same run, each loaded
# with SIZE_MB of data; then a fourth member is added (`etcdctl member add`, started with
# --initial-cluster-state existing) and timed from its start until it has caught up. Writes
# benches/results/<date>-<commit>-catchup.md.
#
#   bash benches/catchup-run.sh            # 1 GiB: 262,144 keys x 4 KiB values
#   bash benches/catchup-run.sh --quick    # 64 MiB (smoke run)
#   SIZE_MB=512 VALUE_BYTES=1024 bash benches/catchup-run.sh
#   LOG_DIR=/tmp/catchup-logs bash benches/catchup-run.sh    # keep every member's log
#   TARGETS=ballast bash benches/catchup-run.sh --quick      # one server only
#   BIN_DIR=/tmp/bins bash benches/catchup-run.sh             # binaries copied aside earlier
#   BASE_BIN=/tmp/ballast-main bash benches/catchup-run.sh     # also an earlier `ballast` binary
#   PERF_DIR=/tmp/catchup-perf bash benches/catchup-run.sh     # `perf record` the catch-up
#
# BASE_BIN adds a third cluster, target `ballast-base`: the same run with that binary (the
# previous build), between etcd's and this build's, so the report compares all three.
#
# Needs etcd and etcdctl (3.4) on PATH, python3, bc, and the release binaries of `ballast` and
# `ballast-load` (`cargo build --release -p ballast -p ballast-load`; built here if missing,
# never rebuilt, and copied aside so a rebuild during the run does not change them). Data
# directories go under TMPDIR (default /tmp): about 14 x SIZE_MB of free disk (one server's
# cluster at a time); the load stops if free disk falls under MIN_FREE_MB (default 2048).
#
# Load: SIZE_MB / VALUE_BYTES keys `bulk/<n>` with random (incompressible) values, written by
# 8 parallel `etcdctl txn`s of 128 puts each (etcd's --max-txn-ops default). Then, so that both
# servers' raft logs are compacted past the new member with their default flags, `ballast-load
# run --scenario put_c16_v256` (256-byte values to 100k keys `put/<n>`, 5 s at a time) until the
# leader's raft index passes the server's threshold: etcd snapshots every --snapshot-count =
# 100,000 applied entries and then keeps 5,000 (ETCD_MIN_ENTRIES, default 110,000); Ballast keeps
# --experimental-snapshot-catchup-entries = 5,000 and compacts once 10,000 are applied past the
# log's start (BALLAST_MIN_ENTRIES, default 15,000). One etcd entry is one request; one Ballast
# entry is one round of the shard's loop, a batch of the requests in flight, so Ballast passes
# its threshold with a few more puts than entries. Nothing is written during the catch-up.
#
# Caught up: the new member's `etcdctl endpoint status` (polled every 100 ms, its own endpoint)
# reports the leader's revision. Measured: wall time from starting the new member to caught up,
# the user + system CPU seconds of the leader and of the new member over that time
# (/proc/<pid>/stat), the new member's data directory size when caught up, the load average.
# The new member's log is searched for its snapshot install.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/store.sh
size_mb=${SIZE_MB:-1024}
[[ "${1:-}" == "--quick" ]] && size_mb=${SIZE_MB:-64}
value_bytes=${VALUE_BYTES:-4096}
etcd_min_entries=${ETCD_MIN_ENTRIES:-110000}
ballast_min_entries=${BALLAST_MIN_ENTRIES:-15000}
targets=${TARGETS:-etcd ${BASE_BIN:+ballast-base }ballast}
bin=${BIN_DIR:-target/release}   # BIN_DIR: binaries copied aside earlier, instead of target/release
if [[ -z "${BIN_DIR:-}" && ( ! -x target/release/ballast || ! -x target/release/ballast-load ) ]]; then
  cargo build --release -p ballast -p ballast-load
fi
commit=$(git rev-parse --short HEAD)
work=$(mktemp -d)
git --no-optional-locks status --porcelain >"$work/dirty"
mkdir "$work/bin"
cp -p "$bin/ballast" "$bin/ballast-load" "$work/bin/"
base_built=""
if [[ -n "${BASE_BIN:-}" ]]; then
  cp -p "$BASE_BIN" "$work/bin/ballast-base"
  base_built=$(date -u -r "$BASE_BIN" +%Y-%m-%dT%H:%M:%SZ)
fi
# The binaries may predate HEAD (BIN_DIR, or not rebuilt): the report says when they were built.
built=$(date -u -r "$bin/ballast" +%Y-%m-%dT%H:%M:%SZ)
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

# Peak disk use of one 3-member cluster while loading, seen here: etcd about 2.9 x SIZE_MB per
# member (bbolt plus WAL), Ballast above 3.5 x (RocksDB's WAL, the raft log and the KV column
# family hold the data until flushes and log compaction catch up); plus the fourth member.
need_kb=$((size_mb * 1024 * 14))
free_kb=$(df -Pk "$work" | awk 'NR==2 {print $4}')
if ((free_kb < need_kb)); then
  echo "need about $((need_kb / 1024 / 1024)) GiB free under $work, have $((free_kb / 1024 / 1024)) GiB" >&2
  exit 1
fi

export ETCDCTL_API=3
raw="$work/raw.jsonl"
: >"$raw"
port=25000
hz=$(getconf CLK_TCK)

# cpu_s <pid>: user + system CPU seconds of a process so far.
cpu_s() { awk -v hz="$hz" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }

# member_args <target> <dir> <i> <initial-cluster> <state>: member m<i>'s flags (client port
# port + 2i, peer port port + 2i + 1).
member_args() {
  local dir=$2 i=$3 ic=$4 state=$5
  local client="http://127.0.0.1:$((port + 2 * i))" peer="http://127.0.0.1:$((port + 2 * i + 1))"
  args=(--name "m$i" --data-dir "$dir/m$i" --listen-client-urls "$client" --advertise-client-urls "$client"
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" --initial-cluster "$ic"
    --initial-cluster-token "catchup-$port" --initial-cluster-state "$state" --quota-backend-bytes 8589934592)
}

# start_member <target> <i>: starts m<i> with args, appends its pid to pids.
start_member() {
  local target=$1 i=$2
  if [[ $target == etcd ]]; then
    etcd "${args[@]}" >"$logs/$target-$port-m$i.log" 2>&1 &
  elif [[ $target == ballast-base ]]; then
    "$work/bin/ballast-base" engine "${args[@]}" --shards 1 >"$logs/$target-$port-m$i.log" 2>&1 &
  else
    "$ballast" engine "${args[@]}" --shards 1 >"$logs/$target-$port-m$i.log" 2>&1 &
  fi
  pids+=($!)
}

# start_cluster <target> <dir>: members m1..m3 on the next ports (25010 and up); sets pids,
# endpoints (host:port, member order) and leader (index); at most 30 s.
start_cluster() {
  local target=$1 dir=$2 ic="" i
  port=$((port + 10))
  endpoints=()
  for i in 1 2 3; do
    ic+="${ic:+,}m$i=http://127.0.0.1:$((port + 2 * i + 1))"
    endpoints+=("127.0.0.1:$((port + 2 * i))")
  done
  pids=()
  for i in 1 2 3; do
    member_args "$target" "$dir" "$i" "$ic" new
    start_member "$target" "$i"
  done
  local until=$((SECONDS + 30))
  while ((SECONDS < until)); do
    if find_leader; then return 0; fi
    sleep 0.1
  done
  echo "$target cluster did not start" >&2
  tail -n 20 "$logs/$target-$port"-m*.log >&2
  return 1
}

# status <endpoints>: `etcdctl endpoint status -w json` (etcdctl 3.4 wants host:port here).
status() { timeout 5 etcdctl --endpoints="$1" endpoint status -w json 2>/dev/null; }

# find_leader: sets leader when m1..m3 all name the same leader.
find_leader() {
  local eps st found
  eps=$(IFS=,; echo "${endpoints[*]:0:3}")
  st=$(status "$eps") || return 1
  found=$(python3 -c '
import json, sys
eps = sys.argv[1].split(",")
st = json.loads(sys.stdin.read())
leaders = {s["Status"].get("leader", 0) for s in st}
if len(st) != 3 or len(leaders) != 1 or 0 in leaders:
    sys.exit(1)
(lead,) = leaders
idx = [i for i, e in enumerate(eps) for s in st if s["Endpoint"] == e and s["Status"]["header"]["member_id"] == lead]
if len(idx) != 1:
    sys.exit(1)
print(idx[0])
' "$eps" <<<"$st") || return 1
  leader=$found
}

# field <endpoint> <python expr over s = Status>: one figure from a member's status.
field() {
  local st
  st=$(status "$1") || return 1
  python3 -c 'import json, sys; s = json.loads(sys.stdin.read())[0]["Status"]; print(eval(sys.argv[1]))' "$2" <<<"$st"
}

# bulk_load <endpoint>: SIZE_MB of VALUE_BYTES values in txns of 128 puts, 8 in flight.
bulk_load() {
  python3 - "$1" "$size_mb" "$value_bytes" <<'PY'
import base64, os, shutil, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
ep, size_mb, vb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
keys = size_mb * 1024 * 1024 // vb
per_txn = 128
def value():
    # Printable random bytes: base64 of vb*3/4 random bytes is vb characters.
    return base64.b64encode(os.urandom((vb * 3 + 3) // 4))[:vb].decode()
min_free = int(os.environ.get("MIN_FREE_MB", "2048")) * 1048576
def txn(start):
    # A full disk would take every member down (and others' work on the machine with them).
    if shutil.disk_usage(os.environ["CATCHUP_WORK"]).free < min_free:
        raise SystemExit(f"stopped loading at key {start}: under {min_free >> 20} MiB free disk")
    # etcdctl txn on stdin: compares, a blank line, success puts, a blank line, failure ops, a blank line.
    body = "\n" + "".join(f"put bulk/{k:09d} {value()}\n" for k in range(start, min(start + per_txn, keys))) + "\n\n"
    for attempt in range(5):
        r = subprocess.run(["etcdctl", "--endpoints", ep, "--command-timeout", "30s", "txn"],
                           input=body, capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.startswith("SUCCESS"):
            return
    raise SystemExit(f"txn at {start} failed: {r.stderr.strip()[:300]}")
with ThreadPoolExecutor(8) as ex:
    for _ in ex.map(txn, range(0, keys, per_txn)):
        pass
print(keys)
PY
}

# run_target <etcd|ballast>: one cluster, load, add m4, time its catch-up; records one JSON line.
run_target() {
  local target=$1 dir="$work/data-$1"
  start_cluster "$target" "$dir"
  local lep=${endpoints[$leader]} lpid=${pids[$leader]}
  echo "$target: leader m$((leader + 1)), loading $size_mb MiB" >&2
  local t0 t1 keys
  t0=$(date +%s.%N)
  keys=$(CATCHUP_WORK=$work bulk_load "$lep")
  t1=$(date +%s.%N)
  local bulk_s pushes=0 idx
  bulk_s=$(echo "$t1 - $t0" | bc)
  local min_entries=$etcd_min_entries
  [[ $target != etcd ]] && min_entries=$ballast_min_entries
  idx=$(field "$lep" 's.get("raftIndex", 0)')
  while ((idx < min_entries)); do
    timeout 300 "$load" run --endpoint "http://$lep" --scenario put_c16_v256 --duration 5 >/dev/null
    pushes=$((pushes + 1))
    idx=$(field "$lep" 's.get("raftIndex", 0)')
  done
  local t2 push_s
  t2=$(date +%s.%N)
  push_s=$(echo "$t2 - $t1" | bc)
  # The leader may have changed under load.
  find_leader
  lep=${endpoints[$leader]} lpid=${pids[$leader]}
  local rev db raft_index
  rev=$(field "$lep" 's["header"].get("revision", 0)')
  db=$(field "$lep" 's.get("dbSize", 0)')
  raft_index=$(field "$lep" 's.get("raftIndex", 0)')
  local du_members
  du_members=$(du -sk "$dir"/m1 "$dir"/m2 "$dir"/m3 | awk '{printf "%s%s", sep, $1 * 1024; sep=","}')
  echo "$target: $keys keys in $bulk_s s, log pushed to $raft_index in $push_s s; db $db, revision $rev" >&2
  sync
  sleep 2

  # The fourth member.
  local peer4="http://127.0.0.1:$((port + 9))" added ic4
  added=$(timeout 10 etcdctl --endpoints="$lep" member add m4 --peer-urls="$peer4")
  ic4=$(sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p' <<<"$added")
  endpoints+=("127.0.0.1:$((port + 8))")
  member_args "$target" "$dir" 4 "$ic4" existing
  local load_start lcpu0 c0 c1 caught=false
  load_start=$(cut -d' ' -f1-3 /proc/loadavg)
  lcpu0=$(cpu_s "$lpid")
  c0=$(date +%s.%N)
  start_member "$target" 4
  local npid=${pids[3]} r deadline=$((SECONDS + 900)) perfs=()
  # PERF_DIR: CPU samples of the whole machine over the catch-up, every thread of the leader
  # and of the new member included (`perf report -i <file> --pid <pid>`; the pids are written
  # beside it).
  if [[ -n "${PERF_DIR:-}" ]]; then
    mkdir -p "$PERF_DIR"
    echo "leader $lpid new $npid" >"$PERF_DIR/$target.pids"
    perf record -q -a -F 499 -g -o "$PERF_DIR/$target.data" >/dev/null 2>&1 &
    perfs+=($!)
  fi
  while ((SECONDS < deadline)); do
    r=$(field "${endpoints[3]}" 's["header"].get("revision", 0)' 2>/dev/null) || r=0
    if ((r >= rev)); then
      c1=$(date +%s.%N)
      caught=true
      break
    fi
    sleep 0.1
  done
  [[ $caught == true ]] || c1=$(date +%s.%N)
  for p in "${perfs[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${perfs[@]}"; do wait "$p" 2>/dev/null || true; done
  local lcpu1 ncpu catch_s du4 load_end
  lcpu1=$(cpu_s "$lpid")
  ncpu=$(cpu_s "$npid")
  catch_s=$(echo "$c1 - $c0" | bc)
  du4=$(($(du -sk "$dir/m4" | cut -f1) * 1024))
  load_end=$(cut -d' ' -f1-3 /proc/loadavg)
  local n4_index
  n4_index=$(field "${endpoints[3]}" 's.get("raftIndex", 0)' 2>/dev/null) || n4_index=0
  # The snapshot, as each server logs it: etcd 3.4's new member ("applying snapshot",
  # "restored mvcc store", rafthttp "received and saved database snapshot"), its leader
  # ("database snapshot ... sent out successfully"); Ballast's "snapshot installed".
  local snaplog="$work/snap-$target.txt"
  {
    echo "== new member m4 =="
    grep -i -E 'snapshot' "$logs/$target-$port-m4.log" | head -20 || true
    echo "== leader m$((leader + 1)) =="
    grep -i -E 'snapshot' "$logs/$target-$port-m$((leader + 1)).log" | tail -10 || true
  } | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-400 >"$snaplog"
  local confirmed=false
  if [[ $target == etcd ]]; then
    grep -q -E 'received and saved database snapshot|applying snapshot at index|restored mvcc store' "$logs/$target-$port-m4.log" && confirmed=true
  else
    grep -q 'snapshot installed' "$logs/$target-$port-m4.log" && confirmed=true
  fi
  echo "$target: caught up $caught in $catch_s s, leader CPU $(echo "$lcpu1 - $lcpu0" | bc) s, snapshot $confirmed" >&2
  python3 - "$raw" "$snaplog" "$logs/$target-$port-m4.log" "$c0" "$target" <<PY
import datetime, json, re, sys
# Seconds from starting m4 to its log's snapshot-applied line (etcd 3.4: "finished applying
# incoming snapshot", local time; Ballast: "snapshot installed", RFC 3339 UTC).
applied_s = None
pat = "finished applying incoming snapshot" if sys.argv[5] == "etcd" else "snapshot installed"
for line in open(sys.argv[3], errors="replace"):
    if pat in line:
        m = re.search(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d(\.\d+)?)(Z)?", line)
        if m:
            ts = datetime.datetime.fromisoformat(m.group(1) + "T" + m.group(2)[:15])
            if m.group(4):
                ts = ts.replace(tzinfo=datetime.timezone.utc)
            applied_s = round(ts.timestamp() - float(sys.argv[4]), 3)
        break
row = dict(target="$target", keys=$keys, value_bytes=$value_bytes, size_mb=$size_mb, bulk_load_s=$bulk_s,
           push_load_s=$push_s, push_runs=$pushes, leader_raft_index=$raft_index, revision=$rev, db_size=$db,
           member_dirs_bytes=[$du_members], caught_up="$caught" == "true", catchup_s=$catch_s,
           leader_cpu_s=round($lcpu1 - $lcpu0, 2), new_member_cpu_s=$ncpu, new_member_dir_bytes=$du4,
           new_member_raft_index=$n4_index, snapshot_confirmed="$confirmed" == "true", snapshot_applied_s=applied_s, loadavg_start="$load_start",
           loadavg_end="$load_end", snapshot_log=open(sys.argv[2]).read())
open(sys.argv[1], "a").write(json.dumps(row) + "\n")
PY
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
  rm -rf "$dir"
  sync
  sleep 2
}

top_before=$(uptime; top -bn1 | head -15)
for target in $targets; do
  run_target "$target"
done
top_after=$(uptime; top -bn1 | head -15)

out=$(results_file catchup "$commit")
command="bash benches/catchup-run.sh${*:+ $*}"
[[ -n "${BIN_DIR:-}" ]] && command="BIN_DIR=<binaries copied aside> $command"
[[ -n "${SIZE_MB:-}" ]] && command="SIZE_MB=$SIZE_MB $command"
[[ -n "${VALUE_BYTES:-}" ]] && command="VALUE_BYTES=$VALUE_BYTES $command"
[[ -n "${ETCD_MIN_ENTRIES:-}" ]] && command="ETCD_MIN_ENTRIES=$ETCD_MIN_ENTRIES $command"
[[ -n "${BALLAST_MIN_ENTRIES:-}" ]] && command="BALLAST_MIN_ENTRIES=$BALLAST_MIN_ENTRIES $command"
printf '%s\n' "$top_before" >"$work/before"
printf '%s\n' "$top_after" >"$work/after"
[[ -n "${BASE_BIN:-}" ]] && command="BASE_BIN=<previous build's ballast> $command"
python3 - "$raw" "$out" "$commit" "$command" "$work/before" "$work/after" "$work/dirty" "$built" "${BIN_DIR:-}" "$base_built" <<'PY'
import json, subprocess, sys
raw, out, commit, command, before, after, dirty_file, built, from_dir, base_built = sys.argv[1:11]
rows = {r["target"]: r for r in map(json.loads, open(raw))}
def sh(c):
    return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
dirty = sorted({(l[3:].split("/")[0] + "/" if "/" in l[3:] else l[3:]) for l in open(dirty_file).read().splitlines()
                if not l[3:].startswith("benches/") and not l[3:].startswith(".")})
r0 = next(iter(rows.values()))
mib = lambda b: f"{b / 1048576:,.0f} MiB"
mem = sh("free -g | awk '/Mem:/ {print $2}'")
disk = sh("df -h /tmp | tail -1 | awk '{print $1, $2}'")
lines = [
    f"# A new member catching up by snapshot, 3-member clusters, commit {commit}",
    "",
    f"* Machine: {sh('nproc')} cores, {mem} GiB, kernel {sh('uname -r')}, "
    f"disk {disk}; shared with other work (load average below), so the figures are noisy.",
    f"* Reference: {sh('etcd --version | head -1')} (Debian etcd-server), default flags but `--quota-backend-bytes 8589934592`.",
    "* Ballast: `ballast engine --shards 1`, the same etcd flags; the "
    + f"`ballast` binary dated {built} ({'from BIN_DIR' if from_dir else 'target/release, not rebuilt by the script'}); "
    + f"HEAD was {commit} when the run began"
    + (f", with uncommitted changes in {', '.join(dirty)}." if dirty else ".")
    + " A binary dated before HEAD's commit may not contain it."
    + (f" Ballast (base): the previous build's `ballast` binary (BASE_BIN), dated {base_built}, same flags." if base_built else ""),
    f"* Command: `{command}`",
    f"* Data: {r0['keys']:,} keys `bulk/<n>` × {r0['value_bytes']:,}-byte random values ({r0['size_mb']:,} MiB of values), "
    "written by 8 parallel `etcdctl txn` of 128 puts; then `ballast-load` `put_c16_v256` (256-byte values to 100k keys) "
    "until the leader's raft index passed the server's log retention with default flags (etcd: snapshot every 100,000 entries, "
    "then keep 5,000, so pushed past 110,000; Ballast: keep 5,000, compacted once 10,000 are applied past the log's start, "
    "so pushed past 15,000; one Ballast entry is a round's batch of requests, so the revision tells the puts), "
    "leaving the new member behind the leader's log.",
    "* Catch-up: `etcdctl member add m4` on the leader, then m4 started with `--initial-cluster-state existing`; timed from "
    "starting m4 until its own `endpoint status` (polled every 100 ms) reports the leader's revision. "
    "No writes during the catch-up. CPU is user + system from /proc/<pid>/stat.",
    "",
]
e, b, p = rows.get("etcd", {}), rows.get("ballast", {}), rows.get("ballast-base")
if p is None:
    lines += ["| | etcd | Ballast | Ballast / etcd |", "|---|---:|---:|---:|"]
else:
    lines += ["| | etcd | Ballast (base) | Ballast | Ballast / etcd | Ballast / base |", "|---|---:|---:|---:|---:|---:|"]
def row(label, key, fmt, ratio=True):
    ev, bv = e.get(key), b.get(key)
    f = lambda v: "n/a" if v is None else fmt(v)
    ratio_of = lambda x, y: f"{x / y:.2f}x" if ratio and y and x is not None else ""
    if p is None:
        lines.append(f"| {label} | {f(ev)} | {f(bv)} | {ratio_of(bv, ev)} |")
    else:
        pv = p.get(key)
        lines.append(f"| {label} | {f(ev)} | {f(pv)} | {f(bv)} | {ratio_of(bv, ev)} | {ratio_of(bv, pv)} |")
row("bulk load, s", "bulk_load_s", lambda v: f"{v:,.1f}")
row("log push (put_c16_v256), s", "push_load_s", lambda v: f"{v:,.1f}")
row("leader raft index before m4", "leader_raft_index", lambda v: f"{v:,}", False)
row("revision", "revision", lambda v: f"{v:,}", False)
row("DB size (endpoint status)", "db_size", mib)
row("**catch-up wall time, s**", "catchup_s", lambda v: f"**{v:,.2f}**")
row("snapshot applied (new member's log), s after start", "snapshot_applied_s", lambda v: f"{v:,.2f}")
row("leader CPU during catch-up, s", "leader_cpu_s", lambda v: f"{v:,.2f}")
row("new member CPU during catch-up, s", "new_member_cpu_s", lambda v: f"{v:,.2f}")
row("new member data dir when caught up", "new_member_dir_bytes", mib)
row("caught up", "caught_up", str, False)
row("snapshot installed (new member's log)", "snapshot_confirmed", lambda v: "yes" if v else "NOT FOUND", False)
row("load average at m4 start (1/5/15 min)", "loadavg_start", str, False)
row("load average when caught up", "loadavg_end", str, False)
lines.append("")
for t, r in rows.items():
    lines += [f"Snapshot lines of the {t} run's logs:", "", "```"] + r["snapshot_log"].rstrip().splitlines() + ["```", ""]
lines += ["## Machine load", "", "Before the run:", "", "```"] + open(before).read().rstrip().splitlines() + ["```", "",
          "After the run:", "", "```"] + open(after).read().rstrip().splitlines() + ["```"]
lines += ["", "## Raw results", "", "```"] + [json.dumps({k: v for k, v in r.items() if k != "snapshot_log"}) for r in rows.values()] + ["```", ""]
open(out, "w").write("\n".join(lines))
print(out)
PY
