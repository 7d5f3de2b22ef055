#!/usr/bin/env python3
"""How long the admission webhook takes to answer one AdmissionReview.

Sends COUNT reviews of each case to the webhook over one kept-alive TLS connection (as the API
server does), after WARMUP unmeasured ones, and prints p50/p99 per case: the time from sending
the request to reading the whole answer, on loopback. With --metrics, also the p50/p99 that the
operator's own histogram (workflow_operator_webhook_admission_duration_seconds) gives for all
of them, as bucket bounds. A figure, not a test.
"""

import argparse
import copy
import http.client
import json
import ssl
import time
import urllib.parse
import urllib.request
import uuid


def group(name, types, params=None):
    spec = {
        "type": "cluster-expansion",
        "clusterName": "bench-cluster",
        "workflowSteps": types,
        "targets": [
            {"name": "node-1", "ip": "10.0.0.1", "role": "Master"},
            {"name": "node-2", "ip": "10.0.0.2", "role": "Worker"},
        ],
    }
    if params:
        spec["params"] = params
    return {
        "apiVersion": "workflow.rxg456.cn/v1alpha1",
        "kind": "WorkflowGroup",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": spec,
    }


def review(obj, old=None):
    operation = "UPDATE" if old else "CREATE"
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "workflow.rxg456.cn", "version": "v1alpha1", "kind": "WorkflowGroup"},
            "resource": {"group": "workflow.rxg456.cn", "version": "v1alpha1", "resource": "workflowgroups"},
            "name": obj["metadata"]["name"],
            "namespace": "bench",
            "operation": operation,
            "userInfo": {"username": "bench"},
            "object": obj,
            "oldObject": old,
            "dryRun": True,
        },
    }


def cases():
    seed = group("seed", ["pre-check", "setup", "post-check"])
    relabelled = copy.deepcopy(seed)
    relabelled["metadata"]["labels"] = {"team": "a"}
    return [
        ("seed sample, 3 types accepted (3 validate + 3 template)", review(seed)),
        ("pre-check params refused by its validate", review(group(
            "refused", ["pre-check"], {"pre-check": {"requiredCommands": ["rm -rf"]}}))),
        ("update changing nothing the plugins see (no plugin call)", review(relabelled, seed)),
    ]


def percentile(sorted_values, p):
    index = max(0, min(len(sorted_values) - 1, int(round(p / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[index]


def histogram_quantiles(metrics_text, name):
    """p50 and p99 upper bucket bounds of a Prometheus histogram, in seconds."""
    buckets = []
    for line in metrics_text.splitlines():
        if line.startswith(name + "_bucket{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            count = float(line.rsplit(" ", 1)[1])
            buckets.append((float("inf") if bound == "+Inf" else float(bound), count))
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    return tuple(next(b for b, c in buckets if c >= q * total) for q in (0.5, 0.99))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="https://HOST:PORT/validate-workflowgroup")
    parser.add_argument("--ca", required=True, help="PEM file of the CA that signed the webhook's certificate")
    parser.add_argument("--count", type=int, default=500, help="measured reviews per case")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured reviews per case first")
    parser.add_argument("--metrics", help="the operator's /metrics URL, for its own histogram")
    args = parser.parse_args()

    url = urllib.parse.urlsplit(args.url)
    context = ssl.create_default_context(cafile=args.ca)
    connection = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=30)
    print(f"{'case':60} {'p50':>9} {'p99':>9}   (ms, {args.count} reviews each, one connection)")
    for title, body in cases():
        expected = "refused" not in title
        times = []
        for i in range(args.warmup + args.count):
            body["request"]["uid"] = str(uuid.uuid4())
            payload = json.dumps(body).encode()
            started = time.perf_counter()
            connection.request("POST", url.path, payload, {"Content-Type": "application/json"})
            answer = json.loads(connection.getresponse().read())
            elapsed = time.perf_counter() - started
            allowed = answer["response"]["allowed"]
            if allowed != expected:
                raise SystemExit(f"{title}: allowed={allowed}, expected {expected}: {answer}")
            if i >= args.warmup:
                times.append(elapsed * 1000)
        times.sort()
        print(f"{title:60} {percentile(times, 50):9.2f} {percentile(times, 99):9.2f}")
    if args.metrics:
        text = urllib.request.urlopen(args.metrics, timeout=10).read().decode()
        q = histogram_quantiles(text, "workflow_operator_webhook_admission_duration_seconds")
        if q:
            print(f"operator's histogram, all cases: p50 <= {q[0] * 1000:g} ms, p99 <= {q[1] * 1000:g} ms (bucket bounds)")


if __name__ == "__main__":
    main()
