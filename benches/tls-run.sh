#!/usr/bin/env bash
# Client TLS against plaintext, on stock etcd and on Ballast in one run: each KV scenario runs
# on a fresh server of each kind, once with an http:// client URL and once with https:// (the
# same self-signed CA and server certificate for both), REPEATS times in alternation; then the
# `/metrics` scrape with 100,000 idle watchers registered. Writes
# benches/results/<date>-<commit>-tls.md with medians, the TLS/plaintext ratios and server CPU
# per op.
#
#   bash benches/tls-run.sh                  # 10 s per run, 3 repeats
#   DURATION=5 REPEATS=1 SCENARIOS="put_c16_v256" bash benches/tls-run.sh
#   REPORT_FROM=raw.jsonl ... bash benches/tls-run.sh   # only writes the report of earlier runs' lines
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-10}
repeats=${REPEATS:-3}
scenarios=${SCENARIOS:-put_c16_v256 put_c100_v256 get_linearizable_c100}
cargo build --release -p ballast -p ballast-load
load=target/release/ballast-load
[[ -n "${CARGO_TARGET_DIR:-}" ]] && load=$CARGO_TARGET_DIR/release/ballast-load
ballast=${load%/ballast-load}/ballast
source benches/store.sh
bench_workdir

# A CA and a server certificate for 127.0.0.1 (RSA 2048, as etcd's docs and most installs use).
certs="$work/certs"
mkdir -p "$certs"
(
  cd "$certs"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=bench-ca 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >ext.cnf
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile ext.cnf 2>/dev/null
)

raw="$work/raw.jsonl"
[[ -n "${REPORT_FROM:-}" ]] && grep '^{"target"' "$REPORT_FROM" >"$raw"
port=24800
run_one() { # target transport scenario repeat
  local target=$1 transport=$2 s=$3 r=$4 scheme=http
  port=$((port + 2))
  if [[ $transport == tls ]]; then scheme=https; export STORE_TLS_DIR=$certs; else unset STORE_TLS_DIR; fi
  start_store "$target" "$port" "$work/$target-$port" "$ballast"
  if line=$(timeout $((duration + 300)) "$load" run --endpoint "$scheme://127.0.0.1:$port" --cacert "$certs/ca.crt" --scenario "$s" --duration "$duration" --server-pid "$store_pid"); then
    echo "{\"target\":\"$target\",\"transport\":\"$transport\",\"repeat\":$r,\"result\":$line}" | tee -a "$raw"
  else
    echo "{\"target\":\"$target\",\"transport\":\"$transport\",\"repeat\":$r,\"result\":{\"scenario\":\"$s\",\"failed\":true}}" | tee -a "$raw"
  fi
  kill -9 "$store_pid" 2>/dev/null || true
  wait "$store_pid" 2>/dev/null || true
  store_pid=
  unset STORE_TLS_DIR
  rm -rf "$work/$target-$port"
  sync
  sleep 2
}
[[ -n "${REPORT_FROM:-}" ]] && scenarios_to_run= || scenarios_to_run=$scenarios
for s in $scenarios_to_run; do
  for r in $(seq "$repeats"); do
    for target in etcd ballast; do
      for transport in plain tls; do
        run_one "$target" "$transport" "$s" "$r"
      done
    done
  done
done
for r in $(seq "$([[ -n "${REPORT_FROM:-}" ]] && echo 0 || echo "$repeats")"); do
  for target in etcd ballast; do
    run_one "$target" plain metrics_scrape_s100_w100000 "$r"
  done
done

commit=$(git rev-parse --short HEAD)
out=$(results_file tls)
command="DURATION=$duration REPEATS=$repeats SCENARIOS=\"$scenarios\" bash benches/tls-run.sh"
python3 - "$raw" "$out" "$commit" "$command" <<'PY'
import json, statistics, subprocess, sys
raw, out, commit, command = sys.argv[1:5]
rows = [json.loads(l) for l in open(raw)]
def sh(c):
    return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
def med(scenario, target, transport, key):
    vals = [r["result"].get(key) for r in rows if r["result"].get("scenario") == scenario
            and r["target"] == target and r["transport"] == transport and not r["result"].get("failed")]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None
mem = sh("free -g | awk '/Mem:/ {print $2}'")
cpu = sh("lscpu | sed -n 's/^Model name: *//p'")
lines = [
    f"# Client TLS vs plaintext, and /metrics with 100k watchers, commit {commit}",
    "",
    f"* Machine: {sh('nproc')} cores, {mem} GiB, kernel {sh('uname -r')}, {cpu}; shared and noisy, so read medians and ratios.",
    f"* Reference: {sh('etcd --version | head -1')} (Debian etcd-server), same machine, same run.",
    f"* Command: `{command}`; fresh server and data directory per run; plaintext and TLS runs alternate.",
    "* TLS: `--cert-file`/`--key-file` with an RSA 2048 server certificate from a self-signed CA; the",
    "  load tool (ballast-load, h2 over rustls with ALPN h2, 16 connections at most) verifies it.",
    "",
    "Medians over the repeats. TLS cost is plaintext throughput / TLS throughput (1.00 = free) and",
    "TLS server CPU per op / plaintext server CPU per op; the goal is Ballast's TLS cost at most etcd's.",
    "",
    "| scenario | server | plain ops/s | TLS ops/s | TLS cost (throughput) | server CPU µs/op plain / TLS | TLS cost (CPU) |",
    "|---|---|---:|---:|---:|---:|---:|",
]
scen = []
for r in rows:
    s = r["result"].get("scenario")
    if s and s not in scen and not s.startswith("metrics"):
        scen.append(s)
for s in scen:
    for t, name in [("etcd", "etcd"), ("ballast", "Ballast")]:
        p, q = med(s, t, "plain", "ops_per_sec"), med(s, t, "tls", "ops_per_sec")
        pc, qc = med(s, t, "plain", "server_cpu_us_per_op"), med(s, t, "tls", "server_cpu_us_per_op")
        cost = f"{p / q:.2f}" if p and q else "n/a"
        ccost = f"{qc / pc:.2f}" if pc and qc else "n/a"
        lines.append(f"| {s} | {name} | {p or 0:,.0f} | {q or 0:,.0f} | {cost} | {pc or 0:,.1f} / {qc or 0:,.1f} | {ccost} |")
lines += ["", "## /metrics scrape with 100,000 idle watchers (100 streams × 1,000, prev_kv)", "",
          "100 scrapes one after the other, each a fresh HTTP/1.1 connection (as Prometheus scrapes); medians over the repeats.", "",
          "| figure | etcd | Ballast |", "|---|---:|---:|"]
for key, label in [("p50_ms", "scrape p50 ms"), ("p99_ms", "scrape p99 ms"), ("max_ms", "scrape max ms"),
                   ("scrape_bytes", "scrape size, bytes"), ("watchers_registered", "watchers registered"),
                   ("register_secs", "registration, s"), ("server_cpu_us_per_op", "server CPU µs per scrape")]:
    e, b = med("metrics_scrape_s100_w100000", "etcd", "plain", key), med("metrics_scrape_s100_w100000", "ballast", "plain", key)
    lines.append(f"| {label} | {e or 0:,.2f} | {b or 0:,.2f} |")
lines += ["", "## Raw results", "", "```"] + [json.dumps(r) for r in rows] + ["```", ""]
open(out, "w").write("\n".join(lines))
print(out)
PY
