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
SAY_TAG=bench
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

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
  port="$(free_ports 1)"
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

python3 scripts/bench_report.py ours \
  --sample-times "$work/sample-times" --n "$N" \
  --t0 "$t0" --t-applied "$t_applied" --t1 "$t1" \
  --rss-kib "$hwm_kib" --cpu-ticks "$ticks" --clk-tck "$hz" \
  --workflows "$workflows" --pods "$pods" --completed "$completed" --failed "$failed" \
  --metrics "$work/metrics.txt" \
  --apiserver-before "$work/apiserver-before.txt" --apiserver-after "$work/apiserver-after.txt" \
  --cpu-before "$work/cpu-before.txt" --cpu-after "$work/cpu-after.txt" \
  --json-out "$work/ours.json"

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

python3 scripts/bench_report.py side-by-side --ours "$work/ours.json" --peer-out "$work/peer.out" \
  --peer-rc "$peer_rc" --argo-version "${ARGO_VERSION:-v3.7.9}" --argo-requeue "$ARGO_REQUEUE"
