#!/usr/bin/env bash
# Runs a local Ballast cluster on this machine: three engine members and one Kubernetes API
# frontend, all on loopback.
#
#   deploy/local-cluster.sh [start] [DATA_DIR]   start (or restart) the cluster and wait until it serves;
#                                                with some processes running, starts only the others
#                                                (without `start`, DATA_DIR must contain a slash)
#   deploy/local-cluster.sh status  [DATA_DIR]   say which processes run; etcdctl endpoint status
#   deploy/local-cluster.sh stop    [DATA_DIR]   stop exactly the processes `start` started
#
# DATA_DIR (or BALLAST_DATA_DIR; default ${TMPDIR:-/tmp}/ballast-local-cluster) holds everything:
# each member's data directory (m1/ m2/ m3/), the frontend's certificates and admin kubeconfig
# (frontend/), one log and one pid file per process, and cluster.env, the ports chosen at first
# start.
#
# Environment (read at first start; later starts reuse cluster.env, because a member's peer URLs
# are fixed in its data directory):
#   BALLAST_BIN            the ballast binary (default: target/release/ballast of this checkout,
#                          built with `cargo build --release --bin ballast` if missing)
#   BALLAST_CLIENT_PORTS   three comma-separated etcd client ports (default 22379,22479,22579)
#   BALLAST_PEER_PORTS     three comma-separated peer ports        (default 22380,22480,22580)
#   BALLAST_SECURE_PORT    the Kubernetes API's HTTPS port         (default 16443)
#   BALLAST_CLUSTER_TOKEN  --initial-cluster-token                 (default ballast-local)
#   BALLAST_SHARDS         --shards of every member                (default 1; with more, the
#                          shards' leaders spread over the members, see engine/SHARDING.md)
#   BALLAST_START_TIMEOUT  seconds `start` waits for the cluster   (default 60)
#
# The defaults stay clear of 2379/2380/6443, the ports of `ballast serve` and of a stock etcd, so
# this cluster runs beside either. It needs etcdctl and kubectl (deploy/setup.sh checks both).
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

cmd=start
case "${1:-}" in
  start | stop | status) cmd=$1; shift ;;
  -h | --help | help) usage ;;
  # A bare DATA_DIR means start; a word without a slash is far likelier a mistyped command than
  # a directory, and starting (perhaps building first) on it would be a surprise.
  */*) ;;
  ?*) echo "local-cluster: unknown command '$1' (start, stop or status; a DATA_DIR needs a slash, e.g. ./$1)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || usage
dir=${1:-${BALLAST_DATA_DIR:-${TMPDIR:-/tmp}/ballast-local-cluster}}
members=(m1 m2 m3)

die() {
  echo "local-cluster: $*" >&2
  exit 1
}

# The ports are chosen once and kept in cluster.env: restarting a member on other peer ports than
# the ones its data directory was created with would make it a stranger to the others.
load_config() {
  if [ -f "$dir/cluster.env" ]; then
    # shellcheck source=/dev/null
    . "$dir/cluster.env"
  else
    CLIENT_PORTS=${BALLAST_CLIENT_PORTS:-22379,22479,22579}
    PEER_PORTS=${BALLAST_PEER_PORTS:-22380,22480,22580}
    SECURE_PORT=${BALLAST_SECURE_PORT:-16443}
    CLUSTER_TOKEN=${BALLAST_CLUSTER_TOKEN:-ballast-local}
    SHARDS=${BALLAST_SHARDS:-1}
  fi
  # A cluster.env written before the shard count was recorded: its members run one shard.
  SHARDS=${SHARDS:-1}
  IFS=, read -r -a client_ports <<<"$CLIENT_PORTS"
  IFS=, read -r -a peer_ports <<<"$PEER_PORTS"
  [ "${#client_ports[@]}" -eq 3 ] && [ "${#peer_ports[@]}" -eq 3 ] ||
    die "BALLAST_CLIENT_PORTS and BALLAST_PEER_PORTS need three ports each (got '$CLIENT_PORTS' and '$PEER_PORTS')"
  endpoints=()
  initial_cluster=()
  for i in 0 1 2; do
    endpoints+=("127.0.0.1:${client_ports[$i]}")
    initial_cluster+=("${members[$i]}=http://127.0.0.1:${peer_ports[$i]}")
  done
  endpoints_csv=$(IFS=,; echo "${endpoints[*]}")
  initial_cluster_csv=$(IFS=,; echo "${initial_cluster[*]}")
  kubeconfig=$dir/frontend/pki/admin.kubeconfig
}

save_config() {
  cat >"$dir/cluster.env" <<EOF
CLIENT_PORTS=$CLIENT_PORTS
PEER_PORTS=$PEER_PORTS
SECURE_PORT=$SECURE_PORT
CLUSTER_TOKEN=$CLUSTER_TOKEN
SHARDS=$SHARDS
EOF
}

# Prints the pid recorded for process $1 if that process still runs and is the ballast process
# this script started (its command line names this data directory), so a pid the system has
# since handed to another program is never signalled.
live_pid() {
  local pidfile=$dir/$1.pid pid
  [ -f "$pidfile" ] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir/$1" || return 1
  echo "$pid"
}

# etcdctl 3.4 refuses to run when a flag it is given is also set in the environment, and the
# hints below tell people to export ETCDCTL_ENDPOINTS, so the script's own calls drop those.
etcdctl_at() {
  local eps=$1
  shift
  env -u ETCDCTL_ENDPOINTS -u ETCDCTL_DIAL_TIMEOUT -u ETCDCTL_COMMAND_TIMEOUT ETCDCTL_API=3 \
    etcdctl --endpoints="$eps" --dial-timeout=2s --command-timeout=5s "$@"
}

etcdctl_all() {
  etcdctl_at "$endpoints_csv" "$@"
}

kubectl_admin() {
  kubectl --kubeconfig="$kubeconfig" --cache-dir="$dir/frontend/kube-cache" --request-timeout=5s "$@"
}

log_tail() {
  echo "--- $1.log (last 20 lines) ---" >&2
  tail -n 20 "$dir/$1.log" >&2 2>/dev/null || true
}

# True while process $1 exists and is not a zombie: a stopped member whose parent (this script
# exited long ago) is an init that does not reap still answers `kill -0`.
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# Stops the processes in the order given: SIGTERM (they shut down cleanly), then SIGKILL after
# 10 s for any that has not exited.
stop_procs() {
  local name pid pids=() names=()
  for name in "$@"; do
    if pid=$(live_pid "$name"); then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
      names+=("$name")
    fi
  done
  local deadline=$((SECONDS + 10)) i
  for i in "${!pids[@]}"; do
    while running "${pids[$i]}" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if running "${pids[$i]}"; then
      echo "local-cluster: ${names[$i]} (pid ${pids[$i]}) ignored SIGTERM; killing it" >&2
      kill -KILL "${pids[$i]}" 2>/dev/null || true
    fi
    echo "stopped ${names[$i]} (pid ${pids[$i]})"
  done
  for name in "$@"; do rm -f "$dir/$name.pid"; done
}

# Starts process $1 in the background with its output in $1.log and records its pid. The
# process is not a child the shell waits for: it outlives this script until `stop`.
spawn() {
  local name=$1
  shift
  # NO_COLOR: the logs are files, not terminals.
  NO_COLOR=1 nohup "$@" </dev/null >>"$dir/$name.log" 2>&1 &
  local pid=$!
  echo "$pid" >"$dir/$name.pid"
  # Until the forked shell has exec'd the binary, /proc shows this script's command line and
  # live_pid would take the process for a stranger.
  local tries=0
  until live_pid "$name" >/dev/null || ! kill -0 "$pid" 2>/dev/null || ((++tries > 50)); do sleep 0.1; done
}

# Polls "$@" every half second until it succeeds; fails once the start deadline passes or a
# process this start launched has died.
await() {
  local what=$1 name
  shift
  until "$@" >/dev/null 2>&1; do
    for name in "${started[@]}"; do
      if ! live_pid "$name" >/dev/null; then
        log_tail "$name"
        die "$name exited while waiting for $what"
      fi
    done
    [ "$SECONDS" -lt "$start_deadline" ] || die "timed out after ${BALLAST_START_TIMEOUT:-60} s waiting for $what"
    sleep 0.5
  done
}

all_healthy() {
  local ep
  for ep in "${endpoints[@]}"; do
    etcdctl_at "$ep" endpoint health || return 1
  done
  etcdctl_all endpoint status
}

kube_ready() {
  [ -f "$kubeconfig" ] && kubectl_admin get ns default
}

print_usage_hints() {
  cat <<EOF
Ballast local cluster: 3 members, 1 frontend (data in $dir)
  export ETCDCTL_API=3 ETCDCTL_ENDPOINTS=$endpoints_csv
  etcdctl member list -w table
  etcdctl endpoint status -w table
  export KUBECONFIG=$kubeconfig
  kubectl get ns
Logs: $dir/{m1,m2,m3,frontend}.log
Stop: $0 stop $dir
EOF
}

start() {
  command -v etcdctl >/dev/null || die "etcdctl not found on PATH (bash deploy/setup.sh installs it)"
  command -v kubectl >/dev/null || die "kubectl not found on PATH"
  local bin=${BALLAST_BIN:-}
  if [ -z "$bin" ]; then
    local root
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    bin=$root/target/release/ballast
    if [ ! -x "$bin" ]; then
      echo "local-cluster: building $bin (cargo build --release --bin ballast)"
      (cd "$root" && cargo build --release --bin ballast) || die "build failed"
    fi
  fi
  [ -x "$bin" ] || die "BALLAST_BIN=$bin is not an executable"

  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd) # absolute, so pid checks match the command lines recorded below
  load_config
  [ -f "$dir/cluster.env" ] || save_config

  local running=()
  for name in "${members[@]}" frontend; do
    if live_pid "$name" >/dev/null; then running+=("$name"); fi
  done
  if [ "${#running[@]}" -eq 4 ]; then
    echo "local-cluster: already running"
    print_usage_hints
    return 0
  fi
  # Some processes run (e.g. a member was killed): start only the others. A member whose data
  # directory exists ignores --initial-cluster and --initial-cluster-state, as etcd does, so the
  # same command line restarts it.
  is_running() {
    local r
    for r in "${running[@]}"; do [ "$r" = "$1" ] && return 0; done
    return 1
  }

  # A port someone else holds would let the readiness checks below talk to that other server.
  local port i
  for i in 0 1 2; do
    is_running "${members[$i]}" && continue
    for port in "${client_ports[$i]}" "${peer_ports[$i]}"; do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        die "127.0.0.1:$port is already in use (set BALLAST_CLIENT_PORTS, BALLAST_PEER_PORTS, BALLAST_SECURE_PORT)"
      fi
    done
  done
  if ! is_running frontend && (exec 3<>"/dev/tcp/127.0.0.1/$SECURE_PORT") 2>/dev/null; then
    die "127.0.0.1:$SECURE_PORT is already in use (set BALLAST_SECURE_PORT)"
  fi

  # Whatever fails from here on, no process of this start is left behind (those already
  # running stay).
  started=()
  trap '((${#started[@]} == 0)) || stop_procs "${started[@]}" >/dev/null' EXIT
  start_deadline=$((SECONDS + ${BALLAST_START_TIMEOUT:-60}))

  # All at once: a member of a new cluster serves only once a quorum of its peers is up.
  for i in 0 1 2; do
    local name=${members[$i]} client=http://127.0.0.1:${client_ports[$i]} peer=http://127.0.0.1:${peer_ports[$i]}
    is_running "$name" && continue
    spawn "$name" "$bin" engine --name "$name" --data-dir "$dir/$name" \
      --listen-client-urls "$client" --advertise-client-urls "$client" \
      --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
      --initial-cluster "$initial_cluster_csv" --initial-cluster-token "$CLUSTER_TOKEN" \
      --initial-cluster-state new --shards "$SHARDS"
    started+=("$name")
  done
  await "the members to answer endpoint health" all_healthy

  # The frontend writes the system namespaces at start, so it starts once the members serve.
  if ! is_running frontend; then
    local etcd_servers
    etcd_servers=$(printf 'http://%s,' "${endpoints[@]}")
    spawn frontend "$bin" frontend --etcd-servers "${etcd_servers%,}" \
      --bind-address 127.0.0.1 --secure-port "$SECURE_PORT" --cert-dir "$dir/frontend/pki"
    started+=(frontend)
  fi
  await "kubectl get ns" kube_ready

  trap - EXIT
  print_usage_hints
}

status() {
  [ -d "$dir" ] || die "no cluster in $dir"
  dir=$(cd "$dir" && pwd)
  load_config
  local name pid down=0 # 3 when something is down: LSB's "not running"
  for name in "${members[@]}" frontend; do
    if pid=$(live_pid "$name"); then
      echo "$name: running (pid $pid)"
    else
      echo "$name: not running"
      down=3
    fi
  done
  if ((down == 0)) && command -v etcdctl >/dev/null; then
    etcdctl_all endpoint status -w table || down=3
  fi
  return "$down"
}

stop() {
  [ -d "$dir" ] || die "no cluster in $dir"
  dir=$(cd "$dir" && pwd)
  # The frontend first, so it does not log the members going away as errors.
  stop_procs frontend "${members[@]}"
}

"$cmd"
