# check-network: checks that this target reaches the other targets (PEERS: "name address"
# per line; this target is skipped) on PEER_PORT and the ENDPOINTS ("host:port" words), each
# probe within PROBE_TIMEOUT_SECONDS. Prints one line per unreachable address, then, when any,
# one last line naming them all, and exits 1.
# The word lists are split on blanks and never expanded as file names.
set -f
problems=""
problem() { problems="${problems:+$problems; }$*"; }

# probe HOST PORT: 0 when a TCP connection opens, 1 when it does not, 2 when there is no tool.
probe() {
  if command -v bash >/dev/null 2>&1; then
    if command -v timeout >/dev/null 2>&1; then
      timeout "$PROBE_TIMEOUT_SECONDS" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
    else
      bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
    fi
    [ $? -eq 0 ] && return 0 || return 1
  fi
  if command -v nc >/dev/null 2>&1; then
    nc -z -w "$PROBE_TIMEOUT_SECONDS" "$1" "$2" >/dev/null 2>&1 && return 0 || return 1
  fi
  return 2
}

checked=0
check() { # label host port
  probe "$2" "$3"
  case $? in
    0) checked=$((checked + 1)) ;;
    1) echo "cannot reach $1 at $2:$3"; problem "cannot reach $1 ($2:$3)" ;;
    *) echo "no tool to open a TCP connection (bash or nc)"; exit 1 ;;
  esac
}

if [ -n "$PEERS" ]; then
  while read -r name address; do
    [ -n "$address" ] || continue
    [ "$name" = "${WORKFLOW_TARGET_NAME:-}" ] && continue
    check "$name" "$address" "$PEER_PORT"
  done <<PEERS_END
$PEERS
PEERS_END
fi
for endpoint in $ENDPOINTS; do
  host="${endpoint%:*}"; port="${endpoint##*:}"
  host="${host#[}"; host="${host%]}"
  check endpoint "$host" "$port"
done

if [ -n "$problems" ]; then
  echo "$problems"
  exit 1
fi
echo "network ok: $checked addresses reached"
