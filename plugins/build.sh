#!/usr/bin/env bash
# Builds the built-in workflow types and the test plugins as WebAssembly components:
#   target/plugins/<type>.wasm        pre-check, setup, post-check, at, decommission (what the operator ships)
#   target/test-plugins/<name>.wasm   hostile, sleepy-init, sleepy-info, recursive-schema, contract-v0-1, contract-v0-2,
#                                     wrong-contract, no-export, pre-check-v2 (host tests)
# Called by `make plugins`. The toolchain and the wasm32-wasip2 target are the ones
# rust-toolchain.toml names: rustup installs a missing toolchain with its targets on first use,
# and the target is added here when the toolchain is there without it. Works from any cwd;
# respects CARGO_TARGET_DIR (a relative one is taken from the repository root, where cargo runs)
# and CARGO.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-target}"
[[ "$target_dir" == /* ]] || target_dir="$repo/$target_dir"
cargo="${CARGO:-cargo}"
wasm_target=wasm32-wasip2

# <crate name>:<output file>, relative to $target_dir.
builtins=(
    workflow-plugin-pre-check:plugins/pre-check.wasm
    workflow-plugin-setup:plugins/setup.wasm
    workflow-plugin-post-check:plugins/post-check.wasm
    workflow-plugin-at:plugins/at.wasm
    workflow-plugin-decommission:plugins/decommission.wasm
)
test_plugins=(
    test-plugin-hostile:test-plugins/hostile.wasm
    test-plugin-sleepy-init:test-plugins/sleepy-init.wasm
    test-plugin-sleepy-info:test-plugins/sleepy-info.wasm
    test-plugin-recursive-schema:test-plugins/recursive-schema.wasm
    test-plugin-wrong-contract:test-plugins/wrong-contract.wasm
    test-plugin-no-export:test-plugins/no-export.wasm
    test-plugin-pre-check-v2:test-plugins/pre-check-v2.wasm
    test-plugin-contract-v0-1:test-plugins/contract-v0-1.wasm
    test-plugin-contract-v0-2:test-plugins/contract-v0-2.wasm
)
all=("${builtins[@]}" "${test_plugins[@]}")

# In the repository, so that rustup acts on the toolchain rust-toolchain.toml pins.
if command -v rustup >/dev/null 2>&1 &&
    ! (cd "$repo" && rustup target list --installed 2>/dev/null) | grep -qx "$wasm_target"; then
    echo "plugins/build.sh: adding the Rust target $wasm_target" >&2
    if ! (cd "$repo" && rustup target add "$wasm_target"); then
        echo "plugins/build.sh: rustup could not add $wasm_target to the toolchain of" \
            "$repo/rust-toolchain.toml" >&2
        exit 1
    fi
fi

packages=()
for entry in "${all[@]}"; do
    packages+=(-p "${entry%%:*}")
done

(cd "$repo" && "$cargo" build --profile plugin --target "$wasm_target" "${packages[@]}")

mkdir -p "$target_dir/plugins" "$target_dir/test-plugins"
for entry in "${all[@]}"; do
    crate="${entry%%:*}"
    out="$target_dir/${entry#*:}"
    built="$target_dir/$wasm_target/plugin/${crate//-/_}.wasm"
    if [[ ! -f "$built" ]]; then
        echo "plugins/build.sh: cargo did not produce $built" >&2
        exit 1
    fi
    # Through a temporary file and a rename, so a watcher never sees half a plugin.
    cp "$built" "$out.tmp"
    mv -f "$out.tmp" "$out"
    printf '%8d bytes (%3d KiB)  %s\n' "$(stat -c %s "$out")" "$(($(stat -c %s "$out") / 1024))" \
        "${out#"$repo"/}"
done
