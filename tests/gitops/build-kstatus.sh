#!/usr/bin/env bash
# Builds the kstatus helper (tests/gitops/kstatus: the real sigs.k8s.io/cli-utils kstatus
# library that Flux and kpt wait with) once per cli-utils version and source, into a cache
# outside the repository, with the Go settings of tests/cluster/build.sh.
# Prints the binary's path on the last line of stdout.
# Usage: tests/gitops/build-kstatus.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${HERE}/../../scripts/lib.sh"
SRC="${HERE}/kstatus"
VERSION="$(awk '$1 == "require" && $2 == "sigs.k8s.io/cli-utils" { print $3 }' "${SRC}/go.mod")"
if [[ -z "${VERSION}" ]]; then
  echo "build-kstatus.sh: error: no sigs.k8s.io/cli-utils version in ${SRC}/go.mod" >&2
  exit 1
fi
# Keyed by the version and the source, so that an edit of main.go builds anew.
SOURCE_HASH="$(cat "${SRC}/go.mod" "${SRC}/main.go" | sha256sum | cut -c1-12)"
CACHE_ROOT="${WORKFLOW_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/workflow-operator}"
DIR="${CACHE_ROOT}/kstatus-cli-utils-${VERSION}-${SOURCE_HASH}"
BIN="${DIR}/bin/kstatus"

built_once "${DIR}" "${BIN}"

need_go "the kstatus helper of the GitOps tests"
export GOFLAGS="${GOFLAGS:-} -mod=mod"

log "building the kstatus helper (cli-utils ${VERSION}, $(go version)) into ${DIR}"
mkdir -p "${DIR}/build" "${DIR}/bin"
cp "${SRC}/go.mod" "${SRC}/main.go" "${DIR}/build/"
rm -f "${DIR}/build/go.sum"
(cd "${DIR}/build" && go mod tidy >&2 && go build -trimpath -ldflags "-s -w" -o "${BIN}.tmp" . >&2)
mv "${BIN}.tmp" "${BIN}"
echo "${BIN}"
