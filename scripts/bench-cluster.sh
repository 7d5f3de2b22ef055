#!/usr/bin/env bash
# make bench-cluster: how fast the operator (release build) runs groups on the local cluster.
#
#   N=100 scripts/bench-cluster.sh        the seed sample alone (RUNS times), then N copies at once
#
# Prints one table: the seed sample's apply-to-Completed time (min/median/max over RUNS runs),
# then for N copies applied at once: wall time, groups/s, the operator's peak RSS (VmHWM) and
# CPU seconds (and ms per step), the step start latency (p50/p99: from the operator seeing a
# step's dependency finish to its pod created), API requests per step, and the count of
# Workflows and step pods (exactly 3N and 5N: nothing duplicated). A figure, not a test: nothing here fails on a slow run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
N="${N:-100}"
RUNS="${RUNS:-10}"
STATE="$ROOT/.local-cluster"
export KUBECONFIG="$STATE/kubeconfig"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release/workflow-operator"
SAMPLE="$ROOT/examples/workflowgroup-sample.yaml"
KUBECTL="${KUBECTL:-$(command -v kubectl)}"
kubectl() { command "$KUBECTL" --request-timeout=60s "$@"; }
say() { printf '[bench] %s\n' "$*" >&2; }

say "building the release operator"
cargo build -q --release -p workflow-operator
tests/cluster/cluster.sh up >&2
kubectl apply -f deploy/crds/ >/dev/null
kubectl wait --for=condition=Established --timeout=60s \
  crd/workflowgroups.workflow.rxg456.cn crd/workflows.workflow.rxg456.cn >/dev/null

work="$(mktemp -d)"
operator_pid=""
cleanup() {
  [ -n "$operator_pid" ] && kill "$operator_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# One namespace per part, so each starts empty; the operator watches only it.
start_operator() {
  local ns="$1"
  mkdir -p "$work/plugins"
  cp "$TARGET"/plugins/*.wasm "$work/plugins/"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  "$BIN" run --namespace "$ns" --plugin-dir "$work/plugins" --http-addr "127.0.0.1:$port" \
    >"$work/operator-$ns.log" 2>&1 &
  operator_pid=$!
  for _ in $(seq 1 200); do
    grep -q "controllers started" "$work/operator-$ns.log" && return 0
    sleep 0.05
  done
  say "the operator did not start:"; cat "$work/operator-$ns.log" >&2; exit 1
}
stop_operator() { kill "$operator_pid" 2>/dev/null || true; wait "$operator_pid" 2>/dev/null || true; operator_pid=""; }
fresh_namespace() {
  local ns="$1"
  kubectl create namespace "$ns" >/dev/null
  for _ in $(seq 1 100); do
    kubectl -n "$ns" get serviceaccount default >/dev/null 2>&1 && return 0
    sleep 0.1
  done
}

# --- the seed sample alone ---------------------------------------------------------------
ns="bench-sample-$(date +%s)"
fresh_namespace "$ns"
start_operator "$ns"
: >"$work/sample-times"
for i in $(seq 1 "$RUNS"); do
  name="sample-$i"
  sed -e "s/name: workflowgroup-sample/name: $name/" -e '/^  namespace:/d' "$SAMPLE" >"$work/$name.yaml"
  t0=$(date +%s.%N)
  kubectl -n "$ns" apply -f "$work/$name.yaml" >/dev/null
  kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Completed "wfg/$name" --timeout=120s >/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc >>"$work/sample-times"
done
stop_operator
kubectl delete namespace "$ns" --wait=false >/dev/null

# --- N copies at once ----------------------------------------------------------------------
ns="bench-n$N-$(date +%s)"
fresh_namespace "$ns"
start_operator "$ns"
python3 - "$SAMPLE" "$N" >"$work/groups.yaml" <<'PY'
import sys
sample = "".join(l for l in open(sys.argv[1]) if not l.startswith("  namespace:"))
for i in range(int(sys.argv[2])):
    print("---")
    print(sample.replace("name: workflowgroup-sample", f"name: group-{i:04d}"))
PY
t0=$(date +%s.%N)
kubectl -n "$ns" apply -f "$work/groups.yaml" >/dev/null
while :; do
  phases=$(kubectl -n "$ns" get wfg -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}')
  completed=$(grep -c '^Completed$' <<<"$phases" || true)
  failed=$(grep -c '^Failed$' <<<"$phases" || true)
  [ $((completed + failed)) -ge "$N" ] && break
  sleep 0.5
done
t1=$(date +%s.%N)
hwm_kib=$(awk '/VmHWM/ {print $2}' "/proc/$operator_pid/status")
ticks=$(awk '{print $14 + $15}' "/proc/$operator_pid/stat")
hz=$(getconf CLK_TCK)
curl -fsS "http://127.0.0.1:$port/metrics" >"$work/metrics.txt" || true
workflows=$(kubectl -n "$ns" get wf --no-headers | wc -l)
pods=$(kubectl -n "$ns" get pods --no-headers | wc -l)
stop_operator

python3 - "$work/sample-times" "$N" "$t0" "$t1" "$hwm_kib" "$ticks" "$hz" "$workflows" "$pods" "$work/metrics.txt" "$completed" "$failed" <<'PY'
import re, statistics, sys
from collections import Counter
times = sorted(float(l) for l in open(sys.argv[1]) if l.strip())
n = int(sys.argv[2]); t0, t1 = float(sys.argv[3]), float(sys.argv[4])
hwm, ticks, hz = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
workflows, pods = int(sys.argv[8]), int(sys.argv[9])
wall = t1 - t0; cpu = ticks / hz; steps = 5 * n
print(f"| figure | value |")
print(f"|---|---|")
print(f"| seed sample, apply to Completed ({len(times)} runs) | min {times[0]:.2f} s, median {statistics.median(times):.2f} s, max {times[-1]:.2f} s |")
print(f"| {n} groups at once: wall time | {wall:.1f} s ({n / wall:.2f} groups/s); {sys.argv[11]} Completed, {sys.argv[12]} Failed |")
print(f"| operator peak RSS (VmHWM) | {hwm / 1024:.1f} MiB |")
print(f"| operator CPU | {cpu:.1f} s ({1000 * cpu / steps:.1f} ms per step) |")
print(f"| Workflows / step pods | {workflows} / {pods} (expected {3 * n} / {steps}) |")
verbs = Counter()
by_resource = Counter()
for line in open(sys.argv[10]):
    m = re.match(r'workflow_operator_api_requests_total\{(.*)\} (\d+)', line)
    if m:
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        verbs[labels.get("verb", "?")] += int(m.group(2))
        by_resource[f'{labels.get("verb")} {labels.get("resource")}'] += int(m.group(2))
# Step start latency: quantiles from the histogram's cumulative buckets (each an upper bound).
buckets = []
for line in open(sys.argv[10]):
    m = re.match(r'workflow_operator_step_start_latency_seconds_bucket\{le="([^"]+)"\} (\d+)', line)
    if m:
        buckets.append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), int(m.group(2))))
if buckets and buckets[-1][1] > 0:
    total = buckets[-1][1]
    def quantile(q):
        for le, count in buckets:
            if count >= q * total:
                return "over 4 s" if le == float("inf") else f"<= {le * 1000:.0f} ms"
    print(f"| step start latency ({total} steps timed) | p50 {quantile(0.5)}, p99 {quantile(0.99)} |")
if verbs:
    per = ", ".join(f"{v} {c / steps:.2f}" for v, c in sorted(verbs.items()))
    writes = sum(c for v, c in verbs.items() if v in ("create", "update", "patch", "delete"))
    print(f"| API requests per step, by verb | {per} (writes {writes / steps:.2f}) |")
    detail = ", ".join(f"{k} {c / steps:.2f}" for k, c in sorted(by_resource.items()))
    print(f"| ... by verb and resource | {detail} |")
PY
