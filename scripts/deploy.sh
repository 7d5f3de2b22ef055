#!/usr/bin/env bash
# Installs workflow-operator into the current cluster from the kustomize base in deploy/,
# with the image IMG (default workflow-operator:dev) and the built-in plugins of
# deploy/plugins/ (copied there by `make deploy-plugins`). Steps run in the step image beside
# it: STEP_IMG, by default workflow-step with IMG's registry and tag (workflow-step:dev).
#
# Server-side apply: a plugin ConfigMap is larger than the 256 KiB that client-side apply's
# last-applied annotation can hold.
#
#   WATCH_NAMESPACE=ns   the operator watches that namespace only (WORKFLOW_NAMESPACE)
#   APISERVER_CIDRS=...  the addresses (CIDRs or single addresses, comma- or space-separated)
#                        the API servers reach the webhook from; by default those of the
#                        `kubernetes` EndpointSlice in `default`. The NetworkPolicy
#                        (deploy/network-policy.yaml) admits only them to the webhook port.
#
# On the local cluster (tests/cluster/cluster.sh, with its real node) the image of `make image`
# is imported into the real node and the operator's pods are placed there: the base itself has
# no placement.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
IMG="${IMG:-workflow-operator:dev}"

# name[:tag][@digest], where a registry host may carry a port: the tag follows the last `/`.
name="${IMG%@*}"
digest=""
[[ "$IMG" == *@* ]] && digest="${IMG#*@}"
tag=""
last="${name##*/}"
if [[ "$last" == *:* ]]; then
  tag="${last##*:}"
  name="${name%:*}"
fi
step_name=workflow-step
[[ "$name" == */* ]] && step_name="${name%/*}/workflow-step"
STEP_IMG="${STEP_IMG:-$step_name:${tag:-latest}}"

# The local cluster's real node (a node labelled workflow.rxg456.cn/node=real): the image goes
# into its containerd, as no registry is reachable there, and the pods go to it.
real_node="$("$KUBECTL" get nodes -l workflow.rxg456.cn/node=real -o name 2>/dev/null || true)"
if [ -n "$real_node" ]; then
  archive="target/image/workflow-operator.tar"
  [ -f "$archive" ] || die "no $archive: run make image first"
  [ "$IMG" = workflow-operator:dev ] || die "the local cluster's real node only has workflow-operator:dev (make image)"
  tests/cluster/node.sh import-image "$archive"
  [ ! -f target/image/workflow-step.tar ] || tests/cluster/node.sh import-image target/image/workflow-step.tar
  echo "deploy: the local cluster: the operator's pods go to its real node ($real_node)"
fi

# The NetworkPolicy's sources of the webhook port, in place of the base's placeholder.
apiserver_addresses="${APISERVER_CIDRS:-}"
if [ -z "$apiserver_addresses" ]; then
  apiserver_addresses="$("$KUBECTL" -n default get endpointslices \
    -l kubernetes.io/service-name=kubernetes -o jsonpath='{.items[*].endpoints[*].addresses[*]}')" \
    || die "cannot read the API servers' addresses (the kubernetes EndpointSlice): set APISERVER_CIDRS"
fi
apiserver_blocks=""
for address in ${apiserver_addresses//,/ }; do
  case "$address" in
    */*) cidr="$address" ;;
    *:*) cidr="$address/128" ;;
    *) cidr="$address/32" ;;
  esac
  apiserver_blocks+="${apiserver_blocks:+, }{ipBlock: {cidr: \"$cidr\"}}"
done
[ -n "$apiserver_blocks" ] || die "no API server address found: set APISERVER_CIDRS"
echo "deploy: the webhook port admits the API servers at: ${apiserver_addresses//,/ }"

overlay="$(mktemp -d "${TMPDIR:-/tmp}/workflow-operator-deploy.XXXXXX")"
trap 'rm -rf "$overlay"' EXIT
base="$(realpath --relative-to="$overlay" "$PWD/deploy")"
{
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources: [\"$base\"]"
  echo "images:"
  echo "- name: workflow-operator"
  echo "  newName: \"$name\""
  [ -n "$tag" ] && echo "  newTag: \"$tag\""
  [ -n "$digest" ] && echo "  digest: \"$digest\""
  echo "patches:"
  echo "- target: {kind: Deployment, name: workflow-operator}"
  echo "  patch: |-"
  echo "    - op: add"
  echo "      path: /spec/template/spec/containers/0/env/-"
  echo "      value: {name: WORKFLOW_DEFAULT_IMAGE, value: \"$STEP_IMG\"}"
  echo "- target: {kind: NetworkPolicy, name: workflow-operator}"
  echo "  patch: |-"
  echo "    - op: replace"
  echo "      path: /spec/ingress/0/from"
  echo "      value: [$apiserver_blocks]"
  if [ -n "${WATCH_NAMESPACE:-}" ]; then
    echo "- target: {kind: Deployment, name: workflow-operator}"
    echo "  patch: |-"
    echo "    - op: add"
    echo "      path: /spec/template/spec/containers/0/env/-"
    echo "      value: {name: WORKFLOW_NAMESPACE, value: \"$WATCH_NAMESPACE\"}"
    # The admission webhook reviews the groups of that namespace only.
    echo "- target: {kind: ValidatingWebhookConfiguration, name: workflow-operator}"
    echo "  patch: |-"
    echo "    - op: replace"
    echo "      path: /webhooks/0/namespaceSelector"
    echo "      value: {matchLabels: {kubernetes.io/metadata.name: \"$WATCH_NAMESPACE\"}}"
  fi
  if [ -n "$real_node" ]; then
    echo "- target: {kind: Deployment, name: workflow-operator}"
    echo "  patch: |-"
    echo "    - op: add"
    echo "      path: /spec/template/spec/nodeSelector"
    echo "      value: {workflow.rxg456.cn/node: real}"
    echo "    - op: add"
    echo "      path: /spec/template/spec/tolerations"
    echo "      value: [{key: workflow.rxg456.cn/real-node, operator: Exists, effect: NoSchedule}]"
  fi
  true
} > "$overlay/kustomization.yaml"

"$KUBECTL" apply --server-side --force-conflicts -k "$overlay"
