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
#
#   PEER=argo N=100 scripts/bench-cluster.sh   then Argo Workflows on the same cluster, side by side
#   OPERATOR_ARGS="--concurrent-reconciles 16" N=100 scripts/bench-cluster.sh   other operator flags
#
# With PEER=argo, right after ours, Argo's peer harness (an optional extra this repository does not
# carry: the directory PEER_DIR, by default ../shared/peers/argo beside the checkout; its build.sh
# builds Argo's workflow-controller) measures Argo with its run.sh on the equivalent of the seed
# sample (one Workflow, a 5-task linear DAG): the sample RUNS times, then ARGO_N (default N)
# workflows at once, at DEFAULT_REQUEUE_TIME=ARGO_REQUEUE (default 100ms, Argo's fastest; Argo's
# default is 10s). It runs in a throwaway clone, on this cluster: the clone's .local-cluster is this
# one, and run.sh's `make cluster-down` / `make cluster-up` only check that the cluster is up (it is
# never stopped). Argo uses the namespaces `argo` and `scale`, which must not exist beforehand and
# are deleted afterwards (with Argo's CRDs, if this run installed them). Then one table, ours and
# Argo's side by side with the ratio ours/Argo.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
N="${N:-100}"
RUNS="${RUNS:-10}"
PEER="${PEER:-}"
PEER_DIR="${PEER_DIR:-$ROOT/../shared/peers/$PEER}"
ARGO_N="${ARGO_N:-$N}"
ARGO_REQUEUE="${ARGO_REQUEUE:-100ms}"
STATE="${WORKFLOW_CLUSTER_DIR:-$ROOT/.local-cluster}"
export KUBECONFIG="$STATE/kubeconfig"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release/workflow-operator"
SAMPLE="$ROOT/examples/workflowgroup-sample.yaml"
KUBECTL="${KUBECTL:-$(command -v kubectl)}"
kubectl() { command "$KUBECTL" --request-timeout=60s "$@"; }
say() { printf '[bench] %s\n' "$*" >&2; }

case "$PEER" in
  "") ;;
  argo)
    if [ ! -x "$PEER_DIR/run.sh" ]; then
      say "PEER=argo runs Argo's peer harness (run.sh and build.sh), which this repository does not"
      say "carry: looked for $PEER_DIR/run.sh; set PEER_DIR to the directory that holds it"
      exit 1
    fi
    say "building Argo's workflow-controller (cached after the first build)"
    "$PEER_DIR/build.sh" | tail -1 >&2
    ;;
  *) say "unknown PEER=$PEER (only argo)"; exit 2 ;;
esac
say "building the release operator"
cargo build -q --release -p workflow-operator
tests/cluster/cluster.sh up >&2
if [ "$PEER" = argo ]; then
  for argo_ns in argo scale; do
    # A previous run's, still being deleted: wait for it; one in use: refuse.
    for _ in $(seq 1 120); do
      [ "$(kubectl get namespace "$argo_ns" -o jsonpath='{.status.phase}' 2>/dev/null)" = Terminating ] || break
      sleep 1
    done
    if kubectl get namespace "$argo_ns" >/dev/null 2>&1; then
      say "namespace $argo_ns exists (a previous peer run?): delete it first, Argo's figures would count its workflows"
      exit 1
    fi
  done
fi
kubectl apply -k crds/ >/dev/null
kubectl wait --for=condition=Established --timeout=60s \
  crd/workflowgroups.workflow.rxg456.cn crd/workflows.workflow.rxg456.cn >/dev/null

work="$(mktemp -d)"
operator_pid=""
n_namespace=""
cleanup() {
  [ -n "$operator_pid" ] && kill "$operator_pid" 2>/dev/null || true
  # The N groups' namespace goes at the very end (after Argo's run: its deletion is load).
  [ -n "$n_namespace" ] && kubectl delete namespace "$n_namespace" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# One namespace per part, so each starts empty; the operator watches only it.
start_operator() {
  local ns="$1"
  mkdir -p "$work/plugins"
  cp "$TARGET"/plugins/*.wasm "$work/plugins/"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  # shellcheck disable=SC2086 # OPERATOR_ARGS is a list of flags
  "$BIN" run --namespace "$ns" --plugin-dir "$work/plugins" --http-addr "127.0.0.1:$port" \
    ${OPERATOR_ARGS:-} >"$work/operator-$ns.log" 2>&1 &
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
  kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Completed "workflowgroups.workflow.rxg456.cn/$name" --timeout=120s >/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc >>"$work/sample-times"
done
stop_operator
# Gone before the N groups start: its pods' deletion would be load on the cluster during their run.
kubectl delete namespace "$ns" --timeout=180s >/dev/null || say "namespace $ns is still being deleted"

# --- N copies at once ----------------------------------------------------------------------
ns="bench-n$N-$(date +%s)"
fresh_namespace "$ns"
n_namespace="$ns"
start_operator "$ns"
python3 - "$SAMPLE" "$N" >"$work/groups.yaml" <<'PY'
import sys
sample = "".join(l for l in open(sys.argv[1]) if not l.startswith("  namespace:"))
for i in range(int(sys.argv[2])):
    print("---")
    print(sample.replace("name: workflowgroup-sample", f"name: group-{i:04d}"))
PY
# Where the cluster itself is the limit: the API server's own request latency and each
# component's CPU over the run, from snapshots before and after.
cluster_snapshot() {
  kubectl get --raw /metrics | grep '^apiserver_request_duration_seconds_\(sum\|count\)' >"$work/apiserver-$1.txt" || true
  for c in kube-apiserver etcd kube-scheduler kube-controller-manager kwok; do
    pid="$(cat "$STATE/pids/$c.pid" 2>/dev/null || true)"
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] && echo "$c $(awk '{print $14 + $15}' "/proc/$pid/stat")"
  done >"$work/cpu-$1.txt"
}
cluster_snapshot before
t0=$(date +%s.%N)
kubectl -n "$ns" apply -f "$work/groups.yaml" >/dev/null
t_applied=$(date +%s.%N)
while :; do
  phases=$(kubectl -n "$ns" get workflowgroups.workflow.rxg456.cn -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}')
  completed=$(grep -c '^Completed$' <<<"$phases" || true)
  failed=$(grep -c '^Failed$' <<<"$phases" || true)
  [ $((completed + failed)) -ge "$N" ] && break
  sleep 0.5
done
t1=$(date +%s.%N)
cluster_snapshot after
hwm_kib=$(awk '/VmHWM/ {print $2}' "/proc/$operator_pid/status")
ticks=$(awk '{print $14 + $15}' "/proc/$operator_pid/stat")
hz=$(getconf CLK_TCK)
curl -fsS "http://127.0.0.1:$port/metrics" >"$work/metrics.txt" || true
workflows=$(kubectl -n "$ns" get workflows.workflow.rxg456.cn --no-headers | wc -l)
pods=$(kubectl -n "$ns" get pods --no-headers | wc -l)
stop_operator

python3 - "$work/sample-times" "$N" "$t0" "$t1" "$hwm_kib" "$ticks" "$hz" "$workflows" "$pods" "$work/metrics.txt" "$completed" "$failed" "$work/ours.json" "$t_applied" "$work" <<'PY'
import json, re, statistics, sys
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
json.dump({"runs": len(times), "min": times[0], "median": statistics.median(times), "max": times[-1],
           "n": n, "wall": wall, "rss": hwm / 1024, "cpu": cpu, "done": int(sys.argv[11]),
           "failed": int(sys.argv[12]), "workflows": workflows, "pods": pods}, open(sys.argv[13], "w"))
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
errors = sum(int(m.group(1)) for line in open(sys.argv[10])
             for m in [re.match(r'workflow_operator_reconcile_errors_total\{.*\} (\d+)', line)] if m)
print(f"| reconcile errors | {errors} |")
if verbs:
    per = ", ".join(f"{v} {c / steps:.2f}" for v, c in sorted(verbs.items()))
    writes = sum(c for v, c in verbs.items() if v in ("create", "update", "patch", "delete"))
    print(f"| API requests per step, by verb | {per} (writes {writes / steps:.2f}) |")
    detail = ", ".join(f"{k} {c / steps:.2f}" for k, c in sorted(by_resource.items()))
    print(f"| ... by verb and resource | {detail} |")

# The cluster over the same run.
t_applied, work = float(sys.argv[14]), sys.argv[15]
print(f"| `kubectl apply` of the {n} groups (one request each) | {t_applied - t0:.1f} s of the {wall:.1f} s |")
def apiserver(name):
    sums, counts = Counter(), Counter()
    for line in open(f"{work}/apiserver-{name}.txt"):
        m = re.match(r'apiserver_request_duration_seconds_(sum|count)\{(.*)\} (\S+)', line)
        if not m:
            continue
        l = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        key = (l.get("verb"), l.get("resource", "") + (f"/{l['subresource']}" if l.get("subresource") else ""))
        (sums if m.group(1) == "sum" else counts)[key] += float(m.group(3))
    return sums, counts
try:
    (s0, c0), (s1, c1) = apiserver("before"), apiserver("after")
    rows = []
    for key in sorted(c1, key=lambda k: -(c1[k] - c0.get(k, 0))):
        count = c1[key] - c0.get(key, 0)
        # APPLY: a server-side apply (our status writes) is a PATCH the API server counts apart.
        if count >= n and key[0] in ("POST", "PATCH", "APPLY", "PUT", "DELETE"):
            rows.append(f"{key[0]} {key[1]} {1000 * (s1[key] - s0.get(key, 0)) / count:.1f} ms ({int(count)})")
    print(f"| API server mean latency of the writes it served in that time (count) | {', '.join(rows)} |")
except (OSError, ZeroDivisionError):
    pass
def component_ticks(name):
    try:
        return {l.split()[0]: int(l.split()[1]) for l in open(f"{work}/cpu-{name}.txt")}
    except OSError:
        return {}
before, after = component_ticks("before"), component_ticks("after")
parts = [f"{c} {(after[c] - before[c]) / hz:.1f} s" for c in after if c in before]
if parts:
    print(f"| CPU in that time (2 cores: {2 * wall:.0f} CPU-s available) | operator {cpu:.1f} s, {', '.join(parts)} |")
PY

[ "$PEER" = argo ] || exit 0

# --- Argo Workflows, on the same cluster, right after ours ---------------------------------------
# run.sh wants a workflow-operator checkout of its own (it drops a kwok stage into
# tests/cluster/kwok/ for its run) and starts with `make cluster-down; make cluster-up`: in a
# throwaway clone whose .local-cluster is this cluster, with a `make` in front on PATH that turns
# those two into "check that the cluster is up". The running kwok already completes Argo's pods
# after 200 ms (tests/cluster/kwok/pod-complete.yaml takes every pod owned by a `Workflow`), so the
# stage run.sh adds (same selector by label, same 200 ms) is not needed and not loaded.
say "Argo Workflows: ${RUNS} seed runs, then ${ARGO_N} workflows at once, DEFAULT_REQUEUE_TIME=${ARGO_REQUEUE}"
clone="$work/peer-clone"
git clone -q "$ROOT" "$clone"
ln -s "$STATE" "$clone/.local-cluster"
mkdir -p "$work/peer-bin" "$work/peer-logs"
real_make="$(command -v make)"
cat >"$work/peer-bin/make" <<SHIM
#!/usr/bin/env bash
# The peer shares the running local cluster: never stop it, never start another.
for a in "\$@"; do
  case "\$a" in
    cluster-down) exit 0 ;;
    cluster-up) exec env WORKFLOW_CLUSTER_DIR="$STATE" "$ROOT/tests/cluster/cluster.sh" status ;;
  esac
done
exec "$real_make" "\$@"
SHIM
chmod +x "$work/peer-bin/make"
argo_crds_before=0
kubectl get crd workflows.argoproj.io >/dev/null 2>&1 && argo_crds_before=1
peer_rc=0
( cd "$clone" && PATH="$work/peer-bin:$PATH" KEEP_CLUSTER=1 MODE=both SEED_RUNS="$RUNS" \
    SCALE_N="$ARGO_N" DEFAULT_REQUEUE_TIME="$ARGO_REQUEUE" PEER_LOG_DIR="$work/peer-logs" \
    KUBECTL="$KUBECTL" "$PEER_DIR/run.sh" ) >"$work/peer.out" 2>&1 || peer_rc=$?
sed 's/^/[argo] /' "$work/peer.out" >&2
kubectl delete namespace argo scale --ignore-not-found --wait=false >/dev/null 2>&1 || true
if [ "$argo_crds_before" = 0 ]; then
  kubectl delete -k "$(go mod download -json "github.com/argoproj/argo-workflows/v3@${ARGO_VERSION:-v3.7.9}" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')/manifests/base/crds/minimal" \
    --ignore-not-found --wait=false >/dev/null 2>&1 || true
fi

python3 - "$work/ours.json" "$work/peer.out" "$peer_rc" "${ARGO_VERSION:-v3.7.9}" "$ARGO_REQUEUE" <<'PY'
import json, re, sys
ours = json.load(open(sys.argv[1]))
out = open(sys.argv[2]).read()
rc, version, requeue = int(sys.argv[3]), sys.argv[4], sys.argv[5]
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
PY
