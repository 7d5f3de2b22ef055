#!/usr/bin/env bash
# Unpacks the image that `make image` built, without a container engine or root:
#   scripts/image-rootfs.sh DIR
# DIR (absent or empty) becomes an OCI runtime bundle: DIR/rootfs is the image's root
# filesystem and DIR/config.json its runtime configuration. Prints one line: the absolute
# path of the image's entrypoint inside DIR/rootfs, so a test can run
#   "$(scripts/image-rootfs.sh "$dir")" run --plugin-dir ...
# on the host. The image is read from IMAGE_OUT/oci (default <repository>/target/image/oci),
# tag from IMAGE (default workflow-operator:dev).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

dir="${1:?usage: $0 DIR (absent or empty; receives DIR/rootfs and DIR/config.json)}"
IMAGE="${IMAGE:-workflow-operator:dev}"
layout="${IMAGE_OUT:-$ROOT/target/image}/oci"
tag="${IMAGE##*:}"
if [ "$tag" = "$IMAGE" ] || [[ "$tag" == */* ]]; then tag=latest; fi

command -v umoci >/dev/null 2>&1 || die "umoci is missing (Debian/Ubuntu: apt-get install umoci)"
[ -f "$layout/index.json" ] || die "no OCI layout at $layout: run make image first"
if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then die "$dir is not empty"; fi
[ -e "$dir" ] && rmdir "$dir"
mkdir -p "$(dirname "$dir")"
dir="$(cd "$(dirname "$dir")" && pwd)/$(basename "$dir")"

# --rootless: files are owned by the caller whoever that is; ownership in the image is kept
# in umoci's metadata only.
umoci unpack --rootless --image "$layout:$tag" "$dir" >&2

entrypoint="$(python3 "$ROOT/scripts/show.py" entrypoint --config "$dir/config.json")"
[ -x "$dir/rootfs$entrypoint" ] || die "entrypoint $entrypoint is not an executable in $dir/rootfs"
echo "$dir/rootfs$entrypoint"
