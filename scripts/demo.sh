#!/usr/bin/env bash
# make demo: the local cluster, the CRDs, the operator, and the seed's sample WorkflowGroup run
# to Completed. Then, as root (with the local cluster's real node and the step image of `make
# image`), the same sample against three target hosts it starts (real sshd in network
# namespaces, tests/cluster/target-hosts.sh): checked, set up, joined to the cluster as Nodes
# (setup's join, with the opt-in rights of deploy/join/) and verified Ready for real. Leaves the
# cluster, the operator and the hosts (now Nodes) running; `make cluster-down` stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
STATE="$ROOT/.local-cluster"
export KUBECONFIG="$STATE/kubeconfig"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/debug/workflow-operator"
SAMPLE="$ROOT/examples/workflowgroup-sample.yaml"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

step() { printf '\n==> %s\n' "$*"; }

# watch_sample <namespace> <start> <polls>: prints each new phase of the sample group in
# <namespace>, timed from <start> (date +%s.%N), until it finishes or <polls> polls 0.2 s apart
# have passed; leaves the last phase in $last.
watch_sample() {
  local line
  last=""
  for _ in $(seq 1 "$3"); do
    line="$(kubectl -n "$1" get wfg workflowgroup-sample -o jsonpath='{.status.phase} {.status.progress}' 2>/dev/null || true)"
    if [ "$line" != "$last" ]; then
      printf '  %6.2fs  phase=%s\n' "$(echo "$(date +%s.%N) - $2" | bc)" "$line"
      last="$line"
    fi
    case "$line" in Completed*|Failed*) return ;; esac
    sleep 0.2
  done
}

# As root the cluster gets its real node, where the second part runs.
if [ "$(id -u)" = 0 ]; then export WORKFLOW_REAL_NODE="${WORKFLOW_REAL_NODE-1}"; fi
step "Starting the local cluster"
tests/cluster/cluster.sh up

step "Installing the CRDs"
install_crds

step "Starting the operator (log: .local-cluster/logs/operator.log)"
# The operator reads plugins from a directory inside .local-cluster, so `make cluster-down`
# recognises it as ours and stops it with the cluster.
mkdir -p "$STATE/plugins" "$STATE/pids" "$STATE/logs"
cp "$TARGET"/plugins/*.wasm "$STATE/plugins/"
if [ -f "$STATE/pids/operator.pid" ] && kill -0 "$(cat "$STATE/pids/operator.pid")" 2>/dev/null; then
  kill "$(cat "$STATE/pids/operator.pid")" && sleep 1
fi
port="$(free_ports 1)"
nohup "$BIN" run --plugin-dir "$STATE/plugins" --http-addr "127.0.0.1:$port" \
  >"$STATE/logs/operator.log" 2>&1 &
echo $! >"$STATE/pids/operator.pid"
wait_until 10 "the operator's /readyz" curl -fsS "http://127.0.0.1:$port/readyz" || true
echo "operator pid $(cat "$STATE/pids/operator.pid"), loaded plugins:"
curl -fsS "http://127.0.0.1:$port/plugins" | python3 scripts/show.py plugins || true

step "Applying the seed's sample WorkflowGroup"
kubectl delete -f "$SAMPLE" --ignore-not-found --wait=true >/dev/null
start=$(date +%s.%N)
kubectl apply -f "$SAMPLE"

step "Watching it run"
watch_sample default "$start" 600

step "kubectl get wfg,wf,pods"
kubectl get wfg,wf,pods
case "$last" in Completed*) ;; *) echo "the group did not complete: $last" >&2; exit 1 ;; esac

hosts_part() {
  local hosts="$STATE/target-hosts" ns=demo-hosts
  step "The same sample against three target hosts (sshd in network namespaces), on the real node: they join the cluster"
  tests/cluster/node.sh import-image target/image/workflow-step.tar >/dev/null
  tests/cluster/target-hosts.sh down "$hosts" >/dev/null 2>&1 || true
  tests/cluster/target-hosts.sh up "$hosts" 3 | sed 's/^/    /'
  kubectl delete namespace "$ns" --ignore-not-found --wait=true >/dev/null
  kubectl create namespace "$ns" >/dev/null
  kubectl -n "$ns" create secret generic workflow-ssh --type=kubernetes.io/ssh-auth \
    --from-file=ssh-privatekey="$hosts/ssh-privatekey" --from-file=known_hosts="$hosts/known_hosts" >/dev/null
  printf '%s\n' '#!/bin/sh' 'set -e' \
    'echo "$WORKFLOW_TARGET_NAME of $WORKFLOW_CLUSTER_NAME: $WORKFLOW_OS_ID $WORKFLOW_OS_VERSION, $WORKFLOW_PACKAGE_MANAGER" >/etc/node-configured' \
    'echo configured' >"$hosts/configure.sh"
  kubectl -n "$ns" create configmap node-scripts --from-file=configure.sh="$hosts/configure.sh" >/dev/null
  # The opt-in rights of deploy/join/, for the ServiceAccount workflow-node-joiner of this namespace.
  # (The file makes the namespace too; kubectl's note that `create` made it is left out.)
  sed "s/workflow-nodes/$ns/g" deploy/join/join.yaml | kubectl apply -f - 2>&1 >/dev/null \
    | { grep -v last-applied-configuration >&2 || true; }
  echo "    Secret workflow-ssh (the hosts' key and known_hosts), ConfigMap node-scripts (configure.sh),"
  echo "    ServiceAccount workflow-node-joiner with the rights of deploy/join/"
  # The kubelet the real node runs, and the images it imports (the hosts see this machine's files).
  local kubelet images
  kubelet="$(tests/cluster/build.sh --print-bin-dir)/kubelet"
  images="$(tests/cluster/node.sh images-dir)"
  step "kubectl get nodes (before)"
  kubectl get nodes
  # The sample as it is, its targets' addresses rewritten to the hosts, with what setup
  # installs and post-check verifies, and the real node's placement.
  sample_on_hosts "$SAMPLE" "$hosts/hosts" workflowgroup-sample \
    | python3 scripts/groups.py demo-join --kubelet "$kubelet" --images "$images" >"$hosts/group.json"
  python3 scripts/show.py group --file "$hosts/group.json"
  local begin
  begin=$(date +%s.%N)
  kubectl -n "$ns" apply -f "$hosts/group.json"
  watch_sample "$ns" "$begin" 900
  step "What each step reported (the Workflows' stepDetails)"
  kubectl -n "$ns" get wf -o json | python3 scripts/show.py steps
  step "On the hosts themselves (tests/cluster/target-hosts.sh exec)"
  local n
  for n in 1 2 3; do
    printf '  host-%s: %s; %s\n' "$n" \
      "$(tests/cluster/target-hosts.sh exec "$hosts" "$n" workflow-test-marker 2>&1)" \
      "$(tests/cluster/target-hosts.sh exec "$hosts" "$n" cat /etc/node-configured 2>&1)"
  done
  printf '  this machine: %s\n' "$(command -v workflow-test-marker || echo 'no workflow-test-marker (nothing was installed here)')"
  step "kubectl get nodes (after: the hosts are Nodes)"
  kubectl get nodes -o wide
  case "$last" in Completed*) ;; *) echo "the group against the hosts did not complete: $last" >&2; return 1 ;; esac
}

if [ "$(id -u)" = 0 ] && tests/cluster/node.sh status >/dev/null 2>&1 && [ -f target/image/workflow-step.tar ]; then
  hosts_part
else
  echo
  echo "(As root, after make image, make demo also runs the sample against target hosts it starts.)"
fi

cat <<EOT

Look further:
  export KUBECONFIG=$KUBECONFIG
  kubectl describe wfg workflowgroup-sample     # conditions and events
  kubectl get wf -o yaml                        # steps, stepStatus, the pinned plugin digest
  kubectl -n demo-hosts describe wf             # the run against the target hosts, per target
  curl -s http://127.0.0.1:$port/plugins        # the loaded workflow types
  curl -s http://127.0.0.1:$port/metrics        # Prometheus metrics
  tail -f $STATE/logs/operator.log
Stop everything: make cluster-down
EOT
