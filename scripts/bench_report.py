#!/usr/bin/env python3
"""The tables of scripts/bench-cluster.sh, from what it measured.

  bench_report.py ours --sample-times FILE --n N ...    our run: one Markdown table, and
                                                        --json-out for the comparison
  bench_report.py side-by-side --ours JSON --peer-out FILE ...
                                                        ours beside Argo's run.sh output

Run by bench-cluster.sh; `bench_report.py <command> --help` lists the arguments.
"""
import argparse
import json
import re
import statistics
from collections import Counter


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
    print(f"| operator CPU | {cpu:.1f} s ({1000 * cpu / steps:.1f} ms per step) |")
    print(f"| Workflows / step pods | {a.workflows} / {a.pods} (expected {3 * n} / {steps}) |")
    with open(a.json_out, "w") as out:
        json.dump({"runs": len(times), "min": times[0], "median": statistics.median(times), "max": times[-1],
                   "n": n, "wall": wall, "rss": a.rss_kib / 1024, "cpu": cpu, "done": a.completed,
                   "failed": a.failed, "workflows": a.workflows, "pods": a.pods}, out)
    verbs = Counter()
    by_resource = Counter()
    for line in open(a.metrics):
        m = re.match(r'workflow_operator_api_requests_total\{(.*)\} (\d+)', line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            verbs[labels.get("verb", "?")] += int(m.group(2))
            by_resource[f'{labels.get("verb")} {labels.get("resource")}'] += int(m.group(2))
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
        writes = sum(c for v, c in verbs.items() if v in ("create", "update", "patch", "delete"))
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


def side_by_side(a):
    ours = json.load(open(a.ours))
    out = open(a.peer_out).read()
    rc, version, requeue = a.peer_rc, a.argo_version, a.argo_requeue
    argo = {}
    m = re.search(r"SEED apply->Succeeded over (\d+) runs: min ([\d.]+) s, median ([\d.]+) s, max ([\d.]+) s", out)
    if m:
        argo.update(runs=int(m[1]), min=float(m[2]), median=float(m[3]), max=float(m[4]))
    m = re.search(r"SCALE (\d+) workflows Succeeded in ([\d.]+) s .*controller peak RSS ([\d.]+) MiB, CPU ([\d.]+) s; (\d+) pods", out)
    if m:
        argo.update(n=int(m[1]), wall=float(m[2]), rss=float(m[3]), cpu=float(m[4]), pods=int(m[5]))
    fails = [l for l in out.splitlines() if l.startswith("FAIL:")]
    m = re.search(r"--qps (\S+) --burst (\S+);", out)
    qps = f"--qps {m[1]} --burst {m[2]}" if m else "client rate limit unknown"

    def cell(d, key, fmt):
        return fmt.format(d[key]) if key in d else "not measured"

    def ratio(key, same_n=False):
        if key not in argo or not argo[key] or (same_n and argo.get("n") != ours["n"]):
            return ""
        return f"{ours[key] / argo[key]:.2f}"

    n, an = ours["n"], argo.get("n")
    print()
    print(f"Side by side, one run on the same cluster. Argo Workflows {version} workflow-controller at "
          f"DEFAULT_REQUEUE_TIME={requeue} (its per-step requeue; Argo's default 10s), {qps} "
          f"(ARGO_QPS, ARGO_BURST; Argo's defaults 20, 30; ours 200, 400), out of cluster like ours. "
          f"Ours: a group of 3 Workflows, 5 step pods; "
          f"Argo: one Workflow, a 5-task linear DAG, 5 pods. The sample's time: ours `kubectl wait`, "
          f"Argo's polled every 50 ms by run.sh.")
    print()
    print(f"| figure | workflow-operator | Argo Workflows {version} (DEFAULT_REQUEUE_TIME={requeue}) | ours/Argo |")
    print("|---|---|---|---|")
    for k in ("min", "median", "max"):
        print(f"| seed sample, apply to Completed / Succeeded, {k} of {ours['runs']} / {argo.get('runs', '-')} runs "
              f"| {ours[k]:.2f} s | {cell(argo, k, '{:.2f} s')} | {ratio(k)} |")
    argo_n = f"{an} workflows" if an else "workflows"
    print(f"| {n} groups / {argo_n} at once: wall time | {ours['wall']:.1f} s | {cell(argo, 'wall', '{:.1f} s')} | {ratio('wall', True)} |")
    rate_o = n / ours["wall"]
    rate_a = an / argo["wall"] if "wall" in argo else None
    print(f"| groups/s, workflows/s | {rate_o:.2f} | {f'{rate_a:.2f}' if rate_a else 'not measured'} | {f'{rate_o / rate_a:.2f}' if rate_a else ''} |")
    print(f"| controller peak RSS (VmHWM), at N at once | {ours['rss']:.1f} MiB | {cell(argo, 'rss', '{:.1f} MiB')} | {ratio('rss', True)} |")
    print(f"| controller CPU, N at once | {ours['cpu']:.1f} s | {cell(argo, 'cpu', '{:.1f} s')} | {ratio('cpu', True)} |")
    if "cpu" in argo:
        print(f"| controller CPU per step | {1000 * ours['cpu'] / (5 * n):.1f} ms | {1000 * argo['cpu'] / (5 * an):.1f} ms | {ours['cpu'] / (5 * n) / (argo['cpu'] / (5 * an)):.2f} |")
    print(f"| step pods | {ours['pods']} (expected {5 * n}) | {cell(argo, 'pods', '{}')} (expected {5 * an if an else '-'}) | |")
    if an and an != n:
        print(f"\nArgo ran {an} workflows at once, not {n} (ARGO_N): no ratio for the totals.")
    if rc or fails:
        print(f"\nArgo's run did not finish (exit {rc}): {'; '.join(fails) or 'see its log above'}")


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

    p = commands.add_parser("side-by-side", help="ours beside Argo's figures, with the ratio")
    p.add_argument("--ours", required=True, help="file: what `ours --json-out` wrote")
    p.add_argument("--peer-out", required=True, help="file: the output of Argo's run.sh")
    p.add_argument("--peer-rc", type=int, required=True, help="run.sh's exit status")
    p.add_argument("--argo-version", required=True, help="Argo Workflows' version, e.g. v3.7.9")
    p.add_argument("--argo-requeue", required=True, help="Argo's DEFAULT_REQUEUE_TIME, e.g. 100ms")
    p.set_defaults(run=side_by_side)

    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
