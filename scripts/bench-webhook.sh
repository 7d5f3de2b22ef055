#!/usr/bin/env bash
# make bench-webhook: the admission webhook's latency per review (p50/p99), with the operator
# (PROFILE=release by default; PROFILE=debug skips the release build) on the local cluster.
# The operator runs with its webhook on a loopback port and makes its certificate Secret;
# scripts/bench_webhook.py then sends COUNT (default 500) AdmissionReviews of each case over
# one kept-alive TLS connection, as the API server does. A figure, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
COUNT="${COUNT:-500}"
PROFILE="${PROFILE:-release}"
export KUBECONFIG="${KUBECONFIG_OVERRIDE:-$ROOT/.local-cluster/kubeconfig}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/$PROFILE/workflow-operator"
SAY_TAG=bench
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

for t in pre-check setup post-check; do
  [ -f "$TARGET/plugins/$t.wasm" ] || { say "$TARGET/plugins/$t.wasm is missing: run make plugins"; exit 1; }
done
say "building the $PROFILE operator"
if [ "$PROFILE" = release ]; then cargo build -q --release -p workflow-operator; else cargo build -q -p workflow-operator; fi
tests/cluster/cluster.sh up >&2
install_crds >/dev/null

work="$(mktemp -d)"
operator_pid=""
ns="bench-webhook-$$"
cleanup() {
  [ -n "$operator_pid" ] && kill "$operator_pid" 2>/dev/null || true
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
kubectl create namespace "$ns" >/dev/null

read -r http_port webhook_port <<<"$(free_ports 2)"
"$BIN" run --namespace "$ns" --plugin-namespace "$ns" --plugin-dir "$TARGET/plugins" \
  --http-addr "127.0.0.1:$http_port" --webhook-addr "127.0.0.1:$webhook_port" \
  --webhook-config-name "" >"$work/operator.log" 2>&1 &
operator_pid=$!
wait_operator_started "$work/operator.log" 60 || { cat "$work/operator.log" >&2; exit 1; }
until grep -q "serving the webhook certificate" "$work/operator.log"; do sleep 0.1; done
kubectl -n "$ns" get secret workflow-operator-webhook-tls -o jsonpath='{.data.ca\.crt}' | base64 -d >"$work/ca.crt"

echo "admission webhook latency ($PROFILE operator, loopback, $(nproc) CPUs)"
python3 scripts/bench_webhook.py --url "https://127.0.0.1:$webhook_port/validate-workflowgroup" \
  --ca "$work/ca.crt" --count "$COUNT" --metrics "http://127.0.0.1:$http_port/metrics"
