"""Conveniences for workflow types written in Python, built with componentize-py against the
contract in plugin-sdk/wit (workflow:plugin@0.3.0): the same as the Rust SDK's, in Python's
idiom.

- info(...) and params(...): a type's description with its params JSON Schema (a dict), and
  its params read with the schema's top-level defaults filled in;
- step(...) and on_targets(...): steps, and a step that runs a script on every target over SSH
  (workflow-runner, in the operator's default step image), with the failure budget;
- target_report(...) and verdict(...): the per-target evidence of a finished attempt, and the
  judgement of an on_targets step against its budget;
- shell_quote(...) and shell_assignments(...): values put into a script safely.

The operator checks params against the schema before it calls the type, so `validate` and
`template` see only params of the schema's shape.
"""

import json

from componentize_py_types import Err
from wit_world.imports import host_log
from wit_world.imports import types as t

RUNNER = "workflow-runner"
COMMAND_ENV = "WORKFLOW_SSH_COMMAND"
MAX_FAILED_ENV = "WORKFLOW_MAX_FAILED_TARGETS"
MIN_HEALTHY_ENV = "WORKFLOW_MIN_HEALTHY_PERCENT"


def info(type_name, version, description, params_schema):
    """What the type says about itself; `params_schema` is a JSON Schema as a dict."""
    return t.PluginInfo(
        type_name=type_name,
        version=version,
        description=description,
        params_schema=json.dumps(params_schema),
    )


def params(text, params_schema):
    """The params JSON `text` as a dict, with the schema's top-level `default`s filled in."""
    try:
        value = json.loads(text or "{}")
    except ValueError as e:
        raise Err(f"params are not JSON: {e}")
    if not isinstance(value, dict):
        raise Err("params must be an object")
    for name, prop in params_schema.get("properties", {}).items():
        if name not in value and "default" in prop:
            value[name] = prop["default"]
    return value


def step(name, command, description="", depends_on=(), env=None, image=None,
         timeout_seconds=None, retries=None, rerun_with=()):
    """A step: `command` run by /bin/sh -c in its container."""
    return t.Step(
        name=name,
        description=description,
        command=command,
        depends_on=list(depends_on),
        image=image,
        env=[t.EnvVar(name=k, value=str(v)) for k, v in (env or {}).items()],
        timeout_seconds=timeout_seconds,
        retries=retries,
        rerun_with=list(rerun_with),
    )


def on_targets(name, script, description="", depends_on=(), max_failed_targets=None,
               min_healthy_percent=None, ssh_user=None, ssh_port=None, timeout_seconds=None):
    """A step that runs `script` with /bin/sh -c on each target over SSH, reporting per
    target: the script's last line of output is the reason shown where it exits non-zero.
    At most `max_failed_targets` may fail, and at least `min_healthy_percent` must succeed
    (neither given: none may fail)."""
    env = {COMMAND_ENV: script}
    if ssh_user is not None:
        env["WORKFLOW_SSH_USER"] = ssh_user
    if ssh_port is not None:
        env["WORKFLOW_SSH_PORT"] = ssh_port
    if max_failed_targets is not None:
        env[MAX_FAILED_ENV] = max_failed_targets
    if min_healthy_percent is not None:
        env[MIN_HEALTHY_ENV] = min_healthy_percent
    return step(name, RUNNER, description, depends_on, env, timeout_seconds=timeout_seconds)


def target_report(outcome):
    """The attempt's report over its targets, as the operator read it from the runner's
    termination message; None for a step that reported none."""
    return outcome.targets


def _budget(s):
    env = {e.name: e.value for e in s.env}

    def read(name):
        try:
            return int(env[name].strip())
        except (KeyError, ValueError):
            return None

    return read(MAX_FAILED_ENV), read(MIN_HEALTHY_ENV)


def _allows(max_failed, min_healthy, bad, total):
    by_count = bad <= (max_failed or 0)
    by_percent = min_healthy is None or (total - bad) * 100 >= min(min_healthy, 100) * total
    if max_failed is None and min_healthy is not None:
        return by_percent
    return by_count and by_percent


def _describe(max_failed, min_healthy):
    if max_failed is None and min_healthy is None:
        return "none may fail"
    if min_healthy is None:
        return f"at most {max_failed} may fail"
    if max_failed is None:
        return f"at least {min_healthy}% must succeed"
    return f"at most {max_failed} may fail and at least {min_healthy}% must succeed"


_WORDS = {t.TargetOutcome.FAILED: "failed", t.TargetOutcome.UNREACHABLE: "unreachable"}


def verdict(s, outcome):
    """Judges an attempt of an on_targets step: Completed when every target succeeded or the
    targets that did not are within its budget, Failed otherwise, naming each and why."""
    report = target_report(outcome)
    if report is None:
        if outcome.succeeded:
            return t.Verdict_Completed()
        last = (outcome.message.strip().splitlines() or [""])[-1]
        return t.Verdict_Failed(f"exit code {outcome.exit_code}: {last}".strip())
    bad = report.failed + report.unreachable
    max_failed, min_healthy = _budget(s)
    if bad == 0:
        if outcome.succeeded:
            return t.Verdict_Completed()
        last = (outcome.message.strip().splitlines() or [""])[-1]
        return t.Verdict_Failed(f"exit code {outcome.exit_code}: {last}".strip())
    if bad > 0 and _allows(max_failed, min_healthy, bad, report.total):
        return t.Verdict_Completed()
    named = [f"{p.name} {_WORDS.get(p.outcome, 'failed')}: {p.reason}" for p in report.problems]
    reason = f"{bad} of {report.total} targets failed ({_describe(max_failed, min_healthy)}): " + "; ".join(named)
    if bad > len(named):
        reason += f"; and {bad - len(named)} more"
    return t.Verdict_Failed(reason)


def shell_quote(text):
    """`text` as one single-quoted shell word."""
    return "'" + str(text).replace("'", "'\\''") + "'"


def shell_assignments(pairs):
    """`NAME='value'` lines, one per (name, value) pair: the parameters a script reads."""
    return "".join(f"{name}={shell_quote(value)}\n" for name, value in pairs)


def log(message, level=None):
    """A line in the operator's log, tagged with the plugin."""
    host_log.log(level or host_log.Level.INFO, message)
