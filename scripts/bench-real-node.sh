#!/usr/bin/env bash
# The seed's sample group on the local cluster's real node against three target hosts
# (tests/cluster/target-hosts.sh: real sshd in network namespaces), against the same five step
# pods run one after another by hand, in one run:
#
#   RUNS=5 scripts/bench-real-node.sh      (make bench-real-node; root)
#
# 1. The operator (release build, out of cluster, watching one namespace): the seed's sample
#    applied unchanged but for its targets' addresses (the hosts') and its pod template (the
#    real node's placement); its steps log in to the hosts with `workflow-runner` and the
#    Secret workflow-ssh; `kubectl wait` until the group is Completed.
# 2. By hand: the five step pods of the first group's Workflows (the same image, command,
#    environment, targets file and Secret), each `kubectl create` then `kubectl wait` until
#    Succeeded before the next, as a script would run the sample's steps without the operator.
#
# Both do the same work on the same hosts, so the difference is what the operator adds to five
# real pod round trips. Starts the local cluster with its real node when it is not up
# (WORKFLOW_REAL_NODE=1) and needs the step image (make image). Prints min/median/max of each
# and of the difference.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
LOG_TAG=bench-real-node
RUNS="${RUNS:-5}"
STATE="${WORKFLOW_CLUSTER_DIR:-$ROOT/.local-cluster}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release/workflow-operator"
SAMPLE="$ROOT/examples/workflowgroup-sample.yaml"

WORKFLOW_REAL_NODE=1 tests/cluster/cluster.sh up >&2
export KUBECONFIG="$STATE/kubeconfig"
kubectl get nodes -l workflow.rxg456.cn/node=real -o name | grep -q . \
  || { log "the cluster in $STATE has no real node (restart it with WORKFLOW_REAL_NODE=1)"; exit 1; }
log "building the release operator"
cargo build -q --release -p workflow-operator
install_crds >/dev/null

bench_namespace "bench-real-$(date +%s)"
ns="$bench_ns"
WAIT_INTERVAL=0.1 wait_until 10 "the default ServiceAccount of $ns" kubectl -n "$ns" get serviceaccount default

[ -f target/image/workflow-step.tar ] || { log "no target/image/workflow-step.tar: run make image"; exit 1; }
tests/cluster/node.sh import-image target/image/workflow-step.tar >/dev/null
tests/cluster/target-hosts.sh up "$work/hosts" 3 >/dev/null
trap 'tests/cluster/target-hosts.sh down "$work/hosts" >/dev/null 2>&1 || true; bench_cleanup' EXIT
kubectl -n "$ns" create secret generic workflow-ssh --type=kubernetes.io/ssh-auth \
  --from-file=ssh-privatekey="$work/hosts/ssh-privatekey" --from-file=known_hosts="$work/hosts/known_hosts" >/dev/null

# --- the operator -------------------------------------------------------------------------------
mkdir -p "$work/plugins"
cp "$TARGET"/plugins/{pre-check,setup,post-check}.wasm "$work/plugins/"
port="$(free_ports 1)"
start_operator_bg "$BIN" "$work/operator.log" 10 --namespace "$ns" --plugin-dir "$work/plugins" \
  --http-addr "127.0.0.1:$port"
: >"$work/group"
for run in $(seq 1 "$RUNS"); do
  name="sample-$run"
  sample_on_hosts "$SAMPLE" "$work/hosts/hosts" "$name" >"$work/$name.json"
  t0=$(date +%s.%N)
  kubectl -n "$ns" apply -f "$work/$name.json" >/dev/null
  if ! kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Completed "workflowgroups.workflow.rxg456.cn/$name" --timeout=180s >/dev/null; then
    log "group $name did not complete:"; kubectl -n "$ns" describe wfg "$name" >&2; exit 1
  fi
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc >>"$work/group"
  log "the operator, run $run: the sample Completed in $(tail -1 "$work/group") s"
done
kill "$operator_pid" 2>/dev/null || true
operator_pid=""

# --- by hand ----------------------------------------------------------------------------------
# The first group's five steps, in order, as pods of their own with the same targets file.
kubectl -n "$ns" get wf -l workflow.rxg456.cn/group-name=sample-1 -o json >"$work/workflows.json"
python3 scripts/groups.py targets-of --group "$work/sample-1.json" >"$work/targets.json"
kubectl -n "$ns" create configmap hand-targets --from-file=targets.json="$work/targets.json" >/dev/null
python3 scripts/groups.py hand-pods --workflows "$work/workflows.json" --out "$work" >/dev/null
[ -f "$work/step-5.json" ] || { log "the sample's Workflows did not have five steps"; exit 1; }
: >"$work/hand"
for run in $(seq 1 "$RUNS"); do
  t0=$(date +%s.%N)
  for s in 1 2 3 4 5; do
    sed "s/STEP-$s/hand-$run-$s/" "$work/step-$s.json" | kubectl -n "$ns" create -f - >/dev/null
    kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded "pod/hand-$run-$s" --timeout=120s >/dev/null
  done
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc >>"$work/hand"
  log "by hand, run $run: five pods in $(tail -1 "$work/hand") s"
done

python3 scripts/bench_report.py real-node --group "$work/group" --hand "$work/hand"
