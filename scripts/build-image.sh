#!/usr/bin/env bash
# Builds the operator's container image, and the step image its steps run in, without a
# container engine:
#   1. a statically linked binary for x86_64-unknown-linux-musl (cargo profile PROFILE: release
#      by default, as `make test` and `make demo` build it; PROFILE=dist for the image to publish,
#      release with fat LTO, about ten minutes more to link), in a cargo target
#      directory of its own (WORKFLOW_MUSL_TARGET_DIR, default
#      ${XDG_CACHE_HOME:-$HOME/.cache}/workflow-operator/cargo-target-musl), so it never waits
#      for the lock of the main target directory and later builds on this machine reuse it;
#   2. one layer (the binary, /etc/passwd and /etc/group with the non-root user 65532, /tmp)
#      added to an empty image with umoci, which writes the OCI layout;
#   3. archives of that image written by skopeo.
# Output, under IMAGE_OUT (default <repository>/target/image, whatever CARGO_TARGET_DIR is):
#   oci/                       OCI image layout, the image tagged with IMAGE's tag
#   workflow-operator.tar      docker-archive with the repo tag IMAGE: `ctr images import`,
#                              `kind load image-archive`, `docker load`, `skopeo copy docker-archive:`
#   workflow-operator.oci.tar  oci-archive of the same image
#   workflow-step.tar          docker-archive of the step image STEP_IMAGE (default
#                              workflow-step:<IMAGE's tag>), and workflow-step.oci.tar
# The image: entrypoint /usr/local/bin/workflow-operator, default arguments `run`,
# user 65532:65532 (nonroot), no shell. See scripts/image-rootfs.sh to unpack it.
# The step image: Debian's busybox-static (a shell and the usual commands, as busybox:1.36
# has) and /usr/local/bin/workflow-runner, the static program that runs a step's command on
# its targets over SSH (runner/); no entrypoint: a step's command is run by `/bin/sh -c`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

IMAGE="${IMAGE:-workflow-operator:dev}"
OUT="${IMAGE_OUT:-$ROOT/target/image}"
TARGET=x86_64-unknown-linux-musl
MUSL_TARGET_DIR="${WORKFLOW_MUSL_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/workflow-operator/cargo-target-musl}"
BIN_NAME=workflow-operator
PROFILE="${PROFILE:-release}"
ENTRYPOINT=/usr/local/bin/$BIN_NAME
USER_ID=65532

# IMAGE is name[:tag]; the tag (default "latest") names the image in the OCI layout.
name="${IMAGE%:*}"
tag="${IMAGE##*:}"
if [ "$name" = "$IMAGE" ] || [[ "$tag" == */* ]]; then name="$IMAGE"; tag=latest; fi

# --- tools -------------------------------------------------------------------------------
need=()
command -v umoci >/dev/null 2>&1 || need+=(umoci)
command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
command -v musl-gcc >/dev/null 2>&1 || need+=(musl-tools)
command -v file >/dev/null 2>&1 || need+=(file)
[ -x /bin/busybox ] || need+=(busybox-static)
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    die "missing ${need[*]}: install them (Debian/Ubuntu: sudo apt-get install ${need[*]}) and run again"
  fi
fi
if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
  log "adding the rust target $TARGET"
  rustup target add "$TARGET"
fi

# --- binary ------------------------------------------------------------------------------
# ring's C and assembly are compiled with musl-gcc; the Rust musl target links statically.
export CC_x86_64_unknown_linux_musl="${CC_x86_64_unknown_linux_musl:-musl-gcc}"
log "cargo build --profile $PROFILE --target $TARGET (target dir $MUSL_TARGET_DIR)"
start=$(date +%s)
CARGO_TARGET_DIR="$MUSL_TARGET_DIR" "${CARGO:-cargo}" build --profile "$PROFILE" \
  -p workflow-operator --bin "$BIN_NAME" -p workflow-runner --bin workflow-runner --target "$TARGET"
log "binaries built in $(( $(date +%s) - start )) s"
bin="$MUSL_TARGET_DIR/$TARGET/$PROFILE/$BIN_NAME"
runner="$MUSL_TARGET_DIR/$TARGET/$PROFILE/workflow-runner"

static() {
  local desc
  desc="$(file -b "$1")"
  case "$desc" in
    *"statically linked"* | *"static-pie linked"*) ;;
    *) die "$1 is not statically linked: $desc" ;;
  esac
  if ldd "$1" >/dev/null 2>&1 && ! ldd "$1" 2>&1 | grep -q 'statically linked'; then
    die "$1 has dynamic dependencies: $(ldd "$1" 2>&1)"
  fi
  echo "$desc"
}
desc="$(static "$bin")"
static "$runner" >/dev/null
static /bin/busybox >/dev/null

# --- image -------------------------------------------------------------------------------
# Timestamps come from the last commit, so the same binary gives the same image digest.
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
created="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
version="$("$bin" --version | awk '{print $NF}')"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The root filesystem of the one layer.
rootfs="$work/rootfs"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/home/nonroot"
install -m 0755 "$bin" "$rootfs$ENTRYPOINT"
cat > "$rootfs/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:$USER_ID:$USER_ID:nonroot:/home/nonroot:/sbin/nologin
EOF
cat > "$rootfs/etc/group" <<EOF
root:x:0:
nonroot:x:$USER_ID:
EOF
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
chmod 1777 "$rootfs/tmp"
chmod 0700 "$rootfs/home/nonroot"
chmod 0755 "$rootfs/usr" "$rootfs/usr/local" "$rootfs/usr/local/bin" "$rootfs/etc" "$rootfs/home"

# Owned by root except the user's home; fixed order and times: no engine, no root needed.
layer="$work/layer.tar"
tar_opts=(--sort=name --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime
  --mtime="@$epoch" --numeric-owner -C "$rootfs")
tar -cf "$layer" "${tar_opts[@]}" --owner=0 --group=0 --no-recursion \
  etc etc/group etc/passwd home tmp usr usr/local usr/local/bin "usr/local/bin/$BIN_NAME"
tar -rf "$layer" "${tar_opts[@]}" --owner="$USER_ID" --group="$USER_ID" --no-recursion home/nonroot

mkdir -p "$OUT"
# one_layer_image <layout> <name> <tag> <archive base> <layer> <history comment> <umoci config
# flags...>: an image of that one layer in the OCI layout <layout>, and <archive base>.tar
# (docker-archive) and <archive base>.oci.tar (oci-archive) tagged <name>:<tag>.
one_layer_image() {
  local layout="$1" ref_name="$2" ref_tag="$3" archive="$4" layer="$5" comment="$6"
  shift 6
  rm -rf "$layout" "$archive.tar" "$archive.oci.tar"
  umoci init --layout "$layout"
  umoci new --image "$layout:$ref_tag"
  umoci raw add-layer --image "$layout:$ref_tag" \
    --history.created "$created" --history.created_by "scripts/build-image.sh" \
    --history.comment "$comment" "$layer"
  umoci config --image "$layout:$ref_tag" --no-history \
    --created "$created" --author "workflow-operator" --os linux --architecture amd64 \
    --config.workingdir / "$@" \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.revision=$revision" \
    --config.label "org.opencontainers.image.licenses=Apache-2.0" \
    --config.label "org.opencontainers.image.created=$created"
  umoci gc --layout "$layout"
  chmod -R a+rX "$layout"
  skopeo copy --quiet "oci:$layout:$ref_tag" "docker-archive:$archive.tar:$ref_name:$ref_tag"
  skopeo copy --quiet "oci:$layout:$ref_tag" "oci-archive:$archive.oci.tar:$ref_name:$ref_tag"
}

layout="$OUT/oci"
one_layer_image "$layout" "$name" "$tag" "$OUT/$BIN_NAME" "$layer" \
  "$BIN_NAME $version (static, $TARGET)" \
  --config.user "$USER_ID:$USER_ID" \
  --config.env "PATH=/usr/local/bin" --config.entrypoint "$ENTRYPOINT" --config.cmd run \
  --config.exposedports 8080/tcp \
  --config.label "org.opencontainers.image.title=$BIN_NAME"

# --- step image -------------------------------------------------------------------------
STEP_IMAGE="${STEP_IMAGE:-workflow-step:$tag}"
step_name="${STEP_IMAGE%:*}"
step_tag="${STEP_IMAGE##*:}"
if [ "$step_name" = "$STEP_IMAGE" ]; then step_name="$STEP_IMAGE"; step_tag=latest; fi
steproot="$work/steproot"
mkdir -p "$steproot/bin" "$steproot/usr/local/bin" "$steproot/etc" "$steproot/tmp" "$steproot/home"
install -m 0755 /bin/busybox "$steproot/bin/busybox"
while read -r applet; do
  [ -n "$applet" ] && [ "$applet" != bin/busybox ] || continue
  mkdir -p "$steproot/$(dirname "$applet")"
  ln -sf /bin/busybox "$steproot/$applet"
done < <(/bin/busybox --list-full)
install -m 0755 "$runner" "$steproot/usr/local/bin/workflow-runner"
printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/home:/bin/false' \
  > "$steproot/etc/passwd"
printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' > "$steproot/etc/group"
chmod 0644 "$steproot/etc/passwd" "$steproot/etc/group"
chmod 1777 "$steproot/tmp"
step_layer="$work/step-layer.tar"
tar -cf "$step_layer" --sort=name --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  --mtime="@$epoch" --numeric-owner --owner=0 --group=0 -C "$steproot" .
one_layer_image "$OUT/step-oci" "$step_name" "$step_tag" "$OUT/workflow-step" "$step_layer" \
  "busybox-static and workflow-runner $version" \
  --config.cmd sh --config.env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --config.label "org.opencontainers.image.title=workflow-step"

digest="$(skopeo inspect --raw "oci:$layout:$tag" | sha256sum | cut -d' ' -f1)"
log "image $name:$tag (manifest sha256:$digest)"
log "  binary         $(du -h "$bin" | cut -f1)  $desc"
log "  OCI layout     $(du -sh "$layout" | cut -f1)  $layout (tag $tag)"
log "  docker-archive $(du -h "$OUT/$BIN_NAME.tar" | cut -f1)  $OUT/$BIN_NAME.tar"
log "  oci-archive    $(du -h "$OUT/$BIN_NAME.oci.tar" | cut -f1)  $OUT/$BIN_NAME.oci.tar"
log "  entrypoint $ENTRYPOINT, default args [run], user $USER_ID:$USER_ID"
log "step image $step_name:$step_tag"
log "  workflow-runner $(du -h "$runner" | cut -f1), busybox $(du -h /bin/busybox | cut -f1)"
log "  docker-archive $(du -h "$OUT/workflow-step.tar" | cut -f1)  $OUT/workflow-step.tar"
