#!/usr/bin/env bash
# make bench-languages: what a workflow type costs by its language. Makes the same type (one
# command on every target, with a failure budget) with `plugin new` in Rust, Python
# (componentize-py) and JavaScript (ComponentizeJS), builds each as its author would, and runs
# host/benches/plugin_languages.rs on the three: size, compile, load, first and warm calls,
# memory. A figure, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
LOG_TAG=bench

version() { sed -n "s/^pub const $1: &str = \"\\(.*\\)\";/\\1/p" host/src/cli/scaffold/languages.rs; }
mapfile -t tools < <(tests/oci/lang-tools.sh "$(version COMPONENTIZE_PY)" "$(version COMPONENTIZE_JS)" "$(version ROLLDOWN)")
venv_bin="${tools[0]}" node_modules="${tools[1]}"

cargo build -q -p workflow-operator
BIN="$TARGET/debug/workflow-operator"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

log "making the type in Rust, Python and JavaScript in $work"
"$BIN" plugin new lang-bench --path "$work/rust" --sdk-path "$ROOT/plugin-sdk" >/dev/null
(cd "$work/rust" && CARGO_TARGET_DIR="$TARGET" cargo build -q --profile plugin --target wasm32-wasip2)
"$BIN" plugin new lang-bench --lang python --path "$work/python" >/dev/null
(cd "$work/python" && PATH="$venv_bin:$PATH" ./build.sh >/dev/null)
"$BIN" plugin new lang-bench --lang js --path "$work/js" >/dev/null
ln -s "$node_modules" "$work/js/node_modules"
(cd "$work/js" && node build.mjs >/dev/null)

export WORKFLOW_BENCH_PLUGINS="rust=$TARGET/wasm32-wasip2/plugin/lang_bench.wasm python=$work/python/lang-bench.wasm js=$work/js/lang-bench.wasm"
cargo bench -q -p workflow-operator --features bench --bench plugin_languages
