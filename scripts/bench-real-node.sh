#!/usr/bin/env bash
# The seed's sample group on the local cluster's real node, against the same five pods run one
# after another by hand, in one run:
#
#   RUNS=5 scripts/bench-real-node.sh      (make bench-real-node)
#
# 1. By hand: five pods, each `kubectl create` then `kubectl wait` until Succeeded before the
#    next, as a script would run the sample's five steps without the operator.
# 2. The operator (release build, out of cluster, watching one namespace): the seed's sample
#    applied unchanged but for its pod template, which puts the steps on the real node and
#    gives them the five scripts the seed's templates name (`validate-nodes.sh`, ...), from a
#    ConfigMap on their PATH; `kubectl wait` until the group is Completed.
#
# Both run the same scripts in the same image with the same volumes, so the difference is
# what the operator adds to five real pod round trips. Starts the local cluster with its real
# node when it is not up (WORKFLOW_REAL_NODE=1). Prints min/median/max of each and of the
# difference.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
RUNS="${RUNS:-5}"
STATE="${WORKFLOW_CLUSTER_DIR:-$ROOT/.local-cluster}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release/workflow-operator"
SAMPLE="$ROOT/examples/workflowgroup-sample.yaml"
export SAY_TAG=bench-real-node

WORKFLOW_REAL_NODE=1 tests/cluster/cluster.sh up >&2
export KUBECONFIG="$STATE/kubeconfig"
kubectl get nodes -l workflow.rxg456.cn/node=real -o name | grep -q . \
  || { say "the cluster in $STATE has no real node (restart it with WORKFLOW_REAL_NODE=1)"; exit 1; }
say "building the release operator"
cargo build -q --release -p workflow-operator
install_crds >/dev/null

work="$(mktemp -d)"
ns="bench-real-$(date +%s)"
operator_pid=""
cleanup() {
  if [ -n "$operator_pid" ]; then kill "$operator_pid" 2>/dev/null || true; fi
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
kubectl create namespace "$ns" >/dev/null
for _ in $(seq 1 100); do
  kubectl -n "$ns" get serviceaccount default >/dev/null 2>&1 && break
  sleep 0.1
done

# The scripts the seed's templates name: each checks that its step sees the group's targets.
scripts=(validate-nodes check-network install-packages configure-nodes verify-installation)
args=()
for s in "${scripts[@]}"; do
  args+=("--from-literal=$s.sh=#!/bin/sh
test -s \"\$WORKFLOW_TARGETS_FILE\" && echo \"$s: \$WORKFLOW_TARGET_COUNT targets\"")
done
kubectl -n "$ns" create configmap seed-scripts "${args[@]}" >/dev/null

placement='"nodeSelector": {"workflow.rxg456.cn/node": "real"},
  "tolerations": [{"key": "workflow.rxg456.cn/real-node", "operator": "Exists", "effect": "NoSchedule"}]'
volumes='"volumes": [{"name": "scripts", "configMap": {"name": "seed-scripts", "defaultMode": 365}}]'
mounts='[{"name": "scripts", "mountPath": "/opt/seed", "readOnly": true}]'

# --- by hand ----------------------------------------------------------------------------------
# The targets file the operator gives its steps, so the scripts see the same.
kubectl -n "$ns" create configmap hand-targets \
  --from-literal=targets.json='[{"name":"node-1","ip":"192.168.1.101","role":"Master"},{"name":"node-2","ip":"192.168.1.102","role":"Worker"},{"name":"node-3","ip":"192.168.1.103","role":"Worker"}]' >/dev/null
hand_pod() {
  cat <<EOF
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "$1"},
 "spec": {"restartPolicy": "Never", "automountServiceAccountToken": false, $placement,
  "volumes": [{"name": "scripts", "configMap": {"name": "seed-scripts", "defaultMode": 365}},
              {"name": "targets", "configMap": {"name": "hand-targets"}}],
  "securityContext": {"runAsNonRoot": true, "runAsUser": 65534, "runAsGroup": 65534, "fsGroup": 65534,
                      "seccompProfile": {"type": "RuntimeDefault"}},
  "containers": [{"name": "step", "image": "busybox:1.36", "command": ["/bin/sh", "-c", "$2"],
    "env": [{"name": "PATH", "value": "/opt/seed:/usr/bin:/bin"},
            {"name": "WORKFLOW_TARGETS_FILE", "value": "/etc/workflow/targets.json"},
            {"name": "WORKFLOW_TARGET_COUNT", "value": "3"}],
    "volumeMounts": [{"name": "scripts", "mountPath": "/opt/seed", "readOnly": true},
                     {"name": "targets", "mountPath": "/etc/workflow", "readOnly": true}],
    "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
    "terminationMessagePolicy": "FallbackToLogsOnError"}]}}
EOF
}
: >"$work/hand"
for run in $(seq 1 "$RUNS"); do
  t0=$(date +%s.%N)
  for s in "${scripts[@]}"; do
    hand_pod "hand-$run-$s" "$s.sh" | kubectl -n "$ns" create -f - >/dev/null
    kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded "pod/hand-$run-$s" --timeout=120s >/dev/null
  done
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc >>"$work/hand"
  say "by hand, run $run: five pods in $(tail -1 "$work/hand") s"
done

# --- the operator -------------------------------------------------------------------------------
mkdir -p "$work/plugins"
cp "$TARGET"/plugins/{pre-check,setup,post-check}.wasm "$work/plugins/"
port="$(free_ports 1)"
"$BIN" run --namespace "$ns" --plugin-dir "$work/plugins" --http-addr "127.0.0.1:$port" \
  >"$work/operator.log" 2>&1 &
operator_pid=$!
wait_operator_started "$work/operator.log" 10 || { say "the operator did not start:"; cat "$work/operator.log" >&2; exit 1; }
template="  podTemplate: {$placement, $volumes,
    \"env\": [{\"name\": \"PATH\", \"value\": \"/opt/seed:/usr/bin:/bin\"}],
    \"volumeMounts\": $mounts}"
: >"$work/group"
for run in $(seq 1 "$RUNS"); do
  name="sample-$run"
  { sed -e "s/name: workflowgroup-sample/name: $name/" -e '/^  namespace:/d' "$SAMPLE"
    echo "$template"; } >"$work/$name.yaml"
  t0=$(date +%s.%N)
  kubectl -n "$ns" apply -f "$work/$name.yaml" >/dev/null
  if ! kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Completed "workflowgroups.workflow.rxg456.cn/$name" --timeout=120s >/dev/null; then
    say "group $name did not complete:"; kubectl -n "$ns" describe wfg "$name" >&2; exit 1
  fi
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc >>"$work/group"
  say "the operator, run $run: the sample Completed in $(tail -1 "$work/group") s"
done

python3 - "$work/hand" "$work/group" <<'PY'
import statistics, sys
hand = [float(l) for l in open(sys.argv[1])]
group = [float(l) for l in open(sys.argv[2])]
diff = [g - h for g, h in zip(group, hand)]
row = lambda xs: f"{min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f} s"
print()
print(f"| on the real node, {len(hand)} runs each (min / median / max) | |")
print("|---|---|")
print(f"| five pods one after another by hand (`kubectl create`, `kubectl wait`) | {row(hand)} |")
print(f"| the seed sample, `kubectl apply` to Completed (5 step pods) | {row(group)} |")
print(f"| the operator's cost: sample minus by hand, run by run | {row(diff)} |")
PY
