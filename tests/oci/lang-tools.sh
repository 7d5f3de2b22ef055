#!/usr/bin/env bash
# Installs what Python and JavaScript workflow types build with, once per version, into a
# cache outside the repository: componentize-py (from PyPI, in a virtualenv) and
# ComponentizeJS with the rolldown bundler (from npm), at the versions `plugin new --lang`
# writes into a new project. Prints two lines: the virtualenv's bin directory, then the
# node_modules directory.
# Usage: tests/oci/lang-tools.sh COMPONENTIZE_PY COMPONENTIZE_JS ROLLDOWN
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${HERE}/../../scripts/lib.sh"
PY_VERSION="$1" JS_VERSION="$2" ROLLDOWN_VERSION="$3"
CACHE_ROOT="${WORKFLOW_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/workflow-operator}"
PY_DIR="${CACHE_ROOT}/componentize-py-${PY_VERSION}"
JS_DIR="${CACHE_ROOT}/componentize-js-${JS_VERSION}-rolldown-${ROLLDOWN_VERSION}"

mkdir -p "${PY_DIR}" "${JS_DIR}"
exec 9>"${CACHE_ROOT}/.lang-tools.lock"
flock 9

if [[ ! -x "${PY_DIR}/venv/bin/componentize-py" ]]; then
  log "installing componentize-py ${PY_VERSION} into ${PY_DIR}"
  rm -rf "${PY_DIR}/venv"
  python3 -m venv "${PY_DIR}/venv" >&2
  "${PY_DIR}/venv/bin/pip" install --quiet --disable-pip-version-check "componentize-py==${PY_VERSION}" >&2
fi
if [[ ! -f "${JS_DIR}/.installed" ]]; then
  log "installing ComponentizeJS ${JS_VERSION} and rolldown ${ROLLDOWN_VERSION} into ${JS_DIR}"
  command -v npm >/dev/null || { echo "lang-tools.sh: error: npm not found (Node.js >= 20 is needed to build JavaScript workflow types)" >&2; exit 1; }
  printf '{"name":"lang-tools","private":true,"type":"module","devDependencies":{"@bytecodealliance/componentize-js":"%s","rolldown":"%s"}}\n' \
    "${JS_VERSION}" "${ROLLDOWN_VERSION}" > "${JS_DIR}/package.json"
  (cd "${JS_DIR}" && npm install --no-audit --no-fund --loglevel=error >&2)
  touch "${JS_DIR}/.installed"
fi
echo "${PY_DIR}/venv/bin"
echo "${JS_DIR}/node_modules"
