// Conveniences for workflow types written in JavaScript, built with `jco componentize`
// (ComponentizeJS) against the contract in plugin-sdk/wit (workflow:plugin@0.3.0): the same as
// the Rust SDK's, in JavaScript's idiom.
//
// - info(...) and params(...): a type's description with its params JSON Schema (an object),
//   and its params read with the schema's top-level defaults filled in;
// - step(...) and onTargets(...): steps, and a step that runs a script on every target over
//   SSH (workflow-runner, in the operator's default step image), with the failure budget;
// - targetReport(...) and verdict(...): the per-target evidence of a finished attempt, and the
//   judgement of an onTargets step against its budget;
// - shellQuote(...) and shellAssignments(...): values put into a script safely.
//
// The operator checks params against the schema before it calls the type, so `validate` and
// `template` see only params of the schema's shape. A function that returns a `result` fails
// by throwing a string: the string is the error.

import { log as hostLog } from 'workflow:plugin/host-log@0.3.0';

export const RUNNER = 'workflow-runner';
export const COMMAND_ENV = 'WORKFLOW_SSH_COMMAND';
export const MAX_FAILED_ENV = 'WORKFLOW_MAX_FAILED_TARGETS';
export const MIN_HEALTHY_ENV = 'WORKFLOW_MIN_HEALTHY_PERCENT';

/** What the type says about itself; `paramsSchema` is a JSON Schema as an object. */
export function info(typeName, version, description, paramsSchema) {
  return { typeName, version, description, paramsSchema: JSON.stringify(paramsSchema) };
}

/** The params JSON `text` as an object, with the schema's top-level `default`s filled in. */
export function params(text, paramsSchema) {
  let value;
  try {
    value = JSON.parse(text || '{}');
  } catch (e) {
    throw `params are not JSON: ${e.message}`;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw 'params must be an object';
  }
  for (const [name, prop] of Object.entries(paramsSchema.properties || {})) {
    if (!(name in value) && 'default' in prop) value[name] = prop.default;
  }
  return value;
}

/** A step: `command` run by /bin/sh -c in its container. */
export function step(name, command, {
  description = '', dependsOn = [], env = {}, image, timeoutSeconds, retries, rerunWith = [],
} = {}) {
  return {
    name,
    description,
    command,
    dependsOn: [...dependsOn],
    image,
    env: Object.entries(env).map(([n, v]) => ({ name: n, value: String(v) })),
    timeoutSeconds,
    retries,
    rerunWith: [...rerunWith],
  };
}

/**
 * A step that runs `script` with /bin/sh -c on each target over SSH, reporting per target:
 * the script's last line of output is the reason shown where it exits non-zero. At most
 * `maxFailedTargets` may fail and at least `minHealthyPercent` must succeed (neither given:
 * none may fail).
 */
export function onTargets(name, script, {
  description = '', dependsOn = [], maxFailedTargets, minHealthyPercent, sshUser, sshPort,
  timeoutSeconds,
} = {}) {
  const env = { [COMMAND_ENV]: script };
  if (sshUser !== undefined) env.WORKFLOW_SSH_USER = sshUser;
  if (sshPort !== undefined) env.WORKFLOW_SSH_PORT = sshPort;
  if (maxFailedTargets !== undefined) env[MAX_FAILED_ENV] = maxFailedTargets;
  if (minHealthyPercent !== undefined) env[MIN_HEALTHY_ENV] = minHealthyPercent;
  return step(name, RUNNER, { description, dependsOn, env, timeoutSeconds });
}

/** The attempt's report over its targets, as the operator read it; undefined when none. */
export function targetReport(outcome) {
  return outcome.targets ?? undefined;
}

function budget(s) {
  const read = (name) => {
    const e = s.env.find((v) => v.name === name);
    const n = e ? Number.parseInt(e.value.trim(), 10) : Number.NaN;
    return Number.isNaN(n) ? undefined : n;
  };
  return [read(MAX_FAILED_ENV), read(MIN_HEALTHY_ENV)];
}

function allows(maxFailed, minHealthy, bad, total) {
  const byCount = bad <= (maxFailed ?? 0);
  const byPercent = minHealthy === undefined || (total - bad) * 100 >= Math.min(minHealthy, 100) * total;
  if (maxFailed === undefined && minHealthy !== undefined) return byPercent;
  return byCount && byPercent;
}

function describe(maxFailed, minHealthy) {
  if (maxFailed === undefined && minHealthy === undefined) return 'none may fail';
  if (minHealthy === undefined) return `at most ${maxFailed} may fail`;
  if (maxFailed === undefined) return `at least ${minHealthy}% must succeed`;
  return `at most ${maxFailed} may fail and at least ${minHealthy}% must succeed`;
}

function failedByExit(outcome) {
  const lines = outcome.message.trim().split('\n');
  return { tag: 'failed', val: `exit code ${outcome.exitCode}: ${lines[lines.length - 1]}`.trim() };
}

/**
 * Judges an attempt of an onTargets step: completed when every target succeeded or the
 * targets that did not are within its budget, failed otherwise, naming each and why.
 */
export function verdict(s, outcome) {
  const report = targetReport(outcome);
  if (report === undefined) return outcome.succeeded ? { tag: 'completed' } : failedByExit(outcome);
  const bad = report.failed + report.unreachable;
  const [maxFailed, minHealthy] = budget(s);
  if (bad === 0) return outcome.succeeded ? { tag: 'completed' } : failedByExit(outcome);
  if (allows(maxFailed, minHealthy, bad, report.total)) return { tag: 'completed' };
  const named = report.problems.map((p) => `${p.name} ${p.outcome}: ${p.reason}`);
  let reason = `${bad} of ${report.total} targets failed (${describe(maxFailed, minHealthy)}): ${named.join('; ')}`;
  if (bad > named.length) reason += `; and ${bad - named.length} more`;
  return { tag: 'failed', val: reason };
}

/** `text` as one single-quoted shell word. */
export function shellQuote(text) {
  return `'${String(text).replaceAll("'", "'\\''")}'`;
}

/** `NAME='value'` lines, one per [name, value] pair: the parameters a script reads. */
export function shellAssignments(pairs) {
  return pairs.map(([name, value]) => `${name}=${shellQuote(value)}\n`).join('');
}

/** A line in the operator's log, tagged with the plugin. */
export function log(message, level = 'info') {
  hostLog(level, message);
}
