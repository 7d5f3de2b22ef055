//! Write workflow types for workflow-operator as WebAssembly components.
//!
//! A *workflow type* (`pre-check`, `setup`, `at`, ...) decides which steps a Workflow of that
//! type runs, when each step may start, and whether a finished step succeeded. The operator
//! loads each type from a `.wasm` component and calls it with plain data: a plugin is a pure
//! function of its inputs, with no filesystem, network, environment or real clock (the current
//! time arrives in [`Context::now`]). It may log through [`log`].
//!
//! This crate owns the component bindings of the contract (`wit/workflow-plugin.wit`,
//! package `workflow:plugin@0.1.0`). An author implements one trait, [`WorkflowType`], and
//! exports it with one macro, [`export_workflow_type!`]. The SDK turns the parameters JSON into
//! the author's own `Params` type (with a clear error naming the field when it does not fit),
//! derives the parameters' JSON Schema, and converts everything to and from the bindings.
//!
//! # Example
//!
//! A complete plugin: `Cargo.toml` has `crate-type = ["cdylib"]` and depends on this crate
//! only; `workflow-operator plugin new NAME` writes such a crate, built with
//! `cargo build --profile plugin --target wasm32-wasip2`. The crate's `README.md` walks through
//! the whole recipe, from `plugin new` to the ConfigMap.
//!
//! ```
//! use workflow_plugin_sdk::prelude::*;
//!
//! /// Parameters, written in a WorkflowGroup as `spec.params.disk-check: {...}`.
//! #[derive(Deserialize, JsonSchema)]
//! // The derives are the SDK's re-exports, so they are told where serde and schemars live
//! // (or depend on `serde` and `schemars` yourself and leave these out).
//! #[serde(crate = "workflow_plugin_sdk::serde", deny_unknown_fields, rename_all = "camelCase")]
//! #[schemars(crate = "workflow_plugin_sdk::schemars")]
//! struct DiskCheckParams {
//!     /// Fail when a disk is fuller than this, in percent.
//!     max_used_percent: u8,
//! }
//!
//! struct DiskCheck;
//!
//! impl WorkflowType for DiskCheck {
//!     type Params = DiskCheckParams;
//!
//!     fn info() -> Info {
//!         Info::new("disk-check", env!("CARGO_PKG_VERSION"))
//!             .description("Checks free disk space on every worker")
//!     }
//!
//!     fn validate(params: &DiskCheckParams) -> Result<(), Error> {
//!         if params.max_used_percent > 100 {
//!             return Err(Error::new("`maxUsedPercent` must be at most 100"));
//!         }
//!         Ok(())
//!     }
//!
//!     fn template(ctx: &Context<DiskCheckParams>) -> Result<Vec<Step>, Error> {
//!         let workers = ctx.target_names_with_role("Worker").join(" ");
//!         log::info(&format!("checking disks of {workers}"));
//!         Ok(vec![
//!             Step::new("df", format!("check-disks.sh {} {workers}", ctx.params.max_used_percent))
//!                 .description("Check disk usage")
//!                 .timeout_secs(120)
//!                 .retries(1),
//!         ])
//!     }
//!
//!     fn evaluate(_step: &Step, outcome: &StepOutcome) -> Verdict {
//!         // Targets reported as `FAIL <node>: <reason>` fail the step even on exit code 0.
//!         report::verdict(outcome)
//!     }
//! }
//!
//! export_workflow_type!(DiskCheck);
//! # fn main() {}
//! ```
//!
//! # What the operator does with it
//!
//! - `info` once at load: the type name in [`Info`] is what users write in `workflowSteps`.
//! - [`WorkflowType::validate`] on each group's `spec.params.<type>`.
//! - [`WorkflowType::template`] when it creates a Workflow of this type for a group.
//! - [`WorkflowType::gate`] before starting each step (default: start now).
//! - [`WorkflowType::evaluate`] on each finished attempt of a step (default: exit code 0 is
//!   success, see [`default_verdict`]).
//!
//! Every call runs in a fresh instance with a time limit and a memory cap, so a plugin keeps no
//! state between calls.

#![deny(unsafe_code)]
#![warn(missing_docs)]

/// The component bindings generated from the contract. Used by [`export_workflow_type!`];
/// authors never need them.
#[doc(hidden)]
#[allow(unsafe_code, missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "plugin",
        pub_export_macro: true,
        default_bindings_module: "workflow_plugin_sdk::bindings",
    });
}

#[doc(hidden)]
pub mod __private;
pub mod approval;
pub mod log;
pub mod remote;
pub mod report;
#[cfg(target_arch = "wasm32")]
pub mod stdio;
mod types;

/// One validator per kind of word (package and command names, paths, endpoints, roles, ...):
/// a type checks the words of its params with them in
/// [`validate`](WorkflowType::validate), and `?` turns a refusal into an [`Error`] that names
/// the field, the word and the rule.
///
/// ```
/// use workflow_plugin_sdk::prelude::*;
///
/// fn validate(commands: &[String]) -> Result<(), Error> {
///     words::each("requiredCommands", commands, words::command_name)?;
///     Ok(())
/// }
/// assert!(validate(&["systemctl".into()]).is_ok());
/// assert!(validate(&["-rf".into()]).is_err());
/// ```
pub use workflow_model::words;

pub use types::{
    ApprovalRequest, ApprovalTimeout, Context, EnvVar, Error, Gate, Info, NoParams, Step,
    StepOutcome, Target, TargetOutcome, TargetReport, TargetResult, Verdict, default_verdict,
};

/// Re-exported so plugins need no direct dependency to derive their `Params`.
pub use schemars::{self, JsonSchema};
/// Re-exported so plugins need no direct dependency to derive their `Params`.
pub use serde::{self, Deserialize};
/// Re-exported for plugins that handle JSON themselves.
pub use serde_json;

/// Everything a plugin usually needs: `use workflow_plugin_sdk::prelude::*;`.
pub mod prelude {
    pub use crate::{
        ApprovalRequest, ApprovalTimeout, Context, Deserialize, EnvVar, Error, Gate, Info,
        JsonSchema, NoParams, Step, StepOutcome, Target, TargetOutcome, TargetReport, TargetResult,
        Verdict, WorkflowType, default_verdict, export_workflow_type, log, remote, report, words,
    };
}

/// A workflow type: what a plugin implements.
///
/// Only [`info`](WorkflowType::info) and [`template`](WorkflowType::template) are required;
/// the others have sensible defaults. Export the implementation with
/// [`export_workflow_type!`]. All functions are associated functions (no `self`): the operator
/// calls each in a fresh instance, so there is no state to keep.
///
/// # Example
///
/// ```
/// use workflow_plugin_sdk::prelude::*;
///
/// struct Hello;
///
/// impl WorkflowType for Hello {
///     type Params = NoParams;
///
///     fn info() -> Info {
///         Info::new("hello", "1.0.0").description("Says hello on every node")
///     }
///
///     fn template(ctx: &Context<NoParams>) -> Result<Vec<Step>, Error> {
///         Ok(vec![Step::new("hello", format!("echo hello {}", ctx.target_names().join(" ")))])
///     }
/// }
/// # let ctx = Context { params: NoParams {}, ..Context::default() };
/// # assert_eq!(Hello::template(&ctx).map(|s| s.len()).ok(), Some(1));
/// ```
pub trait WorkflowType {
    /// This type's parameters, deserialized by the SDK from the group's `spec.params.<type>`.
    ///
    /// Use [`NoParams`] for a type that takes none. Its JSON Schema (from `schemars`) is
    /// published through `info`; `#[serde(deny_unknown_fields)]` makes typos an error.
    type Params: serde::de::DeserializeOwned + schemars::JsonSchema;

    /// Who this plugin is: type name, version and description.
    ///
    /// The SDK adds the JSON Schema of [`Self::Params`](WorkflowType::Params).
    fn info() -> Info;

    /// Checks parameters beyond what their type already checks (default: accept).
    ///
    /// The SDK has already deserialized them; a JSON that does not fit `Params` is reported
    /// without calling this.
    ///
    /// # Errors
    ///
    /// A message a user can act on, naming the offending field.
    fn validate(params: &Self::Params) -> Result<(), Error> {
        let _ = params;
        Ok(())
    }

    /// The steps of a Workflow of this type for the group described by `ctx`.
    ///
    /// Step names must be unique DNS-1123 labels; `depends_on` must name steps of the same
    /// list; the operator rejects a template that breaks these rules.
    ///
    /// # Errors
    ///
    /// A message explaining why no workflow can be made for this group.
    fn template(ctx: &Context<Self::Params>) -> Result<Vec<Step>, Error>;

    /// Whether `step` may start now (default: [`Gate::StartNow`]).
    ///
    /// Return [`Gate::NotBefore`] to hold it until a time; the operator asks again then.
    fn gate(step: &Step, ctx: &Context<Self::Params>) -> Gate {
        let _ = (step, ctx);
        Gate::StartNow
    }

    /// Judges a finished attempt of `step` (default: [`default_verdict`], exit code 0 is
    /// success). `outcome.targets` has what a step that acts on the targets reported for each
    /// ([`remote::verdict`] judges it against a failure budget).
    fn evaluate(step: &Step, outcome: &StepOutcome) -> Verdict {
        let _ = step;
        default_verdict(outcome)
    }

    /// Judges a finished attempt of `step` for the group of `ctx` (its params, targets, the
    /// time): what the operator calls. The default is [`evaluate`](WorkflowType::evaluate),
    /// for success logic that needs no context.
    fn evaluate_for(step: &Step, outcome: &StepOutcome, ctx: &Context<Self::Params>) -> Verdict {
        let _ = ctx;
        Self::evaluate(step, outcome)
    }
}

/// Exports a [`WorkflowType`] implementation as the plugin's component.
///
/// Call it once per plugin crate, at the top level, with the name (a plain identifier, in
/// scope) of the type that implements
/// [`WorkflowType`]:
///
/// ```text
/// export_workflow_type!(MyType);
/// ```
///
/// It implements the generated bindings' `Guest` trait for `MyType` and emits the component
/// exports, so a crate cannot export two types (a second call fails to compile with
/// conflicting symbols).
#[macro_export]
macro_rules! export_workflow_type {
    ($ty:ident) => {
        #[allow(unsafe_code)]
        const _: () = {
            impl $crate::bindings::exports::workflow::plugin::workflow_type::Guest for $ty {
                fn info() -> $crate::bindings::exports::workflow::plugin::workflow_type::PluginInfo {
                    $crate::__private::info::<$ty>()
                }
                fn validate(params: ::std::string::String) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::__private::validate::<$ty>(&params)
                }
                fn template(
                    ctx: $crate::bindings::exports::workflow::plugin::workflow_type::Context,
                ) -> ::std::result::Result<
                    ::std::vec::Vec<$crate::bindings::exports::workflow::plugin::workflow_type::Step>,
                    ::std::string::String,
                > {
                    $crate::__private::template::<$ty>(ctx)
                }
                fn gate(
                    step: $crate::bindings::exports::workflow::plugin::workflow_type::Step,
                    ctx: $crate::bindings::exports::workflow::plugin::workflow_type::Context,
                ) -> $crate::bindings::exports::workflow::plugin::workflow_type::GateDecision {
                    $crate::__private::gate::<$ty>(step, ctx)
                }
                fn evaluate(
                    step: $crate::bindings::exports::workflow::plugin::workflow_type::Step,
                    outcome: $crate::bindings::exports::workflow::plugin::workflow_type::StepOutcome,
                    ctx: $crate::bindings::exports::workflow::plugin::workflow_type::Context,
                ) -> $crate::bindings::exports::workflow::plugin::workflow_type::Verdict {
                    $crate::__private::evaluate::<$ty>(step, outcome, ctx)
                }
            }
            // Native builds (unit tests) get no exports: the component ABI's symbol names are
            // not valid in a native shared library's symbol list.
            #[cfg(target_arch = "wasm32")]
            $crate::bindings::export!($ty with_types_in $crate::bindings);
        };
    };
}
