//! Calling a plugin: every call gets a fresh store (memory capped, stopped at its time limit
//! even while it waits in a host call) and a fresh instance that is dropped afterwards, so no
//! call sees what another left behind; every failure becomes a [`PluginError`]. Also the
//! [`Plugin`] methods that call the contract's exports and check what they return, each timed
//! and counted in the runtime's metrics when it has them.

use std::time::Instant;

use wasmtime::component::{ComponentExportIndex, ComponentNamedList, InstancePre, Lift, Lower};
use wasmtime::{Store, Trap};
use workflow_model::text::{self, Marker};

use super::bindings::exports::workflow::plugin::workflow_type as wit;
use super::bindings::v0_1::workflow::plugin::types as v0_1;
use super::bindings::v0_2::workflow::plugin::types as v0_2;
use super::config::RuntimeConfig;
use super::contract::{Contract, Exports};
use super::driver;
use super::engine::{deadline_ticks, limits, memory_limit};
use super::error::{PluginError, PluginErrorKind, error_line};
use super::runtime::{Plugin, RuntimeInner};
use super::sandbox::{CallState, LogTag};
use super::types::{Gate, GroupContext, PluginInfo, Step, StepOutcome, Verdict};
use super::validate;

/// Longest message kept of one params error found by the schema.
const MAX_SCHEMA_MESSAGE_BYTES: usize = 512;

impl Plugin {
    /// Checks a group's parameters for this type: first against the JSON Schema the plugin
    /// declares, then with the plugin's own `validate`. Params this version accepted once are
    /// accepted again without a call.
    ///
    /// # Errors
    /// [`PluginError::InvalidParams`] naming the JSON path (schema) or the plugin's message;
    /// any call error.
    pub fn validate(&self, params: &serde_json::Value) -> Result<(), PluginError> {
        let json = params.to_string();
        if self.compiled.valid_params.contains(&json) {
            return Ok(());
        }
        let errors: Vec<String> = self
            .compiled
            .schema
            .iter_errors(params)
            .take(3)
            .map(|e| {
                let path = e.instance_path().to_string();
                let path = if path.is_empty() {
                    "/".to_string()
                } else {
                    path
                };
                // A message can quote the whole instance or a long `enum` of the schema.
                text::truncate(
                    &format!("{path}: {e}"),
                    MAX_SCHEMA_MESSAGE_BYTES,
                    Marker::Length,
                )
                .into_owned()
            })
            .collect();
        if !errors.is_empty() {
            return Err(self.invalid_params(errors.join("; ")));
        }
        self.observed("validate", || {
            let result: Result<(), String> =
                self.call("validate", &self.compiled.exports.validate, (&json,))?;
            result.map_err(|message| {
                let max = self.runtime.config.max_string_bytes;
                self.invalid_params(text::truncate(&message, max, Marker::Length).into_owned())
            })
        })?;
        // Only an answer is kept: a call that failed (a trap, a timeout) is asked again.
        self.compiled.valid_params.insert(json);
        Ok(())
    }

    /// The steps of a workflow of this type for the group described by `context`, checked:
    /// a valid step graph (unique DNS-1123 names, known dependencies, no cycle), within the
    /// configured number of steps and string sizes.
    ///
    /// # Errors
    /// [`PluginError::TemplateFailed`] with the plugin's message, [`PluginError::InvalidOutput`],
    /// or any call error.
    pub fn template(&self, context: &GroupContext) -> Result<Vec<Step>, PluginError> {
        let ctx = wit::Context::from(context);
        let index = &self.compiled.exports.template;
        self.observed("template", || {
            let result: Result<Vec<wit::Step>, String> = match self.compiled.contract {
                Contract::Current => self.call("template", index, (&ctx,))?,
                Contract::V0_2 | Contract::V0_1 => {
                    let old: Result<Vec<v0_2::Step>, String> =
                        self.call("template", index, (&ctx,))?;
                    old.map(|steps| steps.into_iter().map(Into::into).collect())
                }
            };
            let limits = limits(&self.runtime.config);
            match result {
                Ok(steps) => validate::steps(steps, &limits)
                    .map_err(|reason| self.invalid("template", reason)),
                Err(message) => Err(PluginError::TemplateFailed {
                    plugin: self.label.clone(),
                    message: text::truncate(&message, limits.max_string_bytes, Marker::Length)
                        .into_owned(),
                }),
            }
        })
    }

    /// Whether `step` may start now.
    ///
    /// # Errors
    /// Any call error.
    pub fn gate(&self, step: &Step, context: &GroupContext) -> Result<Gate, PluginError> {
        let ctx = wit::Context::from(context);
        let index = &self.compiled.exports.gate;
        self.observed("gate", || {
            let decision: wit::GateDecision = match self.compiled.contract {
                Contract::Current => self.call("gate", index, (&wit::Step::from(step), &ctx))?,
                Contract::V0_2 | Contract::V0_1 => {
                    let old: v0_2::GateDecision =
                        self.call("gate", index, (&v0_2::Step::from(step), &ctx))?;
                    old.into()
                }
            };
            validate::gate(decision, &limits(&self.runtime.config))
                .map_err(|reason| self.invalid("gate", reason))
        })
    }

    /// The plugin's judgement of a finished attempt of `step` of a Workflow of the group of
    /// `context`. A plugin of contract 0.1.0 gets neither the context nor `outcome.targets`.
    ///
    /// # Errors
    /// [`PluginError::InvalidOutput`] when a reason is too long, or any call error.
    pub fn evaluate(
        &self,
        step: &Step,
        outcome: &StepOutcome,
        context: &GroupContext,
    ) -> Result<Verdict, PluginError> {
        let index = &self.compiled.exports.evaluate;
        self.observed("evaluate", || {
            // The other records are the same in every version (the component model compares
            // them by shape): only the step (0.3.0) and the outcome (0.2.0) have a type of
            // each version.
            let verdict: wit::Verdict = match self.compiled.contract {
                Contract::Current => {
                    let outcome = wit::StepOutcome::from(outcome);
                    let ctx = wit::Context::from(context);
                    self.call("evaluate", index, (&wit::Step::from(step), &outcome, &ctx))?
                }
                Contract::V0_2 => {
                    let outcome = wit::StepOutcome::from(outcome);
                    let ctx = wit::Context::from(context);
                    self.call("evaluate", index, (&v0_2::Step::from(step), &outcome, &ctx))?
                }
                Contract::V0_1 => {
                    let outcome = v0_1::StepOutcome::from(outcome);
                    self.call("evaluate", index, (&v0_2::Step::from(step), &outcome))?
                }
            };
            validate::verdict(verdict, &limits(&self.runtime.config))
                .map_err(|reason| self.invalid("evaluate", reason))
        })
    }

    /// Runs `f`, one call of `export` and the check of its answer, recording it.
    fn observed<T>(
        &self,
        export: &'static str,
        f: impl FnOnce() -> Result<T, PluginError>,
    ) -> Result<T, PluginError> {
        observed(&self.runtime, &self.tag, export, f)
    }

    /// Calls the export at `index` (named `call` in messages) with `params`, in a fresh store.
    fn call<P, R>(
        &self,
        call: &'static str,
        index: &ComponentExportIndex,
        params: P,
    ) -> Result<R, PluginError>
    where
        P: ComponentNamedList + Lower + Send,
        (R,): ComponentNamedList + Lift + 'static,
        R: Send,
    {
        call_in_store(
            &self.runtime,
            &self.compiled.pre,
            &self.tag,
            &self.label,
            call,
            index,
            params,
        )
    }

    fn invalid(&self, call: &'static str, reason: String) -> PluginError {
        PluginError::InvalidOutput {
            plugin: self.label.clone(),
            call,
            reason,
        }
    }

    fn invalid_params(&self, message: String) -> PluginError {
        PluginError::InvalidParams {
            type_name: self.compiled.info.type_name.clone(),
            message,
        }
    }
}

/// Calls `info` of a plugin being loaded, known so far as `origin`, and checks the answer:
/// what the plugin says it is, and the JSON Schema of its parameters, compiled.
pub(super) fn info(
    runtime: &RuntimeInner,
    pre: &InstancePre<CallState>,
    exports: &Exports,
    tag: &LogTag,
    origin: &str,
) -> Result<(PluginInfo, jsonschema::Validator), PluginError> {
    observed(runtime, tag, "info", || {
        let raw: wit::PluginInfo =
            call_in_store(runtime, pre, tag, origin, "info", &exports.info, ())?;
        validate::info(raw, origin, &limits(&runtime.config))
    })
}

/// Runs `f`, one call of `export` and the check of its answer, and records its duration and
/// outcome under the plugin's name in `tag` when the runtime has metrics.
fn observed<T>(
    runtime: &RuntimeInner,
    tag: &LogTag,
    export: &'static str,
    f: impl FnOnce() -> Result<T, PluginError>,
) -> Result<T, PluginError> {
    let Some(metrics) = &runtime.metrics else {
        return f();
    };
    let started = Instant::now();
    let result = f();
    metrics.observe(&tag.plugin, export, outcome(&result), started.elapsed());
    result
}

/// How a call ended, for the `outcome` label: `ok`, or a short kind of error that stays the
/// same when messages change.
fn outcome<T>(result: &Result<T, PluginError>) -> &'static str {
    let Err(error) = result else {
        return "ok";
    };
    match (error.kind(), error) {
        (_, PluginError::Timeout { .. }) => "timeout",
        (_, PluginError::Trap { .. }) => "trap",
        (_, PluginError::MemoryExhausted { .. }) => "memory",
        (_, PluginError::Instantiate { .. }) => "instantiate",
        // The plugin answered with an error of its own.
        (PluginErrorKind::Refused, _) => "error",
        (PluginErrorKind::Broken | PluginErrorKind::Transient, _) => "output",
        // Loading fails with these before any call.
        (PluginErrorKind::CannotLoad, _) => "load",
    }
}

/// A fresh store for one call of the plugin tagged `tag`: memory capped, interrupted after
/// `deadline_ticks` epoch ticks.
pub(super) fn new_store(
    runtime: &RuntimeInner,
    tag: &LogTag,
    deadline_ticks: u64,
) -> Store<CallState> {
    let cfg = &runtime.config;
    let state = CallState::new(
        tag.clone(),
        memory_limit(cfg),
        cfg.max_string_bytes,
        cfg.max_output_bytes,
    );
    let mut store = Store::new(&runtime.engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(deadline_ticks);
    store
}

/// Runs one call of the export at `index` (signature `P -> R`) in a fresh instance of `pre`,
/// in a fresh store, mapping every failure to a [`PluginError`].
///
/// The call, instantiation included, is bounded twice: guest code is interrupted at the
/// store's epoch deadline, and a call waiting in a host call (a WASI sleep or poll) when
/// `call_timeout` has passed is dropped, which ends the wait. The store is then
/// only read for the plugin's output and dropped.
fn call_in_store<P, R>(
    runtime: &RuntimeInner,
    pre: &InstancePre<CallState>,
    tag: &LogTag,
    label: &str,
    call: &'static str,
    index: &ComponentExportIndex,
    params: P,
) -> Result<R, PluginError>
where
    P: ComponentNamedList + Lower + Send,
    (R,): ComponentNamedList + Lift + 'static,
    R: Send,
{
    let cfg = &runtime.config;
    let deadline = tokio::time::Instant::now() + cfg.call_timeout;
    let mut store = new_store(runtime, tag, deadline_ticks(cfg.call_timeout));
    let store_ref = &mut store;
    let outcome = driver::block_on(&runtime.timers, async move {
        driver::until(deadline, async move {
            let instance = pre
                .instantiate_async(&mut *store_ref)
                .await
                .map_err(|e| (e, true))?;
            let func = instance
                .get_typed_func::<P, (R,)>(&mut *store_ref, index)
                .map_err(|e| (e, false))?;
            match func.call_async(&mut *store_ref, params).await {
                Ok((result,)) => Ok(result),
                Err(e) => Err((e, false)),
            }
        })
        .await
    });
    store.data().finish_logs();
    let failed = Failed {
        plugin: label,
        call,
        config: cfg,
        store: &store,
    };
    match outcome {
        None => Err(failed.timeout()),
        Some(result) => result.map_err(|(error, instantiating)| failed.why(&error, instantiating)),
    }
}

/// A call that did not return, and what its store saw: read into the [`PluginError`] that
/// says why.
struct Failed<'a> {
    plugin: &'a str,
    call: &'static str,
    config: &'a RuntimeConfig,
    store: &'a Store<CallState>,
}

impl Failed<'_> {
    fn timeout(&self) -> PluginError {
        PluginError::Timeout {
            plugin: self.plugin.to_string(),
            call: self.call,
            limit: self.config.call_timeout,
        }
    }

    /// Why the call failed with `error`: memory exhausted, out of time, a trap (with the
    /// plugin's last output), or an instance that could not be made.
    fn why(&self, error: &wasmtime::Error, instantiating: bool) -> PluginError {
        let (plugin, call) = (self.plugin.to_string(), self.call);
        if self.store.data().limiter.memory_exhausted {
            return PluginError::MemoryExhausted {
                plugin,
                call,
                limit_bytes: self.config.memory_limit_bytes,
            };
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => self.timeout(),
            Some(trap) => {
                let mut message = trap.to_string();
                if *trap == Trap::StackOverflow {
                    message.push_str(" (too deep recursion?)");
                }
                if let Some(line) = self.store.data().last_output(1024) {
                    message = format!("{message}; its last output: {line}");
                }
                PluginError::Trap {
                    plugin,
                    call,
                    message,
                }
            }
            None if instantiating => PluginError::Instantiate {
                plugin,
                call,
                reason: error_line(error),
            },
            None => PluginError::Trap {
                plugin,
                call,
                message: error_line(error),
            },
        }
    }
}
