#!/usr/bin/env python3
"""The tables of the benchmarks (scripts/bench-*.sh), from what they measured.

  bench_report.py ours --sample-times FILE --n N ...    bench-cluster.sh, our run: one Markdown
                                                        table, and --json-out for the comparison
  bench_report.py contended --n N --targets T ...       bench-cluster.sh, the contended run
  bench_report.py fleet --part P --groups G ...          bench-fleet.sh: one part's table
  bench_report.py peer --harness argo|tekton --output FILE ...
                                                        a peer harness's run.sh output, as JSON
  bench_report.py side-by-side --ours JSON --peer JSON [--peer JSON ...]
                                                        ours beside each peer run, with ratios
  bench_report.py real-node --group FILE --hand FILE    bench-real-node.sh: the operator against
                                                        the same pods run by hand
  bench_report.py join --results FILE --hosts N         bench-join.sh: time to Ready by step
  bench_report.py runner --times FILE --parallel P      bench-runner.sh: one row of the fan-out
  bench_report.py copy --times FILE --targets N --mib M bench-runner.sh: one row of --copy

`bench_report.py <command> --help` lists the arguments.
"""
import argparse
import json
import re
import statistics
from datetime import datetime
from collections import Counter


WRITES = ("create", "update", "patch", "delete")


def api_requests(metrics):
    """The operator's API requests from its /metrics: by verb, and by verb and resource."""
    verbs, by_resource = Counter(), Counter()
    for line in open(metrics):
        m = re.match(r'workflow_operator_api_requests_total\{(.*)\} (\d+)', line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            verbs[labels.get("verb", "?")] += int(m.group(2))
            by_resource[f'{labels.get("verb")} {labels.get("resource")}'] += int(m.group(2))
    return verbs, by_resource


def ours(a):
    times = sorted(float(l) for l in open(a.sample_times) if l.strip())
    n, t0, t1 = a.n, a.t0, a.t1
    hz = a.clk_tck
    wall = t1 - t0; cpu = a.cpu_ticks / hz; steps = 5 * n
    print(f"| figure | value |")
    print(f"|---|---|")
    print(f"| seed sample, apply to Completed ({len(times)} runs) | min {times[0]:.2f} s, median {statistics.median(times):.2f} s, max {times[-1]:.2f} s |")
    print(f"| {n} groups at once: wall time | {wall:.1f} s ({n / wall:.2f} groups/s); {a.completed} Completed, {a.failed} Failed |")
    print(f"| operator peak RSS (VmHWM) | {a.rss_kib / 1024:.1f} MiB |")
    started = a.cpu_ticks_started / hz
    print(f"| operator CPU | {cpu:.1f} s ({1000 * cpu / steps:.1f} ms per step); {started:.1f} s of it starting, "
          f"then {cpu - started:.1f} s for the N groups ({1000 * (cpu - started) / steps:.1f} ms per step) |")
    print(f"| Workflows / step pods | {a.workflows} / {a.pods} (expected {3 * n} / {steps}) |")
    with open(a.json_out, "w") as out:
        json.dump({"runs": len(times), "min": times[0], "median": statistics.median(times), "max": times[-1],
                   "n": n, "wall": wall, "rss": a.rss_kib / 1024, "cpu": cpu, "done": a.completed,
                   "failed": a.failed, "workflows": a.workflows, "pods": a.pods}, out)
    verbs, by_resource = api_requests(a.metrics)
    # Step start latency: quantiles from the histogram's cumulative buckets (each an upper bound).
    buckets = []
    for line in open(a.metrics):
        m = re.match(r'workflow_operator_step_start_latency_seconds_bucket\{le="([^"]+)"\} (\d+)', line)
        if m:
            buckets.append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), int(m.group(2))))
    if buckets and buckets[-1][1] > 0:
        total = buckets[-1][1]

        def quantile(q):
            # The bucket that holds the q-quantile, and a linear estimate inside it (as
            # Prometheus' histogram_quantile does).
            lower, below = 0.0, 0
            for le, count in buckets:
                if count >= q * total:
                    if le == float("inf"):
                        return f"over {lower:g} s"
                    estimate = lower + (le - lower) * (q * total - below) / max(count - below, 1)
                    return f"<= {le * 1000:g} ms (about {estimate * 1000:.0f} ms)"
                lower, below = le, count
        print(f"| step start latency ({total} steps timed) | p50 {quantile(0.5)}, p99 {quantile(0.99)} |")
    errors = sum(int(m.group(1)) for line in open(a.metrics)
                 for m in [re.match(r'workflow_operator_reconcile_errors_total\{.*\} (\d+)', line)] if m)
    print(f"| reconcile errors | {errors} |")
    if verbs:
        per = ", ".join(f"{v} {c / steps:.2f}" for v, c in sorted(verbs.items()))
        writes = sum(c for v, c in verbs.items() if v in WRITES)
        print(f"| API requests per step, by verb | {per} (writes {writes / steps:.2f}) |")
        detail = ", ".join(f"{k} {c / steps:.2f}" for k, c in sorted(by_resource.items()))
        print(f"| ... by verb and resource | {detail} |")

    # The cluster over the same run.
    print(f"| `kubectl apply` of the {n} groups (one request each) | {a.t_applied - t0:.1f} s of the {wall:.1f} s |")

    def apiserver(path):
        sums, counts = Counter(), Counter()
        for line in open(path):
            m = re.match(r'apiserver_request_duration_seconds_(sum|count)\{(.*)\} (\S+)', line)
            if not m:
                continue
            l = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            key = (l.get("verb"), l.get("resource", "") + (f"/{l['subresource']}" if l.get("subresource") else ""))
            (sums if m.group(1) == "sum" else counts)[key] += float(m.group(3))
        return sums, counts
    try:
        (s0, c0), (s1, c1) = apiserver(a.apiserver_before), apiserver(a.apiserver_after)
        rows = []
        for key in sorted(c1, key=lambda k: -(c1[k] - c0.get(k, 0))):
            count = c1[key] - c0.get(key, 0)
            # APPLY: a server-side apply (our status writes) is a PATCH the API server counts apart.
            if count >= n and key[0] in ("POST", "PATCH", "APPLY", "PUT", "DELETE"):
                rows.append(f"{key[0]} {key[1]} {1000 * (s1[key] - s0.get(key, 0)) / count:.1f} ms ({int(count)})")
        print(f"| API server mean latency of the writes it served in that time (count) | {', '.join(rows)} |")
    except (OSError, ZeroDivisionError):
        pass

    def component_ticks(path):
        try:
            return {l.split()[0]: int(l.split()[1]) for l in open(path)}
        except OSError:
            return {}
    before, after = component_ticks(a.cpu_before), component_ticks(a.cpu_after)
    parts = [f"{c} {(after[c] - before[c]) / hz:.1f} s" for c in after if c in before]
    if parts:
        print(f"| CPU in that time (2 cores: {2 * wall:.0f} CPU-s available) | operator {cpu:.1f} s, {', '.join(parts)} |")


TOOLS = {"argo": "Argo Workflows", "tekton": "Tekton Pipelines"}
# What each peer harness's run.sh prints first: its controller's version and settings.
PEER_HEADERS = {
    "argo": re.compile(r"argo workflow-controller (?P<version>\S+); DEFAULT_REQUEUE_TIME=(?P<requeue>\S+); "
                       r"--qps (?P<qps>\S+) --burst (?P<burst>\S+);"),
    "tekton": re.compile(r"tekton pipelines controller (?P<version>\S+); --threads-per-controller (?P<threads>\d+); "
                         r"--kube-api-qps (?P<qps>\S+) --kube-api-burst (?P<burst>\S+) "
                         r"\(client rate limit in effect: QPS (?P<qps_eff>\S+), burst (?P<burst_eff>\S+)\)"),
}


def peer_settings(harness, h):
    """(the peer's short name, its settings in a column header, in a sentence) of a peer's run."""
    if harness == "argo":
        if not h:
            return "Argo", "settings unknown", "settings unknown"
        return ("Argo",
                f"`DEFAULT_REQUEUE_TIME={h['requeue']}`, QPS {h['qps']}, burst {h['burst']}",
                f"DEFAULT_REQUEUE_TIME={h['requeue']} (its per-step requeue; Argo's default 10s, its fastest "
                f"setting 100ms), client rate limit --qps {h['qps']} --burst {h['burst']} (ARGO_QPS, ARGO_BURST; "
                f"Argo's defaults 20, 30)")
    if not h:
        return "Tekton", "settings unknown", "settings unknown"
    effect = f"QPS {h['qps_eff']}, burst {h['burst_eff']}"
    if h["qps"] == "unset" and h["burst"] == "unset":
        return ("Tekton", f"defaults: {effect}",
                f"its defaults (no --kube-api-qps, --kube-api-burst): a client rate limit of {effect}; {h['threads']} threads per "
                f"controller")
    return ("Tekton", f"`--kube-api-qps {h['qps']} --kube-api-burst {h['burst']}`: {effect}",
            f"--kube-api-qps {h['qps']} --kube-api-burst {h['burst']} (TEKTON_QPS, TEKTON_BURST): a client rate "
            f"limit of {effect} "
            f"(Tekton doubles what it is given); {h['threads']} threads per controller")


def peer(a):
    """A peer harness's run.sh output, as figures (the same keys as ours) and settings."""
    out = open(a.output).read()
    m = PEER_HEADERS[a.harness].search(out)
    name, short, long = peer_settings(a.harness, m.groupdict() if m else None)
    figures = {"harness": a.harness, "name": name, "version": m["version"] if m else "(version unknown)",
               "settings": short, "settings_long": long, "exit_status": a.exit_status,
               "fails": [l for l in out.splitlines() if l.startswith("FAIL:")]}
    m = re.search(r"SEED apply->Succeeded over (\d+) runs: min ([\d.]+) s, median ([\d.]+) s, max ([\d.]+) s", out)
    if m:
        figures.update(runs=int(m[1]), min=float(m[2]), median=float(m[3]), max=float(m[4]))
    m = re.search(r"SCALE (\d+) workflows Succeeded in ([\d.]+) s .*apply took ([\d.]+) s\); "
                  r"controller peak RSS ([\d.]+) MiB, CPU ([\d.]+) s; (\d+) pods", out)
    if m:
        figures.update(n=int(m[1]), wall=float(m[2]), apply=float(m[3]), rss=float(m[4]), cpu=float(m[5]),
                       pods=int(m[6]))
    m = re.search(r"FAIL: only (\d+) of (\d+) Succeeded in time", out)
    if m:
        figures.update(n=int(m[2]), unfinished=int(m[1]), timeout=a.scale_timeout_s)
    with open(a.json_out, "w") as f:
        json.dump(figures, f)


def side_by_side(a):
    ours = json.load(open(a.ours))
    peers = [json.load(open(p)) for p in a.peer]
    n = ours["n"]

    print()
    print("Side by side, one run on the same cluster, each controller run out of cluster like ours (ours "
          "at its default client rate limit, QPS 200, burst 400). Ours: a group of 3 Workflows, 5 step pods; "
          "Argo: one Workflow, a 5-task linear DAG; Tekton: one PipelineRun, a chain of 5 one-step Tasks; "
          "5 pods one after another in each. The sample's time: ours `kubectl wait`, the peers' polled every "
          "50 ms by their run.sh.")
    print()
    for p in peers:
        print(f"- {TOOLS[p['harness']]} {p['version']}: {p['settings_long']}.")
    print()

    def cell(d, key, fmt):
        return fmt.format(d[key]) if key in d else "not measured"

    def ratio(p, key, same_n=False):
        if key not in p or not p[key] or (same_n and p.get("n") != n):
            return ""
        return f"{ours[key] / p[key]:.2f}"

    def wall(p):
        if "wall" in p:
            return f"{p['wall']:.1f} s" + (f" ({p['n']} at once)" if p["n"] != n else "")
        if "unfinished" in p:
            return f"not finished: {p['unfinished']} of {p['n']} in {p['timeout']} s (SCALE_TIMEOUT_S)"
        return "not measured"

    def rate(p):
        if "wall" not in p:
            return "not measured", ""
        r = p["n"] / p["wall"]
        return f"{r:.2f}", f"{n / ours['wall'] / r:.2f}"

    def per_step(p):
        if "cpu" not in p:
            return "not measured", ""
        ms = 1000 * p["cpu"] / (5 * p["n"])
        return f"{ms:.1f} ms", f"{1000 * ours['cpu'] / (5 * n) / ms:.2f}"

    head = ["figure", "workflow-operator"]
    for p in peers:
        head += [f"{p['name']} {p['version']} ({p['settings']})", f"ours/{p['name']}"]
    rows = []
    for k in ("min", "median", "max"):
        row = [f"seed sample, apply to Completed / Succeeded, {k} of {ours['runs']} runs", f"{ours[k]:.2f} s"]
        for p in peers:
            row += [cell(p, k, "{:.2f} s"), ratio(p, k)]
        rows.append(row)
    row = [f"{n} at once (our groups, Argo's Workflows, Tekton's PipelineRuns), all done: wall time", f"{ours['wall']:.1f} s"]
    for p in peers:
        row += [wall(p), ratio(p, "wall", True)]
    rows.append(row)
    row = ["groups/s, Workflows/s, PipelineRuns/s", f"{n / ours['wall']:.2f}"]
    for p in peers:
        row += list(rate(p))
    rows.append(row)
    row = ["controller peak RSS (VmHWM), N at once", f"{ours['rss']:.1f} MiB"]
    for p in peers:
        row += [cell(p, "rss", "{:.1f} MiB"), ratio(p, "rss", True)]
    rows.append(row)
    row = ["controller CPU, N at once", f"{ours['cpu']:.1f} s"]
    for p in peers:
        row += [cell(p, "cpu", "{:.1f} s"), ratio(p, "cpu", True)]
    rows.append(row)
    row = ["controller CPU per step", f"{1000 * ours['cpu'] / (5 * n):.1f} ms"]
    for p in peers:
        row += list(per_step(p))
    rows.append(row)
    row = ["step pods", f"{ours['pods']} (expected {5 * n})"]
    for p in peers:
        expected = f" (expected {5 * p['n']})" if "n" in p else ""
        row += [cell(p, "pods", "{}") + expected, ""]
    rows.append(row)
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")

    for p in peers:
        name = f"{p['name']} {p['version']} ({p['settings']})"
        if "n" in p and p["n"] != n:
            print(f"\n{name} ran {p['n']} at once, not {n}: no ratio for the totals.")
        if p["exit_status"] or p["fails"]:
            print(f"\n{name} did not finish its run (exit {p['exit_status']}): "
                  f"{'; '.join(p['fails']) or 'see its log above'}")


def group_spans(path):
    """The pod watch in `path` (JSON events one after another): how many events, and each group's
    span, from the first event of one of its pods to the event in which its last pod finished."""
    text = open(path).read()
    decoder, at, events = json.JSONDecoder(), 0, []
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            break
        try:
            event, at = decoder.raw_decode(text, at)
        except ValueError:
            break  # the watch was stopped mid-object
        events.append(event)
    start, end, pod_end = {}, {}, {}
    for i, e in enumerate(events):
        pod = e.get("object", {})
        group = pod.get("metadata", {}).get("labels", {}).get("workflow.rxg456.cn/group-name")
        if not group:
            continue
        name = pod["metadata"]["name"]
        start.setdefault(group, i)
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed") and name not in pod_end:
            pod_end[name] = i
            end[group] = max(end.get(group, i), i)
    return len(events), start, end


def overlapping(start, end, targets_of):
    """Pairs of groups sharing a target (`targets_of`: group -> set) whose spans overlapped, and the
    groups with a pod never seen finished."""
    overlaps = 0
    groups = sorted(start)
    for x in range(len(groups)):
        for y in range(x + 1, len(groups)):
            g, h = groups[x], groups[y]
            if not (targets_of.get(g, set()) & targets_of.get(h, set())) or g not in end or h not in end:
                continue
            if not (end[g] < start[h] or end[h] < start[g]):
                overlaps += 1
    return overlaps, [g for g in groups if g not in end]


def fleet(a):
    """A part of bench-fleet.sh: groups on a fleet of machines."""
    targets_of = {g: set(ips) for g, ips in json.load(open(a.targets)).items()}
    events, start, end = group_spans(a.watch)
    overlaps, unfinished = overlapping(start, end, targets_of)
    sharing = sum(1 for x, g in enumerate(sorted(targets_of)) for h in sorted(targets_of)[x + 1:]
                  if targets_of[g] & targets_of[h])
    machines = len(set().union(*targets_of.values()))
    verbs, by_resource = api_requests(a.metrics)
    writes = sum(c for v, c in verbs.items() if v in WRITES)
    by_resource = Counter({k: c for k, c in by_resource.items() if k.split(" ")[0] in WRITES})
    steps = max(a.steps, 1)
    cpu = (a.cpu_ticks - a.cpu_ticks_started) / a.clk_tck
    per_group = statistics.mean(len(t) for t in targets_of.values())
    print()
    print(f"| fleet: {a.part} | value |")
    print("|---|---|")
    print(f"| groups | {a.groups} of {per_group:.0f} targets each over {machines} machines; {a.completed} Completed, {a.failed} Failed |")
    print(f"| wall time, kubectl apply to all finished | {a.t1 - a.t0:.1f} s |")
    print(f"| kubectl apply to the first step pod (the first locks taken) | {a.t_first_pod - a.t0:.2f} s |")
    print(f"| Workflows, step pods | {a.workflows}, {a.steps} |")
    print(f"| API writes | {writes} ({writes / steps:.2f} per step: {', '.join(f'{k} {c}' for k, c in sorted(by_resource.items()))}) |")
    print(f"| operator CPU | {cpu:.1f} s ({cpu * 1000 / steps:.1f} ms per step; {a.cpu_ticks_started / a.clk_tck:.1f} s starting, apart) |")
    print(f"| operator peak RSS (VmHWM) | {a.rss_kib / 1024:.1f} MiB |")
    print(f"| lock Leases at once, at most (polled twice a second) | {a.leases_peak} |")
    print(f"| lock Leases left afterwards | {a.leases_left} |")
    if len(targets_of) > 1:
        print(f"| overlaps (two of the {sharing} pairs of groups sharing a machine with pods at once, from a pod watch of {events} events) | {overlaps}{'; groups with a pod never seen finished: ' + ', '.join(unfinished) if unfinished else ''} |")


def contended(a):
    """The contended run: groups taking turns on shared targets."""
    times = sorted(float(l) for l in open(a.sample_times) if l.strip())
    one = statistics.median(times)
    per_target = -(-a.n // a.targets)
    ideal = per_target * one
    wall = a.t1 - a.t0
    events, start, end = group_spans(a.watch)
    target_of = {g: {int(g.rsplit("-", 1)[1]) % a.targets} for g in start}
    overlaps, unfinished = overlapping(start, end, target_of)
    steps = 5 * a.n
    verbs, by_resource = api_requests(a.metrics)
    writes = sum(c for v, c in verbs.items() if v in WRITES)
    by_resource = Counter({k: c for k, c in by_resource.items() if k.split(" ")[0] in WRITES})
    print()
    print("| contended run | value |")
    print("|---|---|")
    print(f"| {a.n} groups over {a.targets} shared targets | {a.completed} Completed, {a.failed} Failed |")
    print(f"| wall time | {wall:.1f} s; ideal {ideal:.1f} s ({per_target} groups per target x the sample's median {one:.2f} s); {wall / ideal:.2f}x the ideal |")
    print(f"| overlaps (pods of two groups on one target at once, from a pod watch of {events} events) | {overlaps}{'; groups with a pod never seen finished: ' + ', '.join(unfinished) if unfinished else ''} |")
    print(f"| API writes per step | {writes / steps:.2f} ({', '.join(f'{k} {c / steps:.2f}' for k, c in sorted(by_resource.items()))}) |")
    print(f"| operator peak RSS (VmHWM) | {a.rss_kib / 1024:.1f} MiB |")
    print(f"| lock Leases left afterwards | {a.locks_left} |")


def seconds(path):
    """The numbers of a file, one a line."""
    return [float(l) for l in open(path) if l.strip()]


def min_median_max(xs, unit, digits=2):
    return f"{min(xs):.{digits}f} / {statistics.median(xs):.{digits}f} / {max(xs):.{digits}f} {unit}"


def real_node(a):
    """The seed sample on the real node against its five step pods run by hand, run by run."""
    hand, group = seconds(a.hand), seconds(a.group)
    diff = [g - h for g, h in zip(group, hand)]
    print()
    print(f"| on the real node, {len(hand)} runs each (min / median / max) | |")
    print("|---|---|")
    print(f"| the seed sample against 3 target hosts, `kubectl apply` to Completed (5 step pods) | {min_median_max(group, 's')} |")
    print(f"| its five step pods one after another by hand (`kubectl create`, `kubectl wait`) | {min_median_max(hand, 's')} |")
    print(f"| the operator's cost: sample minus by hand, run by run | {min_median_max(diff, 's')} |")


def join(a):
    """Hosts joining as Nodes: apply to Completed, each step, the operator's CPU and RSS."""
    def t(s):
        return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").timestamp()
    # "<run> <seconds> <cpu ticks> <ticks per second> <peak RSS KiB> <Workflows JSON>" lines.
    rows = [line.split() for line in open(a.results) if line.strip()]
    steps = {}
    for row in rows:
        for wf in json.load(open(row[5]))["items"]:
            for name, d in (wf["status"].get("stepDetails") or {}).items():
                if d.get("startedAt") and d.get("finishedAt"):
                    steps.setdefault(f'{wf["spec"]["type"]}/{name}', []).append(t(d["finishedAt"]) - t(d["startedAt"]))
    took = [float(r[1]) for r in rows]
    cpu = [int(r[2]) / int(r[3]) for r in rows]
    rss = [int(r[4]) / 1024 for r in rows]
    print(f"\n| {a.hosts} hosts join, {len(rows)} runs | min / median / max |\n|---|---|")
    print(f"| `kubectl apply` to Completed (Nodes Ready, untainted) | {min_median_max(took, 's', 1)} |")
    for name, v in steps.items():
        print(f"| step `{name}` (pod start to finish, whole seconds) | {min_median_max(v, 's', 1)} |")
    print(f"| operator CPU over the run | {min_median_max(cpu, 's', 1)} |")
    print(f"| operator peak RSS | {min_median_max(rss, 'MiB', 1)} |")


def timed_runs(path):
    """`time -f '%e %M %U %S'` lines: wall seconds, peak RSS in MiB, CPU seconds per run."""
    rows = [line.split() for line in open(path) if line.strip()]
    return ([float(r[0]) for r in rows], max(int(r[1]) for r in rows) / 1024,
            [float(r[2]) + float(r[3]) for r in rows])


def runner(a):
    """One row of the runner's fan-out table."""
    t, rss, cpu = timed_runs(a.times)
    print(f"| `--parallel {a.parallel}` | {min_median_max(t, 's')} | {statistics.median(cpu):.2f} s | {rss:.1f} MiB |")


def copy(a):
    """One row of the runner's file delivery table."""
    t, rss, _ = timed_runs(a.times)
    n, mb = a.targets, a.mib
    median = statistics.median(t)
    print(f"| {n} target{'s' if n > 1 else ''} | {min_median_max(t, 's')} | {mb / median:.0f} MiB/s | {n * mb / median:.0f} MiB/s | {rss:.1f} MiB |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("ours", help="our run: the seed sample alone, then N groups at once")
    p.add_argument("--sample-times", required=True, help="file: the seed sample's apply-to-Completed seconds, one a line")
    p.add_argument("--n", type=int, required=True, help="how many groups were applied at once")
    p.add_argument("--t0", type=float, required=True, help="epoch seconds: kubectl apply of the N groups started")
    p.add_argument("--t-applied", type=float, required=True, help="epoch seconds: that kubectl apply returned")
    p.add_argument("--t1", type=float, required=True, help="epoch seconds: every group had finished")
    p.add_argument("--rss-kib", type=int, required=True, help="the operator's peak RSS (VmHWM), KiB")
    p.add_argument("--cpu-ticks", type=int, required=True, help="the operator's user + system CPU, clock ticks")
    p.add_argument("--cpu-ticks-started", type=int, default=0, help="the same, once started (before the apply)")
    p.add_argument("--clk-tck", type=int, required=True, help="clock ticks per second (getconf CLK_TCK)")
    p.add_argument("--workflows", type=int, required=True, help="Workflows in the namespace afterwards")
    p.add_argument("--pods", type=int, required=True, help="step pods in the namespace afterwards")
    p.add_argument("--completed", type=int, required=True, help="groups that ended Completed")
    p.add_argument("--failed", type=int, required=True, help="groups that ended Failed")
    p.add_argument("--metrics", required=True, help="file: the operator's /metrics after the run")
    p.add_argument("--apiserver-before", required=True, help="file: the API server's request duration series before")
    p.add_argument("--apiserver-after", required=True, help="file: the same after")
    p.add_argument("--cpu-before", required=True, help="file: '<component> <ticks>' lines before")
    p.add_argument("--cpu-after", required=True, help="file: the same after")
    p.add_argument("--json-out", required=True, help="file to write our figures to, for side-by-side")
    p.set_defaults(run=ours)

    p = commands.add_parser("contended", help="the contended run: groups taking turns on shared targets")
    p.add_argument("--n", type=int, required=True, help="groups applied at once")
    p.add_argument("--targets", type=int, required=True, help="shared targets they are spread over")
    p.add_argument("--sample-times", required=True, help="file: the seed sample's apply-to-Completed seconds")
    p.add_argument("--t0", type=float, required=True, help="epoch seconds: kubectl apply started")
    p.add_argument("--t1", type=float, required=True, help="epoch seconds: every group had finished")
    p.add_argument("--rss-kib", type=int, required=True, help="the operator's peak RSS (VmHWM), KiB")
    p.add_argument("--completed", type=int, required=True, help="groups that ended Completed")
    p.add_argument("--failed", type=int, required=True, help="groups that ended Failed")
    p.add_argument("--metrics", required=True, help="file: the operator's /metrics after the run")
    p.add_argument("--watch", required=True, help="file: kubectl get pods --watch --output-watch-events -o json")
    p.add_argument("--locks-left", type=int, required=True, help="lock Leases left after the run")
    p.set_defaults(run=contended)

    p = commands.add_parser("fleet", help="a part of bench-fleet.sh: groups on a fleet of machines")
    p.add_argument("--part", required=True, help="the part's name")
    p.add_argument("--groups", type=int, required=True, help="groups applied at once")
    p.add_argument("--targets", required=True, help="file: each group's target addresses (JSON)")
    p.add_argument("--t0", type=float, required=True, help="epoch seconds: kubectl apply started")
    p.add_argument("--t-first-pod", type=float, required=True, help="epoch seconds: the first step pod was seen")
    p.add_argument("--t1", type=float, required=True, help="epoch seconds: every group had finished")
    p.add_argument("--rss-kib", type=int, required=True, help="the operator's peak RSS (VmHWM), KiB")
    p.add_argument("--cpu-ticks", type=int, required=True, help="the operator's CPU (utime + stime), ticks")
    p.add_argument("--cpu-ticks-started", type=int, required=True, help="the same when the groups were applied")
    p.add_argument("--clk-tck", type=int, required=True, help="ticks a second")
    p.add_argument("--completed", type=int, required=True, help="groups that ended Completed")
    p.add_argument("--failed", type=int, required=True, help="groups that ended Failed")
    p.add_argument("--steps", type=int, required=True, help="step pods")
    p.add_argument("--workflows", type=int, required=True, help="Workflows")
    p.add_argument("--metrics", required=True, help="file: the operator's /metrics after the run")
    p.add_argument("--watch", required=True, help="file: kubectl get pods --watch --output-watch-events -o json")
    p.add_argument("--leases-peak", type=int, required=True, help="the most lock Leases seen at once")
    p.add_argument("--leases-left", type=int, required=True, help="lock Leases left after the run")
    p.set_defaults(run=fleet)

    p = commands.add_parser("peer", help="a peer harness's run.sh output, as figures for side-by-side")
    p.add_argument("--harness", required=True, choices=sorted(PEER_HEADERS), help="which peer harness ran")
    p.add_argument("--output", required=True, help="file: what its run.sh printed")
    p.add_argument("--exit-status", type=int, required=True, help="run.sh's exit status")
    p.add_argument("--scale-timeout-s", type=int, required=True,
                   help="seconds run.sh gave the N at once before giving up (SCALE_TIMEOUT_S)")
    p.add_argument("--json-out", required=True, help="file to write the figures to")
    p.set_defaults(run=peer)

    p = commands.add_parser("side-by-side", help="ours beside each peer's figures, with the ratio ours/peer")
    p.add_argument("--ours", required=True, help="file: what `ours --json-out` wrote")
    p.add_argument("--peer", required=True, action="append",
                   help="file: what `peer --json-out` wrote; repeated, one column per peer run, in order")
    p.set_defaults(run=side_by_side)

    p = commands.add_parser("real-node", help="bench-real-node.sh: the sample against its pods run by hand")
    p.add_argument("--group", required=True, help="file: the sample's apply-to-Completed seconds, one a line")
    p.add_argument("--hand", required=True, help="file: the five pods' seconds by hand, one run a line")
    p.set_defaults(run=real_node)

    p = commands.add_parser("join", help="bench-join.sh: hosts joining as Nodes")
    p.add_argument("--results", required=True,
                   help="file: '<run> <seconds> <cpu ticks> <ticks per second> <peak RSS KiB> <Workflows JSON file>' lines")
    p.add_argument("--hosts", type=int, required=True, help="hosts joined per run")
    p.set_defaults(run=join)

    p = commands.add_parser("runner", help="bench-runner.sh: one row of the fan-out table")
    p.add_argument("--times", required=True, help="file: `time -f '%%e %%M %%U %%S'` lines, one per run")
    p.add_argument("--parallel", type=int, required=True, help="the runner's --parallel")
    p.set_defaults(run=runner)

    p = commands.add_parser("copy", help="bench-runner.sh: one row of the --copy table")
    p.add_argument("--times", required=True, help="file: `time -f '%%e %%M %%U %%S'` lines, one per run")
    p.add_argument("--targets", type=int, required=True, help="targets the file went to")
    p.add_argument("--mib", type=float, required=True, help="the file's size, MiB")
    p.set_defaults(run=copy)

    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
