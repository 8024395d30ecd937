"""Summarises several benches/cluster-run.sh reports (benches/cluster-repeat.sh).

Usage: cluster_repeat_report.py <out.md> <commit> <command> <ballast bin or ""> <shards> <report.md>...

Reads each report's raw results (the JSON lines under "## Raw results") and its order line, and
writes, per scenario, every run's Ballast / etcd throughput ratio with their median, lowest and
highest, and the medians of throughput and server CPU per op.
"""

import json
import statistics
import sys


def raw_rows(text):
    """The JSON lines of a report's "## Raw results" block."""
    rows, inside = [], False
    after = text.split("## Raw results", 1)[1] if "## Raw results" in text else ""
    for line in after.splitlines():
        if line.startswith("```"):
            if inside:
                break
            inside = True
            continue
        if inside and line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def header_line(text, prefix):
    for line in text.splitlines():
        if line.startswith(prefix):
            return line
    return ""


def scenario_of(row):
    """The scenario's name as cluster-run.sh takes it: `@follower` when run through one."""
    return row["result"]["scenario"] + ("@follower" if row.get("via") == "follower" else "")


def ops(row):
    r = row.get("result", {})
    return None if r.get("failed") else r.get("ops_per_sec")


def main():
    out, commit, command, ballast_bin, shards, *reports = sys.argv[1:]
    runs = []
    for path in reports:
        text = open(path).read()
        order = header_line(text, "* Order within each scenario:").split(":", 1)[-1].strip().rstrip(".")
        runs.append({"text": text, "rows": raw_rows(text), "ballast_first": order.startswith("ballast")})
    first = runs[0]["text"]
    scenarios = []
    for run in runs:
        for row in run["rows"]:
            s = scenario_of(row)
            if s not in scenarios:
                scenarios.append(s)

    def pick(run, target, scenario):
        for row in run["rows"]:
            if row["target"] == target and scenario_of(row) == scenario:
                return row
        return None

    lines = [
        f"# Repeated load runs, 3-member clusters, commit {commit}",
        "",
        header_line(first, "* Machine:"),
        header_line(first, "* Reference:"),
        f"* Ballast: three `ballast engine` members with etcd's flags and `--shards {shards}`, "
        + (f"the binary {ballast_bin}." if ballast_bin else f"built from commit {commit}."),
        f"* Command: `{command}`; {len(runs)} runs of `benches/cluster-run.sh` one after the other, "
        "etcd's cluster first in odd runs and Ballast's first in even ones, fresh members and data "
        "directories per scenario.",
        "",
        "Ratio: Ballast ops/s over etcd's in the same run; `*` marks runs where Ballast's cluster ran",
        "first. Server CPU per op is the user + system time of the three members over the timed",
        "part, divided by ops.",
        "",
        "| scenario | runs | Ballast / etcd, run by run | median | lowest | highest "
        "| median ops/s etcd / Ballast | median server CPU µs/op etcd / Ballast |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for s in scenarios:
        ratios, shown, e_ops, b_ops, e_cpu, b_cpu = [], [], [], [], [], []
        for run in runs:
            e, b = pick(run, "etcd", s), pick(run, "ballast", s)
            if not e and not b:
                shown.append("not run")
                continue
            if not e or not b or ops(e) is None or ops(b) is None:
                shown.append("failed")
                continue
            ratio = ops(b) / ops(e)
            ratios.append(ratio)
            shown.append(f"{ratio:.2f}{'*' if run['ballast_first'] else ''}")
            e_ops.append(ops(e))
            b_ops.append(ops(b))
            e_cpu.append(e["result"].get("server_cpu_us_per_op", 0.0))
            b_cpu.append(b["result"].get("server_cpu_us_per_op", 0.0))
        if not ratios:
            lines.append(f"| {s} | 0 | {', '.join(shown)} | | | | | |")
            continue
        lines.append(
            f"| {s} | {len(ratios)} | {', '.join(shown)} | {statistics.median(ratios):.2f}x "
            f"| {min(ratios):.2f}x | {max(ratios):.2f}x "
            f"| {statistics.median(e_ops):,.0f} / {statistics.median(b_ops):,.0f} "
            f"| {statistics.median(e_cpu):.1f} / {statistics.median(b_cpu):.1f} |"
        )
    lines += [
        "",
        "## Runs",
        "",
        "| run | first | machine load (1 min) when each cluster's load ended |",
        "|---:|---|---|",
    ]
    for i, run in enumerate(runs, 1):
        loads = ", ".join(f"{r['target']} {scenario_of(r)} {r.get('load1', 0):.1f}" for r in run["rows"])
        lines.append(f"| {i} | {'Ballast' if run['ballast_first'] else 'etcd'} | {loads} |")
    lines += ["", "## Raw results", ""]
    for i, run in enumerate(runs, 1):
        lines += [f"Run {i}:", "", "```"] + [json.dumps(r) for r in run["rows"]] + ["```", ""]
    with open(out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
