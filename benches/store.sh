# Sourced by the benchmark scripts: starts the storage server a benchmark runs against, and names
# the results file.
#
#   start_store <etcd|ballast> <client-port> <data-dir> <ballast-binary>
#
# Starts stock etcd or `ballast engine` with the same etcd-style flags (peer port = client
# port + 1; an 8 GiB quota so preloading never trips etcd's default 2 GiB alarm), logging to
# <data-dir>.log, sets `store_pid`, and returns once etcdctl finds it healthy (at most 20 s).
# BALLAST_SHARDS (default 1) is Ballast's `--shards`; BALLAST_PLACEMENT (default unbound) its
# `--shard-placement`. With STORE_TLS_DIR (holding server.crt, server.key, ca.crt) the client
# URL is https:// with those files (`--cert-file`, `--key-file`), the same flags for both.
start_store() {
  local target=$1 port=$2 dir=$3 ballast=$4 peer=$(($2 + 1))
  local scheme=http tls=() ctl=()
  if [[ -n "${STORE_TLS_DIR:-}" ]]; then
    scheme=https
    tls=(--cert-file "$STORE_TLS_DIR/server.crt" --key-file "$STORE_TLS_DIR/server.key")
    ctl=(--cacert "$STORE_TLS_DIR/ca.crt")
  fi
  local common=(--name b --data-dir "$dir" --listen-client-urls "$scheme://127.0.0.1:$port"
    --advertise-client-urls "$scheme://127.0.0.1:$port" --listen-peer-urls "http://127.0.0.1:$peer"
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" --quota-backend-bytes 8589934592 "${tls[@]}")
  if [[ $target == etcd ]]; then
    etcd "${common[@]}" --initial-cluster "b=http://127.0.0.1:$peer" >"$dir.log" 2>&1 &
  else
    "$ballast" engine "${common[@]}" --shards "${BALLAST_SHARDS:-1}" \
      --shard-placement "${BALLAST_PLACEMENT:-unbound}" >"$dir.log" 2>&1 &
  fi
  store_pid=$!
  for _ in $(seq 200); do
    ETCDCTL_API=3 etcdctl --endpoints="$scheme://127.0.0.1:$port" "${ctl[@]}" endpoint health >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$target did not start" >&2
  cat "$dir.log" >&2
  return 1
}

# Prints the path of a new results file, benches/results/<date>-<commit>[-<kind>].md; a second run
# at the same commit gets its own file (-2, -3, ...) rather than replacing the first. The commit is
# HEAD's unless given (a script that noted its commit at start names its file after that one,
# even if someone commits in the checkout while it runs).
#
#   out=$(results_file tls)
#   out=$(results_file cluster "$commit")
results_file() {
  local base="benches/results/$(date -u +%Y-%m-%d)-${2:-$(git rev-parse --short HEAD)}${1:+-$1}" n=2
  local out="$base.md"
  while [[ -e "$out" ]]; do out="$base-$n.md"; n=$((n + 1)); done
  echo "$out"
}

# Sets `work` to a new temporary directory and `store_pid` to none; at exit the store started
# with start_store is killed and the directory removed. For scripts whose only process is the
# store.
bench_workdir() {
  work=$(mktemp -d)
  store_pid=
  trap 'if [[ -n "$store_pid" ]]; then kill -9 "$store_pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
}
