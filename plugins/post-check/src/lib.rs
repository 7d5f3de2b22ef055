//! The `post-check` workflow type: verifies on every target that what setup promised is there.
//! Its step is the seed's `post-check` template; it logs in to every target over SSH
//! (`workflow-runner`, see [`workflow_plugin_sdk::remote`]) and checks there:
//!
//! | step | description | checks on each target | depends on |
//! |---|---|---|---|
//! | `verify-installation` | 验证安装结果 | `packages` installed, `services` running, `files` present, `commands` on PATH | |
//! | `verify-node-ready` (with `nodeReady`) | 验证节点就绪 | the target's Node object (named as the target) is Ready, through the API server | `verify-installation` |
//!
//! # Parameters (`spec.params.post-check`), all optional
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `packages` | `[]` | installed according to the target's package database (dpkg, rpm or apk) |
//! | `services` | `[]` | active: systemd's `is-active`, else OpenRC's `status`, else a process of that name |
//! | `files` | `[]` | absolute paths that must exist |
//! | `commands` | `[]` | commands that must be on the login's PATH |
//! | `nodeReady` | `false` | also check that each target's Node is Ready, then remove the joining taint `workflow.rxg456.cn/joining` setup's `join` registers it with (the step's pod needs a service account that may get nodes, and patch those with the taint: `spec.podTemplates.post-check.serviceAccountName`, e.g. `deploy/join/`'s) |
//! | `nodeReadyTimeoutSeconds` | 300 | how long to wait for the Nodes to be Ready |
//! | `maxFailedTargets`, `minHealthyPercent` | none may fail | how many targets may fail before the step fails |
//! | `ssh` | | how to log in: `user`, `port`, `parallel`, `connectTimeoutSeconds`, `commandTimeoutSeconds`, `hostKeyPolicy`, `roles`, `jumpHost` (`address`, `user`, `port`) |
//!
//! With nothing asked, the step checks that every target can be logged in to.
//!
//! ```yaml
//! spec:
//!   workflowSteps: [post-check]
//!   params:
//!     post-check:
//!       packages: [chrony]
//!       services: [chronyd]
//!       files: [/etc/chrony/chrony.conf]
//! ```
//!
//! # Success logic
//!
//! Completed when every target passed, or when the targets that failed are within
//! `maxFailedTargets` / `minHealthyPercent`; otherwise Failed, naming each failed target and
//! what it lacks, e.g. `node-1 failed: exit code 1 after 0.03 s: services not running: chronyd`.

use workflow_plugin_sdk::prelude::*;
use workflow_plugin_sdk::remote::{self, SshParams, TargetBudget, shell_assignments};

const VERIFY_INSTALLATION: &str = include_str!("../scripts/verify-installation.sh");

/// The parameters of a `post-check` workflow.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(
    crate = "workflow_plugin_sdk::serde",
    rename_all = "camelCase",
    deny_unknown_fields,
    default
)]
#[schemars(crate = "workflow_plugin_sdk::schemars")]
pub struct PostCheckParams {
    /// Packages that must be installed (package names, without a version).
    pub packages: Vec<String>,
    /// Services that must be running.
    pub services: Vec<String>,
    /// Absolute paths that must exist.
    pub files: Vec<String>,
    /// Commands that must be on the login's PATH.
    pub commands: Vec<String>,
    /// Also check that each target's Node object (named as the target) is Ready.
    pub node_ready: bool,
    /// How long to wait for the Nodes to be Ready, in seconds (default 300).
    #[schemars(range(min = 1, max = 86400))]
    pub node_ready_timeout_seconds: Option<u32>,
    /// At most this many targets may fail.
    pub max_failed_targets: Option<u32>,
    /// At least this percentage of the targets must pass.
    #[schemars(range(max = 100))]
    pub min_healthy_percent: Option<u8>,
    /// How to log in to the targets.
    pub ssh: SshParams,
}

/// The `post-check` workflow type.
pub struct PostCheck;

impl WorkflowType for PostCheck {
    type Params = PostCheckParams;

    fn info() -> Info {
        Info::new("post-check", env!("CARGO_PKG_VERSION")).description(
            "Verifies over SSH that every target has the promised packages, services and files",
        )
    }

    fn validate(p: &PostCheckParams) -> Result<(), Error> {
        words::each("packages", &p.packages, words::package_name)?;
        words::each("services", &p.services, words::service_name)?;
        words::each("files", &p.files, words::path)?;
        words::each("commands", &p.commands, words::command_name)?;
        p.ssh.validate()
    }

    fn template(ctx: &Context<PostCheckParams>) -> Result<Vec<Step>, Error> {
        Self::validate(&ctx.params)?;
        ctx.params.ssh.validate_targets(&ctx.targets)?;
        let p = &ctx.params;
        let script = shell_assignments(&[
            ("PACKAGES", p.packages.join(" ")),
            ("SERVICES", p.services.join(" ")),
            ("FILES", p.files.join(" ")),
            ("COMMANDS", p.commands.join(" ")),
        ]) + VERIFY_INSTALLATION;
        let budget = TargetBudget {
            max_failed_targets: p.max_failed_targets,
            min_healthy_percent: p.min_healthy_percent,
        };
        let mut steps = vec![
            remote::on_targets("verify-installation", script, &p.ssh, budget)
                .description("验证安装结果"),
        ];
        if p.node_ready {
            let timeout = p.node_ready_timeout_seconds.unwrap_or(300);
            steps.push(
                remote::nodes_ready("verify-node-ready", timeout, &p.ssh, budget)
                    .description("验证节点就绪")
                    .depends_on(["verify-installation"]),
            );
        }
        Ok(steps)
    }

    fn evaluate(step: &Step, outcome: &StepOutcome) -> Verdict {
        remote::verdict(step, outcome)
    }
}

export_workflow_type!(PostCheck);

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(exit_code: i32, message: &str) -> StepOutcome {
        StepOutcome {
            succeeded: exit_code == 0,
            exit_code: Some(exit_code),
            message: message.to_owned(),
            attempt: 1,
            duration_ms: 500,
            targets: None,
        }
    }

    fn template(params: PostCheckParams) -> Vec<Step> {
        PostCheck::template(&Context {
            params,
            ..Context::default()
        })
        .unwrap_or_default()
    }

    fn script(step: &Step) -> &str {
        step.env
            .iter()
            .find(|e| e.name == "WORKFLOW_SSH_COMMAND")
            .map_or("", |e| e.value.as_str())
    }

    #[test]
    fn the_seeds_step_verifies_on_the_targets() {
        let steps = template(PostCheckParams::default());
        assert_eq!(steps.len(), 1);
        assert_eq!(
            (steps[0].name.as_str(), steps[0].description.as_str()),
            ("verify-installation", "验证安装结果")
        );
        assert_eq!(steps[0].command, "workflow-runner");
        assert!(
            script(&steps[0]).starts_with(
                "PACKAGES=''\nSERVICES=''\nFILES=''\nCOMMANDS=''\n# verify-installation"
            )
        );
    }

    #[test]
    fn what_setup_promised_reaches_the_script() {
        let steps = template(PostCheckParams {
            packages: vec!["chrony".into()],
            services: vec!["chronyd".into()],
            files: vec!["/etc/chrony/chrony.conf".into()],
            ..PostCheckParams::default()
        });
        assert!(script(&steps[0]).starts_with(
            "PACKAGES='chrony'\nSERVICES='chronyd'\nFILES='/etc/chrony/chrony.conf'\nCOMMANDS=''\n"
        ));
    }

    #[test]
    fn words_that_are_not_words_of_their_kind_are_refused_naming_the_field_and_the_rule() {
        let refused = |params: PostCheckParams| {
            PostCheck::validate(&params)
                .err()
                .map(|e| e.message().to_owned())
                .unwrap_or_default()
        };
        assert_eq!(
            refused(PostCheckParams {
                files: vec!["etc/x".into()],
                ..PostCheckParams::default()
            }),
            "invalid params at `files[0]`: \"etc/x\" is not a valid path: it must be an \
             absolute path (start with '/')"
        );
        let cases = [
            (
                PostCheckParams {
                    services: vec!["a$(reboot)".into()],
                    ..PostCheckParams::default()
                },
                "`services[0]`: \"a$(reboot)\" is not a valid service name",
            ),
            (
                PostCheckParams {
                    packages: vec!["chrony".into(), "curl-".into()],
                    ..PostCheckParams::default()
                },
                "`packages[1]`: \"curl-\" is not a valid package name: it ends in '-'",
            ),
            (
                PostCheckParams {
                    packages: vec!["lib*".into()],
                    ..PostCheckParams::default()
                },
                "`packages[0]`: \"lib*\" is not a valid package name: it holds '*'",
            ),
            (
                PostCheckParams {
                    packages: vec!["chrony=4.3".into()],
                    ..PostCheckParams::default()
                },
                "it pins a version with '='",
            ),
            (
                PostCheckParams {
                    files: vec!["/etc/*.conf".into()],
                    ..PostCheckParams::default()
                },
                "`files[0]`: \"/etc/*.conf\" is not a valid path: it holds '*'",
            ),
            (
                PostCheckParams {
                    commands: vec!["--version".into()],
                    ..PostCheckParams::default()
                },
                "`commands[0]`: \"--version\" is not a valid command name: it starts with '-'",
            ),
        ];
        for (params, says) in cases {
            let why = refused(params);
            assert!(why.contains(says), "{why:?} should say {says:?}");
        }
    }

    #[test]
    fn node_ready_adds_a_step_that_checks_the_nodes_after_the_installation() {
        let steps = template(PostCheckParams {
            node_ready: true,
            node_ready_timeout_seconds: Some(120),
            max_failed_targets: Some(1),
            ..PostCheckParams::default()
        });
        assert_eq!(steps.len(), 2);
        let node = &steps[1];
        assert_eq!(
            (
                node.name.as_str(),
                node.description.as_str(),
                node.depends_on.clone()
            ),
            (
                "verify-node-ready",
                "验证节点就绪",
                vec!["verify-installation".to_owned()]
            )
        );
        let env: Vec<(&str, &str)> = node
            .env
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(
            env,
            [
                ("WORKFLOW_MAX_FAILED_TARGETS", "1"),
                ("WORKFLOW_CHECK_NODE_READY", "true"),
                ("WORKFLOW_NODE_READY_TIMEOUT", "120"),
                (
                    "WORKFLOW_NODE_READY_REMOVE_TAINT",
                    "workflow.rxg456.cn/joining"
                )
            ]
        );
        assert_eq!(node.timeout_seconds, Some(180));
    }

    #[test]
    fn info_names_the_type() {
        assert_eq!(PostCheck::info().type_name, "post-check");
    }

    #[test]
    fn a_target_lacking_something_fails_the_step_naming_it() {
        let steps = template(PostCheckParams::default());
        let message = "targets 2: 1 ok, 1 failed, 0 unreachable\n\
            FAIL node-1: exit code 1 after 0.03 s: services not running: chronyd\nOK node-2 (0.1 s)\n";
        assert_eq!(
            PostCheck::evaluate(&steps[0], &outcome(1, message)),
            Verdict::Failed(
                "1 of 2 targets failed (none may fail): node-1 failed: exit code 1 after 0.03 s: \
                 services not running: chronyd"
                    .into()
            )
        );
    }
}
