#!/usr/bin/env bash
# Prints the argocd-cm entries that install the health checks of this directory
# (<group>/<kind>/health.lua, in the layout of argo-cd's resource_customizations/), as a merge
# patch of argocd-cm's data:
#   kubectl -n argocd patch configmap argocd-cm --type merge --patch-file <(deploy/argocd/argocd-cm.sh)
# The book's GitOps chapter (docs/src/gitops.md) shows its output; a test checks that the two agree.
set -euo pipefail
export LC_ALL=C   # the glob's order, whatever the locale
cd "$(dirname "${BASH_SOURCE[0]}")"
echo "data:"
for check in */*/health.lua; do
  group="${check%%/*}"
  kind="${check#*/}"
  kind="${kind%%/*}"
  echo "  resource.customizations.health.${group}_${kind}: |"
  sed 's/^\(.\)/    \1/' "${check}"
done
