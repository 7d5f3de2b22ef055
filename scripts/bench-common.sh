# The parts bench-cluster.sh and bench-fleet.sh share: the operator started and stopped for each
# part, a fresh namespace per part, and waiting for groups to finish. Sourced after scripts/lib.sh,
# with `work` (a scratch directory), TARGET, BIN and COMPILE_CACHE set; sets `operator_pid` and
# `port`.

# One namespace per part, so each starts empty; the operator watches only it.
start_operator() {
  local ns="$1"
  mkdir -p "$work/plugins"
  cp "$TARGET"/plugins/*.wasm "$work/plugins/"
  port="$(free_ports 1)"
  # shellcheck disable=SC2086 # OPERATOR_ARGS is a list of flags
  start_operator_bg "$BIN" "$work/operator-$ns.log" 10 --namespace "$ns" --plugin-dir "$work/plugins" \
    --plugin-compile-cache "$COMPILE_CACHE" --http-addr "127.0.0.1:$port" ${OPERATOR_ARGS:-}
}
stop_operator() { kill "$operator_pid" 2>/dev/null || true; wait "$operator_pid" 2>/dev/null || true; operator_pid=""; }
fresh_namespace() {
  local ns="$1"
  kubectl create namespace "$ns" >/dev/null
  WAIT_INTERVAL=0.1 wait_until 10 "the default ServiceAccount of $ns" kubectl -n "$ns" get serviceaccount default
}

# groups_finished <namespace> <count>: whether that many groups there are Completed or Failed;
# sets `completed` and `failed`.
groups_finished() {
  local phases
  phases=$(kubectl -n "$1" get workflowgroups.workflow.rxg456.cn -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}')
  completed=$(grep -c '^Completed$' <<<"$phases" || true)
  failed=$(grep -c '^Failed$' <<<"$phases" || true)
  [ $((completed + failed)) -ge "$2" ]
}
# wait_groups_finished <namespace> <count>: until groups_finished (an hour at most); sets
# `finished_at`, when the last one was seen finished. Watched, as the sample's `kubectl wait`
# is: a poll would add up to its interval and a kubectl start to each part's wall time and not
# to the sample's. Polled only if the watch ends first (the API server closed it). Custom
# columns print the groups already there one a line (jsonpath prints their list as one object).
wait_groups_finished() {
  local ns="$1" count="$2" name phase fd
  local -A finished=()
  # On a descriptor of its own, so that its pid is known while it runs (`group_watch`, which
  # the scripts' exit traps stop too: an interrupted run leaves no watch behind).
  exec {fd}< <(exec timeout 3600 "$KUBECTL" -n "$ns" get workflowgroups.workflow.rxg456.cn --watch \
    --request-timeout=0 --no-headers -o custom-columns=NAME:.metadata.name,PHASE:.status.phase 2>/dev/null)
  group_watch=$!
  while read -r -u "$fd" name phase; do
    case "$phase" in Completed | Failed) finished[$name]=1 ;; esac
    [ "${#finished[@]}" -ge "$count" ] && break
  done
  finished_at=$(date +%s.%N)
  exec {fd}<&-
  kill "$group_watch" 2>/dev/null || true
  group_watch=""
  if ! groups_finished "$ns" "$count"; then
    WAIT_INTERVAL=0.5 wait_until 3600 "$count groups in $ns to finish" groups_finished "$ns" "$count"
    finished_at=$(date +%s.%N)
  fi
}

