"""Reads three members' round traces (benches/round-trace.sh) and writes where a round's time goes.

Usage: round_trace_report.py <dir with m1.trace..m3.trace> <out.md> <leader member number>
       <commit> <command> <load result JSON> <uptime>

A trace line is `<µs since the epoch> <shard> <mark> <count>` (engine/src/round_trace.rs). Only
shard 0's lines are read, from the first tenth of the leader's run on (warm-up). A round is what
lies between two `B` marks of the leader; it is counted only when every mark the tables need was
found in it, and the follower part is taken from the follower whose acknowledgement came first.
"""

import bisect
import json
import statistics
import subprocess
import sys

work, out, leader_no, commit, command, load_txt, uptime = sys.argv[1:8]
leader_no = int(leader_no)


def read(path):
    rows = []
    for line in open(path):
        f = line.split()
        if len(f) == 4 and f[1] == "0":
            rows.append((int(f[0]), f[2], int(f[3])))
    return rows


traces = {i: read(f"{work}/m{i}.trace") for i in (1, 2, 3)}
lead = traces[leader_no]
start = lead[len(lead) // 10][0] if lead else 0
lead = [r for r in lead if r[0] >= start]
followers = {i: [r for r in traces[i] if r[0] >= start - 10_000] for i in traces if i != leader_no}
times = {i: [r[0] for r in rows] for i, rows in followers.items()}

spans = {}


def add(name, value):
    spans.setdefault(name, []).append(value)


def first(rows, mark, after, pred=lambda n: True):
    for t, m, n in rows:
        if m == mark and t >= after and pred(n):
            return t
    return None


starts = [k for k, r in enumerate(lead) if r[1] == "B"]
for a, b in zip(starts, starts[1:]):
    t0 = lead[a][0]
    seg = lead[a + 1:b]
    sent = first(seg, "T", t0)
    written = first(seg, "S1", t0, lambda n: n == 1)
    appended = first(seg, "R1", t0, lambda n: n == 0)
    if None in (sent, written, appended):
        continue
    acked = first(seg, "M", appended)
    applied = first(seg, "R1", t0, lambda n: n == 1)
    answered = first(seg, "A", t0)
    if None in (acked, applied, answered):
        continue
    add("writes in the round", lead[a][2])
    add("leader: round start → its append handed to the transport", sent - t0)
    add("leader: round start → its own log write synced", written - t0)
    add("leader: round start → first acknowledgement handled", acked - t0)
    add("leader: round start → round applied", applied - t0)
    add("leader: round start → answers sent", answered - t0)
    add("leader: answers sent → next round start", lead[b][0] - answered)
    best = None
    for i, rows in followers.items():
        k = bisect.bisect_left(times[i], sent)
        near = rows[k:k + 16]
        got = first(near, "M", sent)
        if got is None:
            continue
        w0 = first(near, "S0", got)
        w1 = first(near, "S1", got, lambda n: n == 1)
        acked_at = first(near, "T", w1) if w1 else None
        if None in (w0, w1, acked_at):
            continue
        p0, p1 = first(near, "P0", got), first(near, "P1", got)
        apply_us = p1 - p0 if p0 is not None and p1 is not None and p1 <= w0 else None
        cand = (acked_at, got, w0, w1, apply_us)
        if best is None or cand < best:
            best = cand
    if best is None:
        continue
    acked_at, got, w0, w1, apply_us = best
    add("follower: append handed over → received by its shard thread", got - sent)
    add("follower: received → its log write begins (applying the last round first)", w0 - got)
    if apply_us is not None:
        add("follower: applying the last round", apply_us)
    add("follower: its log write, synced", w1 - w0)
    add("follower: synced → acknowledgement handed to the transport", acked_at - w1)
    add("follower: acknowledgement handed over → handled by the leader", acked - acked_at)


def pct(xs, p):
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def sh(c):
    return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()


load = json.loads(load_txt)
rounds = len(spans.get("writes in the round", []))
lines = [
    f"# Round trace, 3-member Ballast cluster, commit {commit}",
    "",
    f"* Machine: {sh('nproc')} cores, kernel {sh('uname -r')}; load average after the run: {uptime.split('load average:')[-1].strip()}.",
    f"* Command: `{command}`.",
    f"* Load: {load.get('scenario')} through the leader (m{leader_no}): {load.get('ops_per_sec', 0):,.0f} ops/s, "
    f"p50 {load.get('p50_ms', 0):.2f} ms, p99 {load.get('p99_ms', 0):.2f} ms, server CPU "
    f"{load.get('server_cpu_us_per_op', 0):,.1f} µs/op (traced: the marks cost a buffered line each).",
    f"* Rounds read: {rounds} of shard 0, after the first tenth of the run, each with every mark below.",
    "",
    "Times in µs. The leader's rows count from the moment it began the round (its writes",
    "evaluated next); the follower's are the follower whose acknowledgement came first, as the",
    "leader's commit waits for it. The members' clocks are the machine's one wall clock.",
    "",
    "| span | p10 | p50 | p90 | mean |",
    "|---|---:|---:|---:|---:|",
]
for name, xs in spans.items():
    xs = sorted(xs)
    lines.append(f"| {name} | {pct(xs, 0.1):,} | {pct(xs, 0.5):,} | {pct(xs, 0.9):,} | {statistics.fmean(xs):,.1f} |")
lines += ["", "## Load result", "", "```", load_txt, "```", ""]
open(out, "w").write("\n".join(lines))
