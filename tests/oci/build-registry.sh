#!/usr/bin/env bash
# Builds the OCI registry the plugin-pull tests push to and the operator pulls from: the
# CNCF Distribution registry (the reference implementation of the OCI distribution spec),
# from the Go module proxy, once per version, into a cache outside the repository.
# Prints the binary's path on the last line of stdout.
# Usage: tests/oci/build-registry.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${HERE}/../../scripts/lib.sh"
VERSION="v3.1.2"
CACHE_ROOT="${WORKFLOW_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/workflow-operator}"
DIR="${CACHE_ROOT}/distribution-registry-${VERSION}"
BIN="${DIR}/bin/registry"

built_once "${DIR}" "${BIN}"

need_go "the registry of the plugin-pull tests"
log "building the OCI registry (github.com/distribution/distribution/v3 ${VERSION}, $(go version)) into ${DIR}"
mkdir -p "${DIR}/bin"
GOBIN="${DIR}/build" go install -trimpath -ldflags "-s -w" \
  "github.com/distribution/distribution/v3/cmd/registry@${VERSION}" >&2
mv "${DIR}/build/registry" "${BIN}"
echo "${BIN}"
