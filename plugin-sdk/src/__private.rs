//! Glue between the generated bindings and [`WorkflowType`]; called by
//! [`export_workflow_type!`](crate::export_workflow_type). Not a public API.
//!
//! It is the guest's WIT edge: every conversion between the generated bindings and the model
//! (or the SDK's own types) is in the section at the end of this file.

use crate::WorkflowType;
use crate::bindings::exports::workflow::plugin::workflow_type as wit;
use crate::bindings::workflow::plugin::types as wit_types;
use crate::types::{Context, EnvVar, Error, Gate, Info, Step, StepOutcome, Target, Verdict};
use workflow_model::{TargetOutcome, TargetReport, TargetResult};

/// `info`: the author's [`Info`](crate::Info) plus the JSON Schema of the params.
pub fn info<T: WorkflowType>() -> wit::PluginInfo {
    let info = T::info();
    let schema = schemars::schema_for!(T::Params);
    // Serializing a schema cannot fail (string keys, finite numbers); fall back to "accept
    // anything" rather than panic if it ever does.
    let params_schema = serde_json::to_string(&schema).unwrap_or_else(|_| "{}".to_owned());
    plugin_info(info, params_schema)
}

/// `validate`: deserialize, then the author's checks.
pub fn validate<T: WorkflowType>(params: &str) -> Result<(), String> {
    let params = parse_params::<T::Params>(params).map_err(|e| e.to_string())?;
    T::validate(&params).map_err(|e| e.to_string())
}

/// `template`: deserialize the params into the context, then the author's template.
pub fn template<T: WorkflowType>(ctx: wit::Context) -> Result<Vec<wit::Step>, String> {
    let ctx = context::<T::Params>(ctx).map_err(|e| e.to_string())?;
    let steps = T::template(&ctx).map_err(|e| e.to_string())?;
    Ok(steps.into_iter().map(Into::into).collect())
}

/// `gate`: the author's gate.
///
/// The operator gates only steps of a template it rendered from the same params, so they
/// parse; if they somehow do not, the step is held (never started early) and the reason is
/// logged.
pub fn gate<T: WorkflowType>(step: wit::Step, ctx: wit::Context) -> wit::GateDecision {
    let ctx = match context::<T::Params>(ctx) {
        Ok(ctx) => ctx,
        Err(e) => {
            crate::log::error(&format!(
                "cannot gate step `{}`: {e}; holding it",
                step.name
            ));
            return Gate::NotBefore(i64::MAX).into();
        }
    };
    T::gate(&step.into(), &ctx).into()
}

/// `evaluate`: the author's success logic, with the group's context.
///
/// The operator evaluates only steps of a template it rendered from the same params, so they
/// parse; if they somehow do not, the step is judged without the context (by
/// [`WorkflowType::evaluate`]) and the reason is logged.
pub fn evaluate<T: WorkflowType>(
    step: wit::Step,
    outcome: wit::StepOutcome,
    ctx: wit::Context,
) -> wit::Verdict {
    let (step, outcome) = (Step::from(step), StepOutcome::from(outcome));
    match context::<T::Params>(ctx) {
        Ok(ctx) => T::evaluate_for(&step, &outcome, &ctx).into(),
        Err(e) => {
            crate::log::warn(&format!(
                "evaluating step `{}` without its group's params: {e}",
                step.name
            ));
            T::evaluate(&step, &outcome).into()
        }
    }
}

/// Deserializes a params JSON, naming the offending field in the error.
///
/// An empty string or `null` means "no params" and reads as `{}`.
pub fn parse_params<P: serde::de::DeserializeOwned>(json: &str) -> Result<P, Error> {
    let json = match json.trim() {
        "" | "null" => "{}",
        json => json,
    };
    let mut de = serde_json::Deserializer::from_str(json);
    let params = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let message = without_position(e.inner());
        if path == "." {
            Error::new(format!("invalid params: {message}"))
        } else {
            Error::new(format!("invalid params at `{path}`: {message}"))
        }
    })?;
    de.end()
        .map_err(|e| Error::new(format!("invalid params: {}", without_position(&e))))?;
    Ok(params)
}

/// serde_json's message without " at line 1 column 42": the JSON is the operator's rendering
/// of the group's YAML, so its positions mean nothing to the user.
fn without_position(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match message.strip_suffix(&suffix) {
        Some(message) => message.to_owned(),
        None => message,
    }
}

// The WIT edge: the only conversions between the model (and the SDK's own types) and the
// generated bindings.

/// The context in the SDK's shape, its params deserialized into `P`.
fn context<P: serde::de::DeserializeOwned>(ctx: wit::Context) -> Result<Context<P>, Error> {
    Ok(Context {
        params: parse_params(&ctx.params)?,
        group_name: ctx.group_name,
        namespace: ctx.namespace,
        cluster_name: ctx.cluster_name,
        targets: ctx.targets.into_iter().map(Into::into).collect(),
        now: ctx.now,
    })
}

impl From<Step> for wit_types::Step {
    fn from(step: Step) -> Self {
        Self {
            name: step.name,
            description: step.description,
            command: step.command,
            depends_on: step.depends_on,
            image: step.image,
            env: step.env.into_iter().map(Into::into).collect(),
            timeout_seconds: step.timeout_seconds,
            retries: step.retries,
            rerun_with: step.rerun_with,
        }
    }
}

impl From<wit_types::Step> for Step {
    fn from(step: wit_types::Step) -> Self {
        Self {
            name: step.name,
            description: step.description,
            command: step.command,
            depends_on: step.depends_on,
            image: step.image,
            env: step.env.into_iter().map(Into::into).collect(),
            timeout_seconds: step.timeout_seconds,
            retries: step.retries,
            rerun_with: step.rerun_with,
        }
    }
}

impl From<EnvVar> for wit_types::EnvVar {
    fn from(e: EnvVar) -> Self {
        Self {
            name: e.name,
            value: e.value,
        }
    }
}

impl From<wit_types::EnvVar> for EnvVar {
    fn from(e: wit_types::EnvVar) -> Self {
        Self {
            name: e.name,
            value: e.value,
        }
    }
}

impl From<wit_types::Target> for Target {
    fn from(t: wit_types::Target) -> Self {
        Self {
            name: t.name,
            ip: t.ip,
            role: t.role,
        }
    }
}

impl From<Gate> for wit_types::GateDecision {
    fn from(gate: Gate) -> Self {
        match gate {
            Gate::StartNow => Self::StartNow,
            Gate::NotBefore(t) => Self::NotBefore(t),
            Gate::NeedsApproval(r) => Self::NeedsApproval(wit_types::ApprovalRequest {
                reason: r.reason,
                approvers: r.approvers,
                count: r.count,
                timeout_seconds: r.timeout_seconds,
                on_timeout: match r.on_timeout {
                    crate::types::ApprovalTimeout::Fail => wit_types::ApprovalTimeout::Fail,
                    crate::types::ApprovalTimeout::Start => wit_types::ApprovalTimeout::Start,
                },
            }),
        }
    }
}

impl From<wit_types::StepOutcome> for StepOutcome {
    fn from(o: wit_types::StepOutcome) -> Self {
        Self {
            succeeded: o.succeeded,
            exit_code: o.exit_code,
            message: o.message,
            attempt: o.attempt,
            duration_ms: o.duration_ms,
            targets: o.targets.map(Into::into),
        }
    }
}

impl From<wit_types::TargetReport> for TargetReport {
    fn from(r: wit_types::TargetReport) -> Self {
        Self {
            total: r.total,
            ok: r.ok,
            failed: r.failed,
            unreachable: r.unreachable,
            problems: r
                .problems
                .into_iter()
                .map(|p| TargetResult {
                    name: p.name,
                    outcome: match p.outcome {
                        wit_types::TargetOutcome::Ok => TargetOutcome::Ok,
                        wit_types::TargetOutcome::Failed => TargetOutcome::Failed,
                        wit_types::TargetOutcome::Unreachable => TargetOutcome::Unreachable,
                    },
                    reason: p.reason,
                })
                .collect(),
        }
    }
}

impl From<Verdict> for wit_types::Verdict {
    fn from(verdict: Verdict) -> Self {
        match verdict {
            Verdict::Completed => Self::Completed,
            Verdict::Failed(reason) => Self::Failed(reason),
            Verdict::Retry(reason) => Self::Retry(reason),
        }
    }
}

/// What `info` returns: the author's [`Info`] and the params' JSON Schema, as JSON text.
fn plugin_info(info: Info, params_schema: String) -> wit_types::PluginInfo {
    wit_types::PluginInfo {
        type_name: info.type_name,
        version: info.version,
        description: info.description,
        params_schema,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoParams;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct AtParams {
        schedule: String,
        command: String,
        retries: Option<u32>,
        nested: Option<Nested>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Nested {
        items: Vec<u32>,
    }

    fn error_of<P: serde::de::DeserializeOwned + std::fmt::Debug>(json: &str) -> String {
        match parse_params::<P>(json) {
            Ok(p) => panic!("{json} parsed as {p:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn missing_field_is_named_without_json_position() {
        assert_eq!(
            error_of::<AtParams>(r#"{"command":"date"}"#),
            "invalid params: missing field `schedule`"
        );
    }

    #[test]
    fn wrong_type_names_the_path() {
        assert_eq!(
            error_of::<AtParams>(r#"{"schedule":"x","command":"y","retries":"3"}"#),
            "invalid params at `retries`: invalid type: string \"3\", expected u32"
        );
        assert_eq!(
            error_of::<AtParams>(r#"{"schedule":"x","command":"y","nested":{"items":[1,"a"]}}"#),
            "invalid params at `nested.items[1]`: invalid type: string \"a\", expected u32"
        );
    }

    #[test]
    fn unknown_field_is_named() {
        let error = error_of::<AtParams>(r#"{"schedule":"x","command":"y","comand":"z"}"#);
        assert!(
            error.starts_with("invalid params at `comand`: unknown field `comand`"),
            "{error}"
        );
    }

    #[test]
    fn no_params_accepts_empty_object_empty_string_and_null() {
        for json in ["{}", "", " null ", "{ }"] {
            assert_eq!(parse_params::<NoParams>(json), Ok(NoParams {}), "{json:?}");
        }
    }

    #[test]
    fn no_params_rejects_a_parameter() {
        let error = error_of::<NoParams>(r#"{"nodes":3}"#);
        assert!(error.contains("unknown field `nodes`"), "{error}");
    }

    #[test]
    fn malformed_json_is_an_error() {
        let error = error_of::<NoParams>("{");
        assert!(error.starts_with("invalid params"), "{error}");
        assert!(error.contains("EOF"), "{error}");
        assert!(error_of::<NoParams>("{} x").starts_with("invalid params: trailing characters"));
    }

    /// A type using every default, to drive the glue as the component would.
    struct Minimal;

    impl WorkflowType for Minimal {
        type Params = NoParams;

        fn info() -> crate::Info {
            crate::Info::new("minimal", "1.2.3").description("d")
        }

        fn template(ctx: &Context<NoParams>) -> Result<Vec<Step>, Error> {
            match ctx.targets.len() {
                0 => Err(Error::new("no targets")),
                _ => Ok(vec![Step::new("only", "true").env("K", "V")]),
            }
        }
    }

    fn wit_context(params: &str, targets: usize) -> wit::Context {
        wit::Context {
            group_name: "g".into(),
            namespace: "ns".into(),
            cluster_name: "c".into(),
            targets: (0..targets)
                .map(|i| crate::bindings::workflow::plugin::types::Target {
                    name: format!("node-{i}"),
                    ip: String::new(),
                    role: "Worker".into(),
                })
                .collect(),
            params: params.into(),
            now: 7,
        }
    }

    #[test]
    fn info_carries_the_params_schema() {
        let info = info::<Minimal>();
        assert_eq!(
            (info.type_name.as_str(), info.version.as_str()),
            ("minimal", "1.2.3")
        );
        let schema: serde_json::Value =
            serde_json::from_str(&info.params_schema).unwrap_or_default();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn template_converts_steps_and_passes_errors_through() {
        let steps = template::<Minimal>(wit_context("{}", 1)).unwrap_or_default();
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].env[0].name, "K");
        assert_eq!(
            template::<Minimal>(wit_context("{}", 0)).err(),
            Some("no targets".to_owned())
        );
        let bad = wit_context(r#"{"x":1}"#, 1);
        assert!(template::<Minimal>(bad).is_err_and(|e| e.contains("unknown field `x`")));
    }

    #[test]
    fn gate_starts_now_by_default_and_holds_on_unreadable_params() {
        let step: wit::Step = Step::new("only", "true").into();
        assert!(matches!(
            gate::<Minimal>(step.clone(), wit_context("{}", 1)),
            wit::GateDecision::StartNow
        ));
        assert!(matches!(
            gate::<Minimal>(step, wit_context("[", 1)),
            wit::GateDecision::NotBefore(i64::MAX)
        ));
    }

    #[test]
    fn evaluate_defaults_to_exit_code_zero_is_success() {
        let step: wit::Step = Step::new("only", "true").into();
        let outcome = |code| wit::StepOutcome {
            succeeded: code == 0,
            exit_code: Some(code),
            message: "boom".into(),
            attempt: 1,
            duration_ms: 5,
            targets: None,
        };
        assert!(matches!(
            evaluate::<Minimal>(step.clone(), outcome(0), wit_context("{}", 1)),
            wit::Verdict::Completed
        ));
        assert!(matches!(
            evaluate::<Minimal>(step.clone(), outcome(3), wit_context("{}", 1)),
            wit::Verdict::Failed(reason) if reason == "exit code 3: boom"
        ));
        // Params that do not parse: judged without the context, never lost.
        assert!(matches!(
            evaluate::<Minimal>(step, outcome(3), wit_context("[", 1)),
            wit::Verdict::Failed(reason) if reason == "exit code 3: boom"
        ));
    }

    #[test]
    fn evaluate_for_gets_the_groups_context_and_the_per_target_report() {
        struct Counting;
        impl WorkflowType for Counting {
            type Params = crate::NoParams;
            fn info() -> crate::Info {
                crate::Info::new("counting", "1.0.0")
            }
            fn template(_: &Context<crate::NoParams>) -> Result<Vec<Step>, Error> {
                Ok(Vec::new())
            }
            fn evaluate_for(
                _: &Step,
                outcome: &StepOutcome,
                ctx: &Context<crate::NoParams>,
            ) -> Verdict {
                let bad = outcome.targets.as_ref().map_or(0, TargetReport::bad);
                Verdict::Failed(format!("{bad} of {} targets", ctx.targets.len()))
            }
        }
        let outcome = wit::StepOutcome {
            succeeded: false,
            exit_code: Some(1),
            message: String::new(),
            attempt: 1,
            duration_ms: 5,
            targets: Some(wit_types::TargetReport {
                total: 3,
                ok: 1,
                failed: 1,
                unreachable: 1,
                problems: Vec::new(),
            }),
        };
        let step: wit::Step = Step::new("only", "true").into();
        assert!(matches!(
            evaluate::<Counting>(step, outcome, wit_context("{}", 3)),
            wit::Verdict::Failed(reason) if reason == "2 of 3 targets"
        ));
    }

    #[test]
    fn gates_verdicts_and_outcomes_cross_the_edge_unchanged() {
        assert!(matches!(
            wit::GateDecision::from(Gate::NotBefore(42)),
            wit::GateDecision::NotBefore(42)
        ));
        assert!(matches!(
            wit::Verdict::from(Verdict::Retry("again".into())),
            wit::Verdict::Retry(reason) if reason == "again"
        ));
        assert!(matches!(
            wit::Verdict::from(Verdict::Failed("no".into())),
            wit::Verdict::Failed(reason) if reason == "no"
        ));
        let outcome = wit::StepOutcome {
            succeeded: false,
            exit_code: None,
            message: "m".into(),
            attempt: 3,
            duration_ms: 9,
            targets: None,
        };
        assert_eq!(
            StepOutcome::from(outcome),
            StepOutcome {
                succeeded: false,
                exit_code: None,
                message: "m".into(),
                attempt: 3,
                duration_ms: 9,
                targets: None,
            }
        );
    }

    #[test]
    fn steps_round_trip_through_the_bindings() {
        let step = Step::new("a", "echo")
            .description("d")
            .depends_on(["b"])
            .image("i")
            .env("K", "V")
            .timeout_secs(5)
            .retries(2);
        assert_eq!(Step::from(wit::Step::from(step.clone())), step);
    }
}
