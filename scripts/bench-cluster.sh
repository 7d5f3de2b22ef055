#!/usr/bin/env bash
# make bench-cluster: how fast the operator runs groups on the local cluster. It is the build to
# ship, cargo's `dist` profile (release with fat LTO: about ten minutes to link after a change);
# PROFILE=release measures the release build instead.
#
#   N=100 scripts/bench-cluster.sh        the seed sample alone (RUNS times), then N copies at once
#
# Prints one table: the seed sample's apply-to-Completed time (min/median/max over RUNS runs),
# then for N copies applied at once: wall time, groups/s, the operator's peak RSS (VmHWM) and
# CPU seconds (and ms per step), the step start latency (p50/p99: from the operator seeing a
# step's dependency finish to its pod created), API requests per step, and the count of
# Workflows and step pods (exactly 3N and 5N: nothing duplicated). A figure, not a test: nothing here fails on a slow run.
#
#   PEER=argo N=100 scripts/bench-cluster.sh     then Argo Workflows on the same cluster, side by side
#   PEER=tekton N=100 scripts/bench-cluster.sh   then Tekton Pipelines, side by side
#   PEER=all N=100 scripts/bench-cluster.sh      then both, one table with a ratio column per peer
#   OPERATOR_ARGS="--concurrent-reconciles 16" N=100 scripts/bench-cluster.sh   other operator flags
#   KEEP_WORK=1 RUST_LOG=info ...                 keep the operator logs (the path is printed)
#
# The N copies act on targets of their own. Then a contended run: CONTENDED_N (default 100)
# groups over CONTENDED_TARGETS (default 10) shared targets, which per-target locks make take
# turns: its wall time against the ideal (groups per target x the sample's median), overlaps
# (pods of two groups on one target at once, from a pod watch: 0 expected), API writes per step,
# peak RSS and the lock Leases left. CONTENDED_N=0 skips it. Then a wide run: one group of
# WIDE_TARGETS (default 5000) targets, the time until it holds its Leases. WIDE_TARGETS=0 skips it.
#
# The peers run right after ours, one after another, each with its peer harness: an optional extra
# this repository does not carry, found in PEER_DIR (by default ../shared/peers beside the
# checkout), which holds argo/ and tekton/, each a build.sh (builds the peer's controller from the
# Go module proxy) and a run.sh (measures it). Each run.sh measures its peer on the equivalent of
# the seed sample, 5 pods one after another: the sample RUNS times, then <PEER>_N (default N) at
# once, each phase with a fresh controller run out of cluster like ours, and gives up on the N at
# once after SCALE_TIMEOUT_S (default 1500) seconds, saying how many had finished.
#   - Argo Workflows' workflow-controller: one Workflow, a 5-task linear DAG; at
#     DEFAULT_REQUEUE_TIME=ARGO_REQUEUE (default 100ms, Argo's fastest; Argo's default is 10s), with
#     Argo's default client rate limit (QPS 20, burst 30). Namespaces `argo` and `scale`.
#   - Tekton Pipelines' controller: one PipelineRun, a chain of 5 one-step Tasks; twice, at Tekton's
#     defaults (client rate limit QPS 20, burst 20), then at --kube-api-qps TEKTON_QPS
#     --kube-api-burst TEKTON_BURST (default 50 and 100, the setting of its best figure so far;
#     Tekton doubles both). Namespaces `tekton` and `scale`, and `tekton-pipelines` for its configuration. Its
#     controller serves probes on port 8080, which must be free.
# Each runs in a throwaway clone, on this cluster: the clone's .local-cluster is this one, and
# run.sh's `make cluster-down` / `make cluster-up` only check that the cluster is up (it is never
# stopped). The peers' namespaces must not exist beforehand; each is deleted after its run, and the
# next run waits until it is gone; a peer's CRDs go at the end, if this run installed them. Then
# one table: ours, and each peer run with its settings and the ratio ours/peer.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
N="${N:-100}"
RUNS="${RUNS:-10}"
PEER="${PEER:-}"
PEER_DIR="${PEER_DIR:-$(dirname "$ROOT")/shared/peers}"
ARGO_N="${ARGO_N:-$N}"
ARGO_REQUEUE="${ARGO_REQUEUE:-100ms}"
ARGO_VERSION="${ARGO_VERSION:-v3.7.9}"
TEKTON_VERSION="${TEKTON_VERSION:-v1.15.1}"
export ARGO_VERSION TEKTON_VERSION # the peers' build.sh and run.sh read them too
TEKTON_N="${TEKTON_N:-$N}"
TEKTON_QPS="${TEKTON_QPS:-50}"
TEKTON_BURST="${TEKTON_BURST:-100}"
SCALE_TIMEOUT_S="${SCALE_TIMEOUT_S:-1500}"
STATE="${WORKFLOW_CLUSTER_DIR:-$ROOT/.local-cluster}"
export KUBECONFIG="$STATE/kubeconfig"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
PROFILE="${PROFILE:-dist}"
BIN="$TARGET/$PROFILE/workflow-operator"
# Compiled plugins kept across the operator's starts, as a deployment keeps them across restarts.
COMPILE_CACHE="${COMPILE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/workflow-operator/plugin-compile-cache}"
SAMPLE="$ROOT/examples/workflowgroup-sample.yaml"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
LOG_TAG=bench

case "$PEER" in
  "") peers=() ;;
  argo | tekton) peers=("$PEER") ;;
  all) peers=(argo tekton) ;;
  *) log "unknown PEER=$PEER (argo, tekton or all)"; exit 2 ;;
esac
for peer in "${peers[@]+"${peers[@]}"}"; do
  if [ ! -x "$PEER_DIR/$peer/run.sh" ] || [ ! -x "$PEER_DIR/$peer/build.sh" ]; then
    log "PEER=$PEER runs the peer harness $peer/ (run.sh and build.sh), which this repository does"
    log "not carry: looked for $PEER_DIR/$peer/run.sh (PEER_DIR=$PEER_DIR). Set PEER_DIR to the"
    log "directory that holds argo/ and tekton/."
    exit 1
  fi
done
has_peer() { [[ " ${peers[*]-} " == *" $1 "* ]]; }
if has_peer tekton && ! port_free 8080; then
  log "port 8080 is in use: Tekton's controller serves its probes there (not configurable)"
  exit 1
fi
for peer in "${peers[@]+"${peers[@]}"}"; do
  log "building the $peer peer's controller (cached after the first build)"
  "$PEER_DIR/$peer/build.sh" | tail -1 >&2
done
log "building the operator (cargo profile $PROFILE)"
cargo build -q --profile "$PROFILE" -p workflow-operator
tests/cluster/cluster.sh up >&2
if has_peer tekton && ! (cd tests/cluster/kwok && sha256sum -- *.yaml) | cmp -s - "$STATE/kwok-stages.sha256"; then
  log "the cluster in $STATE runs kwok with other stages than tests/cluster/kwok/ (kwok reads them"
  log "only at start), so it may leave Tekton's pods running for ever: restart it"
  log "(WORKFLOW_CLUSTER_DIR=$STATE tests/cluster/cluster.sh down) and run again"
  exit 1
fi

# wait_namespaces_gone <namespace>...: a previous run's, still being deleted, is waited for (10
# minutes at most); one in use is refused (the peer's figures would count what is in it).
not_terminating() { [ "$(kubectl get namespace "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" != Terminating ]; }
wait_namespaces_gone() {
  local peer_ns
  for peer_ns in "$@"; do
    WAIT_INTERVAL=1 wait_until 600 "namespace $peer_ns to be deleted" not_terminating "$peer_ns" || true
    if kubectl get namespace "$peer_ns" >/dev/null 2>&1; then
      log "namespace $peer_ns exists (a previous peer run?): delete it first, a peer's figures would count what is in it"
      return 1
    fi
  done
}
for peer in "${peers[@]+"${peers[@]}"}"; do
  case "$peer" in
    argo) wait_namespaces_gone argo scale || exit 1 ;;
    tekton) wait_namespaces_gone tekton scale || exit 1 ;;
  esac
done
# A previous run's own namespaces still being deleted (its N groups' goes last, without
# waiting) are waited for too: deleting their thousands of pods is load the sample would measure.
for old_ns in $(kubectl get namespaces --no-headers 2>/dev/null | awk '$1 ~ /^bench-/ && $2 == "Terminating" {print $1}'); do
  WAIT_INTERVAL=1 wait_until 600 "namespace $old_ns (a previous run's) to be deleted" not_terminating "$old_ns" || true
done
install_crds >/dev/null
prime_creates "$SAMPLE"

work="$(mktemp -d)"
operator_pid=""
n_namespace=""
cleanup() {
  [ -n "$operator_pid" ] && kill "$operator_pid" 2>/dev/null || true
  [ -n "${group_watch:-}" ] && kill "$group_watch" 2>/dev/null || true
  # The N groups' namespace goes at the very end (after Argo's run: its deletion is load).
  [ -n "$n_namespace" ] && kubectl delete namespace "$n_namespace" --wait=false >/dev/null 2>&1 || true
  if [ -n "${KEEP_WORK:-}" ]; then log "kept the operator logs in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# shellcheck source=scripts/bench-common.sh
source scripts/bench-common.sh

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
kubectl delete namespace "$ns" --timeout=180s >/dev/null || log "namespace $ns is still being deleted"

# --- N copies at once ----------------------------------------------------------------------
ns="bench-n$N-$(date +%s)"
fresh_namespace "$ns"
n_namespace="$ns"
start_operator "$ns"
# Each copy on three targets of its own (10.<i/250>.<i%250>.1-3): no group waits for another's
# lock, as in a fleet where groups act on different machines. (The contended run below shares.)
python3 scripts/groups.py copies --sample "$SAMPLE" --count "$N" >"$work/groups.yaml"
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
# The operator's CPU until now is its start (the plugins loaded from the compile cache, or
# compiled on a first run): shown apart from what the N groups cost.
ticks_started=$(awk '{print $14 + $15}' "/proc/$operator_pid/stat")
t0=$(date +%s.%N)
kubectl -n "$ns" apply -f "$work/groups.yaml" >/dev/null
t_applied=$(date +%s.%N)
wait_groups_finished "$ns" "$N"
t1=$finished_at
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
  --rss-kib "$hwm_kib" --cpu-ticks "$ticks" --cpu-ticks-started "$ticks_started" --clk-tck "$hz" \
  --workflows "$workflows" --pods "$pods" --completed "$completed" --failed "$failed" \
  --metrics "$work/metrics.txt" \
  --apiserver-before "$work/apiserver-before.txt" --apiserver-after "$work/apiserver-after.txt" \
  --cpu-before "$work/cpu-before.txt" --cpu-after "$work/cpu-after.txt" \
  --json-out "$work/ours.json"

# --- contended: CONTENDED_N groups over CONTENDED_TARGETS shared targets -------------------------
# Each group is the seed sample on one target, target i % CONTENDED_TARGETS: the groups on one
# target must take turns (per-target locks), those on different targets run at once. Who ran
# when comes from a watch of the pods, in the API server's order of events.
if [ "${CONTENDED_N:-100}" -gt 0 ]; then
  cn="${CONTENDED_N:-100}" ct="${CONTENDED_TARGETS:-10}"
  # Gone first: the N part's deletion (its pods, Workflows and groups) would be load during the
  # contended run, and its figure would depend on how big the N part was.
  kubectl delete namespace "$n_namespace" --timeout=600s >/dev/null 2>&1 ||
    log "namespace $n_namespace is still being deleted"
  n_namespace=""
  ns="bench-contended-$(date +%s)"
  fresh_namespace "$ns"
  n_namespace="$ns"
  start_operator "$ns"
  python3 scripts/groups.py contended --sample "$SAMPLE" --count "$cn" --targets "$ct" >"$work/contended.yaml"
  # The client itself, not the `kubectl` function: $! is then the process the kill stops.
  "$KUBECTL" -n "$ns" get pods --watch --output-watch-events -o json --request-timeout=0 >"$work/contended-watch.json" 2>/dev/null &
  watch_pid=$!
  sleep 1.5
  t0=$(date +%s.%N)
  kubectl -n "$ns" apply -f "$work/contended.yaml" >/dev/null
  wait_groups_finished "$ns" "$cn"
  t1=$finished_at
  sleep 1 # the watch's last events
  kill "$watch_pid" 2>/dev/null || true
  wait "$watch_pid" 2>/dev/null || true
  hwm_kib=$(awk '/VmHWM/ {print $2}' "/proc/$operator_pid/status")
  curl -fsS "http://127.0.0.1:$port/metrics" >"$work/contended-metrics.txt" || true
  # The locks this run's groups still hold (in the operator's namespace, the kubeconfig's).
  locks_left=$(kubectl get leases -l workflow.rxg456.cn/lock \
    -o jsonpath='{range .items[*]}{.metadata.annotations.workflow\.rxg456\.cn/holder}{"\n"}{end}' |
    grep -c "^$ns/" || true)
  stop_operator
  python3 scripts/bench_report.py contended --n "$cn" --targets "$ct" \
    --sample-times "$work/sample-times" --t0 "$t0" --t1 "$t1" --rss-kib "$hwm_kib" \
    --completed "$completed" --failed "$failed" --metrics "$work/contended-metrics.txt" \
    --watch "$work/contended-watch.json" --locks-left "$locks_left"
fi

# --- wide: one group of WIDE_TARGETS targets taking its locks --------------------------------
# The seed sample on WIDE_TARGETS (default 5000) targets of its own: the time from `kubectl
# apply` to its first step pod, which the operator creates once it holds a Lease per target.
# WIDE_TARGETS=0 skips it.
if [ "${WIDE_TARGETS:-5000}" -gt 0 ]; then
  wt="${WIDE_TARGETS:-5000}"
  kubectl delete namespace "$n_namespace" --wait=false >/dev/null 2>&1 || true
  n_namespace=""
  ns="bench-wide-$(date +%s)"
  fresh_namespace "$ns"
  n_namespace="$ns"
  start_operator "$ns"
  python3 scripts/groups.py wide --sample "$SAMPLE" --targets "$wt" >"$work/wide.yaml"
  t0=$(date +%s.%N)
  kubectl -n "$ns" apply --server-side -f "$work/wide.yaml" >/dev/null
  first_pod() { [ -n "$(kubectl -n "$ns" get pods -o name 2>/dev/null | head -1)" ]; }
  WAIT_INTERVAL=0.05 wait_until 600 "the wide group's first step pod" first_pod
  t1=$(date +%s.%N)
  uid=$(kubectl -n "$ns" get workflowgroups.workflow.rxg456.cn wide -o jsonpath='{.metadata.uid}')
  held=$(kubectl get leases -l "workflow.rxg456.cn/lock-holder=$uid" -o name | wc -l)
  took=$(grep -o '"locks":[0-9]*\|locks=[0-9]*' "$work/operator-$ns.log" | head -1 || true)
  printf 'wide: a group of %s targets: kubectl apply -> its first step pod %.2f s; Leases it holds %s (operator: %s)\n' \
    "$wt" "$(echo "$t1 - $t0" | bc)" "$held" "${took:-no took-locks line}"
  # Deleted while the operator runs, which gives its Leases back: a namespace-scoped operator
  # leaves the locks of groups in other namespaces alone, so any left would block the next run.
  kubectl -n "$ns" delete workflowgroups.workflow.rxg456.cn wide --timeout=300s >/dev/null || true
  leases_gone() { [ -z "$(kubectl get leases -l "workflow.rxg456.cn/lock-holder=$uid" -o name)" ]; }
  WAIT_INTERVAL=0.5 wait_until 120 "the wide group's Leases to be given back" leases_gone || true
  stop_operator
fi

[ "${#peers[@]}" -gt 0 ] || exit 0

# --- the peers, on the same cluster, right after ours ---------------------------------------------
# Each run.sh wants a workflow-operator checkout of its own (it drops its kwok stage into
# tests/cluster/kwok/ for its run) and starts with `make cluster-down; make cluster-up`: in a
# throwaway clone whose .local-cluster is this cluster, with a `make` in front on PATH that turns
# those two into "check that the cluster is up". The running kwok already completes the peers' pods
# after 200 ms (tests/cluster/kwok/pod-complete.yaml takes every pod owned by a `Workflow`, Argo's
# kind too, or a `TaskRun`), so the stage run.sh adds (the same, by label or by owner) is not needed
# and not loaded.
clone="$work/peer-clone"
git clone -q "$ROOT" "$clone"
ln -s "$STATE" "$clone/.local-cluster"
mkdir -p "$work/peer-bin"
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
module_dir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'; }
argo_crds_before=0 tekton_crds_before=0 tekton_ns_before=0
kubectl get crd workflows.argoproj.io >/dev/null 2>&1 && argo_crds_before=1
kubectl get crd pipelineruns.tekton.dev >/dev/null 2>&1 && tekton_crds_before=1
kubectl get namespace tekton-pipelines >/dev/null 2>&1 && tekton_ns_before=1

peer_reports=()
# run_peer <label> <harness> "<namespaces>" [VAR=value...]: the harness's run.sh in the clone with
# those variables; its output in $work/<label>.out, its figures in $work/<label>.json. Its
# namespaces are deleted afterwards (the next run waits until they are gone).
run_peer() {
  local label="$1" harness="$2" namespaces="$3" rc=0
  shift 3
  # shellcheck disable=SC2086 # a list of namespaces
  if wait_namespaces_gone $namespaces; then
    ( cd "$clone" && env PATH="$work/peer-bin:$PATH" KEEP_CLUSTER=1 MODE=both SEED_RUNS="$RUNS" \
        SCALE_TIMEOUT_S="$SCALE_TIMEOUT_S" PEER_LOG_DIR="$work/$label-logs" KUBECTL="$KUBECTL" \
        "$@" "$PEER_DIR/$harness/run.sh" ) >"$work/$label.out" 2>&1 || rc=$?
  else
    echo "FAIL: namespaces $namespaces were still there 10 minutes after the previous run: not run" >"$work/$label.out"
    rc=1
  fi
  sed "s/^/[$label] /" "$work/$label.out" >&2
  # shellcheck disable=SC2086 # a list of namespaces
  kubectl delete namespace $namespaces --ignore-not-found --wait=false >/dev/null 2>&1 || true
  python3 scripts/bench_report.py peer --harness "$harness" --output "$work/$label.out" \
    --exit-status "$rc" --scale-timeout-s "$SCALE_TIMEOUT_S" --json-out "$work/$label.json"
  peer_reports+=(--peer "$work/$label.json")
}

for peer in "${peers[@]}"; do
  case "$peer" in
    argo)
      log "Argo Workflows: ${RUNS} seed runs, then ${ARGO_N} workflows at once, DEFAULT_REQUEUE_TIME=${ARGO_REQUEUE}"
      run_peer argo argo "argo scale" ARGO_VERSION="$ARGO_VERSION" SCALE_N="$ARGO_N" \
        DEFAULT_REQUEUE_TIME="$ARGO_REQUEUE"
      ;;
    tekton)
      log "Tekton Pipelines at its defaults: ${RUNS} seed runs, then ${TEKTON_N} PipelineRuns at once"
      run_peer tekton tekton "tekton scale" TEKTON_VERSION="$TEKTON_VERSION" SCALE_N="$TEKTON_N" \
        TEKTON_QPS= TEKTON_BURST=
      log "Tekton Pipelines at --kube-api-qps ${TEKTON_QPS} --kube-api-burst ${TEKTON_BURST}: the same"
      run_peer tekton-qps tekton "tekton scale" TEKTON_VERSION="$TEKTON_VERSION" SCALE_N="$TEKTON_N" \
        TEKTON_QPS="$TEKTON_QPS" TEKTON_BURST="$TEKTON_BURST"
      ;;
  esac
done
if has_peer argo && [ "$argo_crds_before" = 0 ]; then
  kubectl delete -k "$(module_dir "github.com/argoproj/argo-workflows/v3@${ARGO_VERSION}")/manifests/base/crds/minimal" \
    --ignore-not-found --wait=false >/dev/null 2>&1 || true
fi
if has_peer tekton; then
  [ "$tekton_crds_before" = 1 ] ||
    kubectl delete -f "$(module_dir "github.com/tektoncd/pipeline@${TEKTON_VERSION}")/config/300-crds" \
      --ignore-not-found --wait=false >/dev/null 2>&1 || true
  [ "$tekton_ns_before" = 1 ] ||
    kubectl delete namespace tekton-pipelines --ignore-not-found --wait=false >/dev/null 2>&1 || true
fi

python3 scripts/bench_report.py side-by-side --ours "$work/ours.json" "${peer_reports[@]}"
