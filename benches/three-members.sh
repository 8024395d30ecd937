# Sourced by the cluster scripts (cluster-run.sh, put-trace.sh, round-trace.sh): 3-member
# clusters on loopback.

# member_args <i> <port> <data dir> <token>: sets `args` to member m<i>'s etcd flags, for
# Ballast and etcd alike: client port <port> + 2i, peer port one above it, data in
# <data dir>/m<i>, the --initial-cluster of all three.
member_args() {
  local i=$1 port=$2 dir=$3 token=$4 ic="" j
  for j in 1 2 3; do ic+="${ic:+,}m$j=http://127.0.0.1:$((port + 2 * j + 1))"; done
  local client="http://127.0.0.1:$((port + 2 * i))" peer="http://127.0.0.1:$((port + 2 * i + 1))"
  args=(--name "m$i" --data-dir "$dir/m$i" --listen-client-urls "$client" --advertise-client-urls "$client"
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" --initial-cluster "$ic"
    --initial-cluster-token "$token" --initial-cluster-state new --quota-backend-bytes 8589934592)
}

# use_binaries: sets `ballast_bin` and `load_bin`: $BALLAST_BIN and $LOAD_BIN, else the release
# builds in $CARGO_TARGET_DIR (target/ when unset).
use_binaries() {
  local dir=${CARGO_TARGET_DIR:-target}
  ballast_bin=${BALLAST_BIN:-$dir/release/ballast}
  load_bin=${LOAD_BIN:-$dir/release/ballast-load}
}

# setup_work <file patterns...>: sets `commit` (HEAD's) and `work`, the run's scratch directory,
# and empties `pids`; at exit the members are killed and the directory removed, after the files
# of `work` matching the patterns are copied to $KEEP when it is set.
setup_work() {
  keep_patterns=("$@")
  commit=$(git rev-parse --short HEAD)
  work=$(mktemp -d)
  pids=()
  trap cleanup_work EXIT
  trap 'exit 130' INT TERM
  export ETCDCTL_API=3
}

cleanup_work() {
  local f
  kill_members
  if [[ -n "${KEEP:-}" ]]; then
    mkdir -p "$KEEP"
    for f in "${keep_patterns[@]}"; do cp "$work"/$f "$KEEP"/ 2>/dev/null || true; done
  fi
  rm -rf "$work"
}

# kill_members: kills every process in `pids` with SIGKILL and reaps it.
kill_members() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}

# start_three <etcd|ballast> <dir> <port> [ballast engine flags...]: starts members m1..m3 with
# data and logs in <dir> (client port <port> + 2i, peer port + 1), Ballast from $ballast_bin
# with --shards 1 and the flags given; appends their process IDs to `pids`, sets `endpoints`
# (host:port) and `leader` (an index into both) once all three name one leader, within 30 s;
# fails with the members' last log lines otherwise.
start_three() {
  local target=$1 dir=$2 port=$3 i st until args
  shift 3
  endpoints=()
  for i in 1 2 3; do endpoints+=("127.0.0.1:$((port + 2 * i))"); done
  for i in 1 2 3; do
    member_args "$i" "$port" "$dir/data" "trace-$port"
    if [[ $target == etcd ]]; then
      etcd "${args[@]}" >"$dir/m$i.log" 2>&1 &
    else
      "$ballast_bin" engine "${args[@]}" --shards 1 "${@//%m/m$i}" >"$dir/m$i.log" 2>&1 &
    fi
    pids+=($!)
  done
  local eps
  eps=$(IFS=,; echo "${endpoints[*]}")
  leader=""
  until=$((SECONDS + 30))
  while ((SECONDS < until)); do
    if st=$(timeout 5 etcdctl --endpoints="$eps" endpoint status -w json 2>/dev/null); then
      leader=$(python3 -c '
import json, sys
st = json.loads(sys.stdin.read())
leaders = {s["Status"].get("leader", 0) for s in st}
if len(st) == 3 and len(leaders) == 1 and 0 not in leaders:
    (l,) = leaders
    print([i for i, s in enumerate(st) if s["Status"]["header"]["member_id"] == l][0])
' <<<"$st" 2>/dev/null) || true  # no leader named yet
      [[ -n $leader ]] && return 0
    fi
    sleep 0.2
  done
  echo "the cluster did not elect a leader" >&2
  tail -n 20 "$dir"/m*.log >&2
  return 1
}
