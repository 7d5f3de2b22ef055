#!/usr/bin/env bash
# Builds the real node's local images (no registry is reachable) as docker-archives that
# `ctr images import` takes, with the names pods use, into OUT_DIR:
#   busybox.tar  busybox:1.36, the step image the operator defaults to: Debian's busybox-static
#                (/bin/busybox and a symlink per applet), /etc/passwd and /etc/group, /tmp
#   pause.tar    the pod sandbox image (PAUSE_IMAGE below): tests/cluster/node/pause.c, static
# Rebuilt only when the busybox package, pause.c or this script changed (a stamp in OUT_DIR).
# Usage: tests/cluster/node/images.sh OUT_DIR
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:?usage: $0 OUT_DIR}"
BUSYBOX_IMAGE="${BUSYBOX_IMAGE:-busybox:1.36}"
PAUSE_IMAGE="${PAUSE_IMAGE:-localhost/workflow-pause:1.0}"
BUSYBOX_BIN=/bin/busybox

# shellcheck source=scripts/lib.sh
source "${HERE}/../../../scripts/lib.sh"
LOG_FD=1

for tool in umoci skopeo musl-gcc; do
  command -v "${tool}" >/dev/null 2>&1 || die "${tool} not found (tests/cluster/node.sh installs it)"
done
[[ -x "${BUSYBOX_BIN}" ]] || die "${BUSYBOX_BIN} not found (Debian package busybox-static)"
file -b "${BUSYBOX_BIN}" | grep -q 'statically linked' || die "${BUSYBOX_BIN} is not statically linked"

busybox_version="$(dpkg-query -W -f '${Version}' busybox-static 2>/dev/null || "${BUSYBOX_BIN}" | head -1)"
stamp_text="busybox=${busybox_version} ${BUSYBOX_IMAGE} ${PAUSE_IMAGE} $(cat "${HERE}/pause.c" "$0" | sha256sum | cut -c1-16)"
if [[ -f "${OUT}/.stamp" && "$(cat "${OUT}/.stamp")" == "${stamp_text}" && -f "${OUT}/busybox.tar" && -f "${OUT}/pause.tar" ]]; then
  log "cached: ${OUT}"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
mkdir -p "${OUT}"
rm -f "${OUT}/.stamp"

# Fixed times, owners and order: the same inputs give the same image digests.
EPOCH=0
CREATED="1970-01-01T00:00:00Z"
tar_layer() {
  local rootfs="$1" out="$2"
  tar -cf "${out}" --sort=name --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --mtime="@${EPOCH}" --numeric-owner --owner=0 --group=0 -C "${rootfs}" .
}

# image <name:tag> <layer.tar> <archive> <umoci config args...>: one-layer image, docker-archive.
image() {
  local ref="$1" layer="$2" archive="$3"; shift 3
  local layout="${work}/oci-${ref//[^a-z0-9]/-}"
  umoci init --layout "${layout}"
  umoci new --image "${layout}:img"
  umoci raw add-layer --image "${layout}:img" --history.created "${CREATED}" \
    --history.created_by "tests/cluster/node/images.sh" "${layer}"
  umoci config --image "${layout}:img" --no-history --created "${CREATED}" \
    --os linux --architecture amd64 "$@"
  umoci gc --layout "${layout}"
  rm -f "${archive}.tmp"
  skopeo copy --quiet "oci:${layout}:img" "docker-archive:${archive}.tmp:${ref}"
  mv "${archive}.tmp" "${archive}"
}

# busybox: the binary, a symlink per applet where Debian's busybox --install would put it.
rootfs="${work}/busybox"
mkdir -p "${rootfs}/bin" "${rootfs}/etc" "${rootfs}/tmp" "${rootfs}/root" "${rootfs}/home"
install -m 0755 "${BUSYBOX_BIN}" "${rootfs}/bin/busybox"
while read -r applet; do
  [[ -n "${applet}" && "${applet}" != bin/busybox ]] || continue
  mkdir -p "${rootfs}/$(dirname "${applet}")"
  ln -sf /bin/busybox "${rootfs}/${applet}"
done < <("${BUSYBOX_BIN}" --list-full)
printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/home:/bin/false' \
  > "${rootfs}/etc/passwd"
printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' > "${rootfs}/etc/group"
chmod 1777 "${rootfs}/tmp"
chmod 0700 "${rootfs}/root"
tar_layer "${rootfs}" "${work}/busybox-layer.tar"
image "${BUSYBOX_IMAGE}" "${work}/busybox-layer.tar" "${OUT}/busybox.tar" \
  --config.env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --config.cmd sh
log "${BUSYBOX_IMAGE}: Debian busybox-static ${busybox_version}, $("${BUSYBOX_BIN}" --list | wc -l) applets"

# pause: one static binary, run as nobody.
rootfs="${work}/pause"
mkdir -p "${rootfs}"
musl-gcc -static -Os -s -o "${rootfs}/pause" "${HERE}/pause.c"
tar_layer "${rootfs}" "${work}/pause-layer.tar"
image "${PAUSE_IMAGE}" "${work}/pause-layer.tar" "${OUT}/pause.tar" \
  --config.entrypoint /pause --config.user 65535:65535
log "${PAUSE_IMAGE}: $(stat -c %s "${rootfs}/pause") bytes"

echo "${stamp_text}" > "${OUT}/.stamp"
log "built into ${OUT}"
