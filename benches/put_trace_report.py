"""The report of benches/put-trace.sh: puts at one in flight cut into their members' stages.

Reads the trace's `perf script` text (syscall enter/exit pairs, scheduler wake-ups and switches),
the members' descriptors and sockets, and writes a Markdown report: every member's syncs by file,
the puts' latency as the client saw it, and for every slow put how long it overlapped each
member's syncs and how long the members' threads were runnable without running.
"""

import re
import statistics
import subprocess
import sys
from collections import Counter, defaultdict

work, out, target, leader, pids, load_pid, slow_ms, commit, command, load_txt, uptime = sys.argv[1:12]
leader = int(leader)
members = [int(p) for p in pids.split()]
load_pid = int(load_pid)
slow_ns = float(slow_ms) * 1e6
watched = set(members) | {load_pid}
role = {p: ("leader" if i == leader else f"follower m{i + 1}") for i, p in enumerate(members)}

# Descriptors: (pid, fd) -> what it is.
fds = {}
inode_of = {}
for line in open(f"{work}/fds.txt"):
    parts = line.split(maxsplit=2)
    if len(parts) < 3:
        continue
    pid, fd, what = int(parts[0]), int(parts[1]), parts[2].strip()
    fds[(pid, fd)] = what
# Sockets by ports: `ss -tnpH` names the process and descriptor of each end.
for line in open(f"{work}/ss.txt"):
    f = line.split()
    if len(f) < 6:
        continue
    local, peer = f[3], f[4]
    for pid, fd in re.findall(r"pid=(\d+),fd=(\d+)", line):
        fds[(int(pid), int(fd))] = f"tcp {local} -> {peer}"


def kind(pid, fd):
    what = fds.get((pid, fd), "?")
    if what.startswith("tcp"):
        return what
    if what.endswith(".log"):
        return "RocksDB WAL"
    if ".wal" in what or "/wal/" in what:
        return "etcd WAL"
    for tag in ("MANIFEST", ".sst", "CURRENT", "OPTIONS", "db"):
        if tag in what:
            return what.rsplit("/", 1)[-1]
    return what


ev = re.compile(r"^\s*(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s?(.*)$")
open_call = {}
calls = []  # (pid, tid, name, fd, start_ns, end_ns, ret)
wake = {}
runnable = defaultdict(list)  # tid -> [(woken, ran)]
tid_pid = {}
for line in open(f"{work}/events.txt"):
    m = ev.match(line)
    if not m:
        continue
    pid, tid, t, name, rest = int(m[1]), int(m[2]), int(float(m[3]) * 1e9), m[4], m[5]
    if name == "sched:sched_wakeup":
        w = re.search(r" pid=(\d+)", rest)
        if w:
            wake[int(w[1])] = t
        continue
    if name == "sched:sched_switch":
        n = re.search(r"next_pid=(\d+)", rest)
        if n and int(n[1]) in wake:
            nt = int(n[1])
            runnable[nt].append((wake.pop(nt), t))
        continue
    if pid not in watched:
        continue
    tid_pid[tid] = pid
    if name.startswith("syscalls:sys_enter_"):
        fd = re.search(r"fd: (0x[0-9a-f]+)", rest)
        open_call[tid] = (name[len("syscalls:sys_enter_"):], int(fd[1], 16) if fd else -1, t)
    elif name.startswith("syscalls:sys_exit_") and tid in open_call:
        sc, fd, t0 = open_call.pop(tid)
        ret = int(rest.strip(), 16) if rest.strip().startswith("0x") else int(rest.strip() or 0)
        if ret >= 1 << 63:
            ret -= 1 << 64
        calls.append((pid, tid, sc, fd, t0, t, ret))
calls.sort(key=lambda c: c[4])

REQUEST_BYTES = 200
# Slow puts listed one by one (the slowest); the classes count them all.
SLOWEST_ROWS = 30
# A put's response (headers, the message, trailers) is longer than the server's own control
# frames (etcd answers a request's data at once with a window update and a ping, 30 bytes).
RESPONSE_BYTES = 40
SYNCS = ("fdatasync", "fsync", "sync_file_range")
SENDS = ("write", "writev", "sendto", "sendmsg")
RECVS = ("read", "recvfrom", "recvmsg")

# The client's connection: the socket it sends on most.
sends = Counter(c[3] for c in calls if c[0] == load_pid and c[2] in SENDS and c[6] > 0)
client_fd = sends.most_common(1)[0][0] if sends else -1
puts = []
start = None
for c in calls:
    if c[0] != load_pid or c[3] != client_fd or c[6] <= 0:
        continue
    # A request carries the put's value (256 bytes and more); the client's own HTTP/2 frames
    # (window updates, pings' acknowledgements) are a few bytes and start no put.
    if c[2] in SENDS and start is None and c[6] >= REQUEST_BYTES:
        start = c[4]
    elif c[2] in RECVS and start is not None and c[6] >= RESPONSE_BYTES:
        puts.append((start, c[5]))
        start = None
# The first and last second are the load's ramp and the trace's edges.
if len(puts) > 20:
    puts = puts[5:-5]
lat = sorted((e - s) / 1e6 for s, e in puts)


def pct(xs, q):
    if not xs:
        return 0.0
    return xs[min(len(xs) - 1, int(q * len(xs)))]


syncs = [c for c in calls if c[0] in members and c[2] in SYNCS]
t_lo, t_hi = (puts[0][0], puts[-1][1]) if puts else (0, 0)
lines = [
    f"# Puts at one in flight, traced: {target}, commit {commit}",
    "",
    f"* Command: `{command}`; leader m{leader + 1}; load before the report: {uptime.strip()}",
    f"* `ballast-load` reported: `{load_txt.strip()}`",
    f"* Puts seen at the client's socket: {len(puts)}; ms p50 {pct(lat, 0.5):.2f}, p90 {pct(lat, 0.9):.2f}, "
    f"p99 {pct(lat, 0.99):.2f}, max {pct(lat, 1.0):.2f}; mean {statistics.mean(lat) if lat else 0:.2f}",
    "",
    "## Syncs by member and file (over the traced puts)",
    "",
    "| member | call | file | count | per put | p50 µs | p90 µs | p99 µs | max µs | ≥ slow |",
    "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
]
groups = defaultdict(list)
for c in syncs:
    if t_lo <= c[4] <= t_hi:
        groups[(role[c[0]], c[2], kind(c[0], c[3]))].append((c[5] - c[4]) / 1e3)
for (r, sc, f), ds in sorted(groups.items()):
    ds.sort()
    lines.append(f"| {r} | {sc} | {f} | {len(ds)} | {len(ds) / max(1, len(puts)):.2f} | {pct(ds, .5):,.0f} | "
                 f"{pct(ds, .9):,.0f} | {pct(ds, .99):,.0f} | {ds[-1]:,.0f} | {sum(d * 1e3 >= slow_ns for d in ds)} |")

client_tids = {t for t, p in tid_pid.items() if p == load_pid}
lead_tids = {t for t, p in tid_pid.items() if p == members[leader]}


def overlap(a0, a1, b0, b1):
    return max(0, min(a1, b1) - max(a0, b0))


slow = [(s, e) for s, e in puts if e - s >= slow_ns]
classes = Counter()
totals = [0, 0, 0]  # ns of slow puts: covered by the syncs each needed, by waits for a core, all
rows = []
for s, e in slow:
    d = e - s
    per = {}
    files = {}
    for p in members:
        ov = [(overlap(s, e, c[4], c[5]), c) for c in syncs if c[0] == p and overlap(s, e, c[4], c[5]) > 0]
        per[p] = sum(o for o, _ in ov)
        if ov:
            o, c = max(ov, key=lambda x: x[0])
            files[p] = f"{kind(p, c[3])} {(c[5] - c[4]) / 1e6:.1f}"
    lead = per[members[leader]]
    fol = [per[p] for i, p in enumerate(members) if i != leader]
    # Time the leader's threads or the client's were runnable without running: the put's
    # chain (client, the leader's network and shard threads) stood still then.
    spans = sorted((max(s, w0), min(e, w1)) for tid in lead_tids | client_tids
                   for w0, w1 in runnable.get(tid, []) if overlap(s, e, w0, w1) > 0)
    wait, cur0, cur1 = 0, None, None
    for a, b in spans:
        if cur1 is None or a > cur1:
            wait += (cur1 - cur0) if cur1 is not None else 0
            cur0, cur1 = a, b
        else:
            cur1 = max(cur1, b)
    wait += (cur1 - cur0) if cur1 is not None else 0
    # The syncs this put could not do without: the leader's and the quicker follower's.
    needed = max(lead, min(fol))
    whose = "the leader's" if lead >= min(fol) else "the quicker follower's"
    if needed >= d / 2:
        k = f"the syncs it needed, {whose} the longer" + (", all three members' slow" if min(lead, *fol) >= d / 2 else "")
    elif wait >= d / 2:
        k = "the leader's or the client's threads waiting for a core"
    elif needed + wait >= d / 2:
        k = "the syncs it needed and waits for a core together"
    else:
        k = "neither (the followers' waits, the network, the chain's CPU)"
    classes[k] += 1
    totals[0] += needed
    totals[1] += wait
    totals[2] += d
    rows.append((d, f"| {d / 1e6:.1f} | {lead / 1e6:.1f} | " + " / ".join(f"{f / 1e6:.1f}" for f in fol)
                + f" | {wait / 1e6:.1f} | "
                + "; ".join(f"{role[p]}: {files[p]}" for p in members if p in files) + f" | {k} |"))


lines += [
    "",
    f"## Puts of {slow_ms} ms or more: {len(slow)} of {len(puts)}",
    "",
    "For each slow put: how long it overlapped each member's syncs (it cannot end before the",
    "leader's and the quicker follower's, the syncs it needed), and how long the leader's or the",
    "client's threads were runnable without running inside it (a core's wait on the put's chain).",
    "Class: what covered at least half the put.",
    "",
    f"Of the slow puts' time, {totals[0] / max(1, totals[2]):.0%} was covered by the syncs each needed and "
    f"{totals[1] / max(1, totals[2]):.0%} by the leader's or the client's threads waiting for a core.",
    "",
    "| class | puts |",
    "|---|---:|",
] + [f"| {k} | {v} |" for k, v in classes.most_common()] + [
    "",
    f"The {SLOWEST_ROWS} slowest:",
    "",
    "| put ms | leader sync ms | followers' sync ms | leader's or client's threads waiting for a core, ms | longest sync each (file, ms) | class |",
    "|---:|---:|---:|---:|---|---|",
] + [r for _, r in sorted(rows, reverse=True)[:SLOWEST_ROWS]]

# Which sync each put waited for: the last sync each member ended inside the put. A put commits
# once the leader's log and one follower's are durable (max of the leader's and the quicker
# follower's end); were any two durable copies enough, as the Raft thesis allows a leader
# (10.2.1: it may count a majority of followers without its own), the second end of the three.
last_end = []
for s, e in puts:
    ends = []
    for p in members:
        es = [c[5] for c in syncs if c[0] == p and s <= c[5] <= e]
        ends.append(max(es) if es else s)
    last_end.append((s, e, ends))
lead_last = sum(1 for s, e, ends in last_end
                if ends[leader] > min(x for i, x in enumerate(ends) if i != leader))
saved = sorted(max(ends[leader], min(x for i, x in enumerate(ends) if i != leader)) - sorted(ends)[1]
               for s, e, ends in last_end)
lead_syncs = [(c[4], c[5]) for c in syncs if c[0] == members[leader]]
before_own = sum(1 for s, e in puts if any(a < e < b for a, b in lead_syncs))
lines += ["", "## Whose sync a put waited for", "",
          f"Puts answered while the leader was still inside an fdatasync: {before_own} of {len(puts)} (a",
          "leader that counts its own log before its sync, as etcd's does, can answer then; one that",
          "waits for its own sync cannot, unless that sync is for a later round).", "",
          f"Of {len(puts)} puts, {lead_last} had the leader's sync end after the quicker follower's: the put",
          "waited for the leader's own disk. Had any two durable copies been enough (the two followers'",
          f"without the leader's), those puts would have ended earlier by ms p50 {pct(saved, .5) / 1e6:.2f}, "
          f"p90 {pct(saved, .9) / 1e6:.2f}, p99 {pct(saved, .99) / 1e6:.2f}, max {pct(saved, 1.0) / 1e6:.2f} "
          f"(over all puts, mean {statistics.mean(saved) / 1e6 if saved else 0:.3f} ms)."]
lines += ["", "## Machine", "", "```", subprocess.run("nproc; uname -r; df -h /tmp | tail -1", shell=True,
          capture_output=True, text=True).stdout.strip(), "```", ""]
open(out, "w").write("\n".join(lines))
