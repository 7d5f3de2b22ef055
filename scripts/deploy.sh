#!/usr/bin/env bash
# Installs workflow-operator into the current cluster from the kustomize base in deploy/,
# with the image IMG (default workflow-operator:dev) and the built-in plugins of
# deploy/plugins/ (copied there by `make deploy-plugins`).
#
# Server-side apply: a plugin ConfigMap is larger than the 256 KiB that client-side apply's
# last-applied annotation can hold.
set -euo pipefail
cd "$(dirname "$0")/.."
KUBECTL="${KUBECTL:-kubectl}"
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

overlay="$(mktemp -d "${TMPDIR:-/tmp}/workflow-operator-deploy.XXXXXX")"
trap 'rm -rf "$overlay"' EXIT
base="$(python3 -c 'import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$PWD/deploy" "$overlay")"
{
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources: [\"$base\"]"
  echo "images:"
  echo "- name: workflow-operator"
  echo "  newName: \"$name\""
  [ -n "$tag" ] && echo "  newTag: \"$tag\""
  [ -n "$digest" ] && echo "  digest: \"$digest\""
  true
} > "$overlay/kustomization.yaml"

"$KUBECTL" apply --server-side --force-conflicts -k "$overlay"
