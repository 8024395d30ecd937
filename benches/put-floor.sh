#!/usr/bin/env bash
# Measures what a durable put at one in flight cannot go below on this machine: the latency of
# fdatasync on the filesystem the benchmark members keep their data on, and the loopback round
# trip between two processes. Writes benches/results/<date>-<commit>-put-floor.md.
#
#   bash benches/put-floor.sh                  # data directory in $TMPDIR (/tmp), as cluster-run.sh
#   DATA_DIR=/some/dir bash benches/put-floor.sh
#   SYNCS=2000 ROUND_TRIPS=20000 bash benches/put-floor.sh
#
# fdatasync is timed four ways, each on a file of its own, one 512-byte record per sync (about
# what one put adds to a write-ahead log):
#   * appending to a growing file: each sync also commits the new file size (an ext4 journal
#     commit, which waits for every other process's metadata changes in the same transaction);
#   * appending to a file with space allocated ahead but its size growing with each write
#     (fallocate with FALLOC_FL_KEEP_SIZE), as a RocksDB WAL does: still a size to commit;
#   * overwriting a preallocated file in order: the size does not change, so only the data
#     block goes out, as etcd's WAL does (its segments are 64 MiB files, sized up front);
#   * overwriting a file whose blocks were written and synced before: neither the size nor the
#     extents change (fallocate leaves extents "unwritten", and the first write to each converts
#     it), as a recycled RocksDB WAL (`recycle_log_file_num`) is written.
# The four files are synced in turn, one record each, so a burst of other load falls on all alike.
# One process syncs at a time here; in a cluster the three members share the one virtual disk.
# The round trip: two processes on loopback TCP (TCP_NODELAY), one byte each way, each blocked
# in recv until the other's send wakes it, as a member's thread is woken by a peer's message.
# Python adds a few µs per send and recv; the figure is an upper bound of the kernel's own.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/store.sh
syncs=${SYNCS:-2000}
trips=${ROUND_TRIPS:-20000}
dir=${DATA_DIR:-${TMPDIR:-/tmp}}
commit=$(git rev-parse --short HEAD)
work=$(mktemp -d "$dir/put-floor.XXXXXX")
trap 'rm -rf "$work"' EXIT
out=$(results_file put-floor "$commit")
load_before=$(uptime)
python3 - "$work" "$syncs" "$trips" "$out" "$commit" "$load_before" <<'PY'
import ctypes, os, socket, statistics, subprocess, sys, time
work, syncs, trips, out, commit, load_before = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
record = b"x" * 512

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]

def summary(xs):
    return {"p50": pct(xs, 0.5), "p90": pct(xs, 0.9), "p99": pct(xs, 0.99), "mean": statistics.fmean(xs)}

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
FALLOC_FL_KEEP_SIZE = 1

def open_for_syncs(path, preallocate):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    size = len(record) * (syncs + 1)
    if preallocate == "size":
        os.posix_fallocate(fd, 0, size)
    elif preallocate == "keep-size":
        if libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, size) != 0:
            raise OSError(ctypes.get_errno(), "fallocate")
    elif preallocate == "written":
        os.write(fd, b"\0" * size)
        os.lseek(fd, 0, os.SEEK_SET)
    os.fsync(fd)
    return fd

def time_syncs(kinds):
    fds = {name: open_for_syncs(os.path.join(work, name), pre) for name, pre in kinds}
    took = {name: [] for name in fds}
    try:
        for _ in range(syncs):
            for name, fd in fds.items():
                os.write(fd, record)
                t = time.perf_counter()
                os.fdatasync(fd)
                took[name].append((time.perf_counter() - t) * 1e6)
        return {name: summary(xs) for name, xs in took.items()}
    finally:
        for fd in fds.values():
            os.close(fd)

def round_trips():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        c, _ = srv.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            b = c.recv(1)
            if not b:
                os._exit(0)
            c.sendall(b)
    srv.close()
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    took = []
    for i in range(trips + 1000):
        t = time.perf_counter()
        s.sendall(b"p")
        s.recv(1)
        if i >= 1000:  # the first thousand warm up
            took.append((time.perf_counter() - t) * 1e6)
    s.close()
    os.waitpid(pid, 0)
    return summary(took)

synced = time_syncs((("grow", None), ("keep", "keep-size"), ("pre", "size"), ("written", "written")))
grow, keep, pre, written = synced["grow"], synced["keep"], synced["pre"], synced["written"]
rtt = round_trips()

def sh(c):
    return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
fs = sh(f"df -T {work} | tail -1 | awk '{{print $1, $2}}'")
row = lambda name, s: f"| {name} | {s['p50']:,.0f} | {s['p90']:,.0f} | {s['p99']:,.0f} | {s['mean']:,.0f} |"
floor = keep["p50"] + 2 * rtt["p50"]
lines = [
    f"# What a durable put at one in flight cannot go below, commit {commit}",
    "",
    f"* Machine: {sh('nproc')} cores, kernel {sh('uname -r')}, data directory {os.path.dirname(work)} on {fs}; "
    "shared and noisy (load below).",
    f"* Command: `bash benches/put-floor.sh` ({syncs} syncs per file, {trips} round trips).",
    f"* Load average when it started: {load_before.split('load average:')[-1].strip()}; "
    f"when it ended: {os.getloadavg()[0]:.2f}, {os.getloadavg()[1]:.2f}, {os.getloadavg()[2]:.2f}.",
    "",
    "| what, µs | p50 | p90 | p99 | mean |",
    "|---|---:|---:|---:|---:|",
    row("fdatasync after a 512-byte append to a growing file", grow),
    row("fdatasync after a 512-byte append, space allocated ahead, size growing (a RocksDB WAL)", keep),
    row("fdatasync after a 512-byte write into a preallocated file (etcd's WAL)", pre),
    row("fdatasync after a 512-byte overwrite of blocks written before (a recycled RocksDB WAL)", written),
    row("loopback TCP round trip between two processes, 1 byte each way", rtt),
    "",
    "A put at one in flight on a 3-member cluster is the chain client → leader → follower →",
    "leader → client: two round trips (client and leader, leader and follower) and the",
    "follower's sync, with the leader's own sync overlapping the follower's part. Its floor by",
    f"the medians above, before any CPU of either server: {keep['p50']:,.0f} + 2 × {rtt['p50']:,.0f} = "
    f"**{floor:,.0f} µs** with a WAL whose size grows "
    f"({pre['p50'] + 2 * rtt['p50']:,.0f} µs with a preallocated one, "
    f"{written['p50'] + 2 * rtt['p50']:,.0f} µs with a recycled one).",
    "",
    "Raw (µs): " + ", ".join(f"{n} {s}" for n, s in (("grow", grow), ("keep_size", keep), ("prealloc", pre), ("written", written), ("rtt", rtt))),
    "",
]
open(out, "w").write("\n".join(lines))
print(out)
print("\n".join(lines[6:14]))
PY
