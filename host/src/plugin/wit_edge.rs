//! The WIT edge: the only conversions between the host's plugin types (the shared model) and
//! the bindings generated from `plugin-sdk/wit/workflow-plugin.wit`.

use super::bindings::workflow::plugin::types as wit;
use super::types::{EnvVar, GroupContext, Step, StepOutcome, Target};

impl From<&Target> for wit::Target {
    fn from(t: &Target) -> Self {
        Self {
            name: t.name.clone(),
            ip: t.ip.clone(),
            role: t.role.clone(),
        }
    }
}

impl From<&EnvVar> for wit::EnvVar {
    fn from(e: &EnvVar) -> Self {
        Self {
            name: e.name.clone(),
            value: e.value.clone(),
        }
    }
}

impl From<wit::EnvVar> for EnvVar {
    fn from(e: wit::EnvVar) -> Self {
        Self {
            name: e.name,
            value: e.value,
        }
    }
}

impl From<&Step> for wit::Step {
    fn from(s: &Step) -> Self {
        Self {
            name: s.name.clone(),
            description: s.description.clone(),
            command: s.command.clone(),
            depends_on: s.depends_on.clone(),
            image: s.image.clone(),
            env: s.env.iter().map(Into::into).collect(),
            timeout_seconds: s.timeout_seconds,
            retries: s.retries,
        }
    }
}

impl From<wit::Step> for Step {
    fn from(s: wit::Step) -> Self {
        Self {
            name: s.name,
            description: s.description,
            command: s.command,
            depends_on: s.depends_on,
            image: s.image,
            env: s.env.into_iter().map(Into::into).collect(),
            timeout_seconds: s.timeout_seconds,
            retries: s.retries,
        }
    }
}

impl From<&GroupContext> for wit::Context {
    fn from(c: &GroupContext) -> Self {
        Self {
            group_name: c.group_name.clone(),
            namespace: c.namespace.clone(),
            cluster_name: c.cluster_name.clone(),
            targets: c.targets.iter().map(Into::into).collect(),
            params: if c.params.is_null() {
                "{}".to_string()
            } else {
                c.params.to_string()
            },
            now: c.now,
        }
    }
}

impl From<&StepOutcome> for wit::StepOutcome {
    fn from(o: &StepOutcome) -> Self {
        Self {
            succeeded: o.succeeded,
            exit_code: o.exit_code,
            message: o.message.clone(),
            attempt: o.attempt,
            duration_ms: o.duration_ms,
        }
    }
}
