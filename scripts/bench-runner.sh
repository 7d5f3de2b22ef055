#!/usr/bin/env bash
# The runner's fan-out: one trivial command (`true`) on TARGETS targets (default 100) spread
# over HOSTS target hosts (default 50; tests/cluster/target-hosts.sh, real sshd in network
# namespaces), at each of PARALLEL (default "16 100") targets at a time, RUNS times (default 5);
# prints min / median / max wall time, the runner's own CPU time and peak RSS per setting. The
# target hosts share the machine: on 2 cores their sshd (a fork and exec per login) takes most
# of the CPU. Then file delivery (`--copy`): COPY_MB MiB (default 64) to 1 and to 10 targets,
# MiB/s per target and in all. Release build; needs root.
#
#   scripts/bench-runner.sh              (make bench-runner)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
TARGETS="${TARGETS:-100}"
HOSTS="${HOSTS:-50}"
RUNS="${RUNS:-5}"
PARALLEL="${PARALLEL:-16 100}"
TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

log "building the release runner"
cargo build -q --release -p workflow-runner
runner="$TARGET_DIR/release/workflow-runner"

work="$(mktemp -d)"
cleanup() { tests/cluster/target-hosts.sh down "$work/hosts" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
tests/cluster/target-hosts.sh up "$work/hosts" "$HOSTS" >"$work/hosts.txt"
# TARGETS targets, round robin over the hosts.
python3 scripts/groups.py targets --hosts "$work/hosts.txt" --count "$TARGETS" --prefix node >"$work/targets.json"

printf '\n| %s targets over %s hosts, `true`, %s runs | wall time min / median / max | runner CPU, median | peak RSS |\n|---|---|---|---|\n' \
  "$TARGETS" "$HOSTS" "$RUNS"
for parallel in $PARALLEL; do
  : >"$work/times"
  for _ in $(seq 1 "$RUNS"); do
    /usr/bin/env time -f '%e %M %U %S' -o "$work/one" "$runner" --targets-file "$work/targets.json" \
      --key "$work/hosts/ssh-privatekey" --known-hosts "$work/hosts/known_hosts" \
      --termination-log "$work/report" --parallel "$parallel" -- true >/dev/null \
      || { log "the runner failed:"; cat "$work/report" >&2; exit 1; }
    cat "$work/one" >>"$work/times"
  done
  python3 scripts/bench_report.py runner --times "$work/times" --parallel "$parallel"
done

# File delivery (--copy): a COPY_MB MiB file (default 64) to 1 target, then to 10 targets on 10
# hosts at once, RUNS times each; each run's command removes it again, so every run sends it.
COPY_MB="${COPY_MB:-64}"
head -c "$(( COPY_MB * 1024 * 1024 ))" /dev/urandom >"$work/payload"
printf '\n| `--copy` of %s MiB, %s runs | wall time min / median / max | per target, median | all targets, median | peak RSS |\n|---|---|---|---|---|\n' \
  "$COPY_MB" "$RUNS"
for count in 1 10; do
  python3 scripts/groups.py targets --hosts "$work/hosts.txt" --count "$count" --prefix copy >"$work/copy-targets.json"
  : >"$work/times"
  for _ in $(seq 1 "$RUNS"); do
    /usr/bin/env time -f '%e %M %U %S' -o "$work/one" "$runner" --targets-file "$work/copy-targets.json" \
      --key "$work/hosts/ssh-privatekey" --known-hosts "$work/hosts/known_hosts" \
      --termination-log "$work/report" --parallel 16 --copy "$work/payload:/var/tmp/bench-copy.bin:0644" \
      -- rm -f /var/tmp/bench-copy.bin >/dev/null \
      || { log "the runner failed:"; cat "$work/report" >&2; exit 1; }
    cat "$work/one" >>"$work/times"
  done
  python3 scripts/bench_report.py copy --times "$work/times" --targets "$count" --mib "$COPY_MB"
done
