//! The `setup` workflow type: installs the needed packages, then configures the nodes. Its
//! steps are the seed's `setup` template; each logs in to every target over SSH
//! (`workflow-runner`, see [`workflow_plugin_sdk::remote`]) and acts there:
//!
//! | step | description | on each target | depends on |
//! |---|---|---|---|
//! | `install-packages` | 安装必要软件包 | installs `packages` with the target's own package manager (apt-get, dnf, yum, zypper or apk, detected), skipping those installed | |
//! | `configure-nodes` | 配置节点 | runs the node script `scriptFile` with the target's facts in its environment; without one, reports the facts | `install-packages` |
//!
//! # Parameters (`spec.params.setup`), all optional
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `packages` | `[]` | package names, e.g. `[chrony, conntrack]`; none: the step only detects the package manager |
//! | `scriptFile` | none | a file in the step pod (mount a ConfigMap with `spec.podTemplates.setup`) run on every target by `sh` (or its `#!` interpreter) |
//! | `retries` | 2 | times `install-packages` is tried again when a target's package database is locked |
//! | `maxFailedTargets`, `minHealthyPercent` | none may fail | how many targets may fail a step before it fails |
//! | `ssh` | | how to log in: `user`, `port`, `parallel`, `connectTimeoutSeconds`, `commandTimeoutSeconds`, `hostKeyPolicy`, `roles` |
//!
//! The node script sees `WORKFLOW_TARGET_NAME`, `WORKFLOW_TARGET_IP`, `WORKFLOW_TARGET_ROLE`,
//! `WORKFLOW_CLUSTER_NAME`, `WORKFLOW_OS_ID`, `WORKFLOW_OS_VERSION`, `WORKFLOW_ARCH` and
//! `WORKFLOW_PACKAGE_MANAGER`.
//!
//! ```yaml
//! spec:
//!   workflowSteps: [setup]
//!   params:
//!     setup:
//!       packages: [chrony]
//!       scriptFile: /etc/workflow/scripts/configure.sh
//!   podTemplates:
//!     setup:
//!       volumes: [{name: scripts, configMap: {name: node-scripts}}]
//!       volumeMounts: [{name: scripts, mountPath: /etc/workflow/scripts, readOnly: true}]
//! ```
//!
//! # Success logic
//!
//! - Every target succeeded, or the ones that failed are within `maxFailedTargets` /
//!   `minHealthyPercent`: Completed.
//! - Every failed target exited with [`EX_TEMPFAIL`] (75, "temporary failure, try again": the
//!   package database locked by another process): **retry** the step, within its `retries`
//!   (installed packages are skipped on the next attempt).
//! - Otherwise the step fails, naming each failed target and why.

use workflow_plugin_sdk::prelude::*;
use workflow_plugin_sdk::remote::{self, SshParams, TargetBudget, shell_assignments};

/// The exit code (`EX_TEMPFAIL` of `sysexits.h`) by which a target asks for a retry.
pub const EX_TEMPFAIL: i32 = 75;

const INSTALL_PACKAGES: &str = include_str!("../scripts/install-packages.sh");
const CONFIGURE_NODES: &str = include_str!("../scripts/configure-nodes.sh");

/// The parameters of a `setup` workflow.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(
    crate = "workflow_plugin_sdk::serde",
    rename_all = "camelCase",
    deny_unknown_fields,
    default
)]
#[schemars(crate = "workflow_plugin_sdk::schemars")]
pub struct SetupParams {
    /// Packages to install with each target's package manager.
    #[schemars(inner(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9.+_:=~-]*$")))]
    pub packages: Vec<String>,
    /// A file in the step pod (e.g. a ConfigMap's key mounted by `spec.podTemplates.setup`)
    /// run on every target by `configure-nodes`.
    #[schemars(regex(pattern = r"^/"))]
    pub script_file: Option<String>,
    /// Times `install-packages` is tried again when a target asks for it (default 2).
    #[schemars(range(max = 10))]
    pub retries: Option<u32>,
    /// At most this many targets may fail a step.
    pub max_failed_targets: Option<u32>,
    /// At least this percentage of the targets must pass a step.
    #[schemars(range(max = 100))]
    pub min_healthy_percent: Option<u8>,
    /// How to log in to the targets.
    pub ssh: SshParams,
}

/// The `setup` workflow type.
pub struct Setup;

impl WorkflowType for Setup {
    type Params = SetupParams;

    fn info() -> Info {
        Info::new("setup", env!("CARGO_PKG_VERSION")).description(
            "Installs packages with each target's package manager, then runs a node script, over SSH",
        )
    }

    fn validate(params: &SetupParams) -> Result<(), Error> {
        let fine = |p: &String| {
            p.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".+_:=~-".contains(c))
        };
        if let Some(bad) = params.packages.iter().find(|p| !fine(p)) {
            return Err(Error::new(format!(
                "invalid params at `packages`: {bad:?} is not a package name"
            )));
        }
        if let Some(file) = &params.script_file
            && !file.starts_with('/')
        {
            return Err(Error::new(format!(
                "invalid params at `scriptFile`: {file:?} must be an absolute path in the step pod"
            )));
        }
        Ok(())
    }

    fn template(ctx: &Context<SetupParams>) -> Result<Vec<Step>, Error> {
        Self::validate(&ctx.params)?;
        let p = &ctx.params;
        let budget = TargetBudget {
            max_failed_targets: p.max_failed_targets,
            min_healthy_percent: p.min_healthy_percent,
        };
        let install = shell_assignments(&[("PACKAGES", p.packages.join(" "))]) + INSTALL_PACKAGES;
        let configure = shell_assignments(&[("WORKFLOW_CLUSTER_NAME", ctx.cluster_name.clone())])
            + CONFIGURE_NODES;
        let mut configure_step = remote::on_targets("configure-nodes", configure, &p.ssh, budget)
            .description("配置节点")
            .depends_on(["install-packages"]);
        if let Some(file) = &p.script_file {
            configure_step = configure_step.env("WORKFLOW_SSH_STDIN_FILE", file.clone());
        }
        Ok(vec![
            // Packages installed again are configured again, in a re-run too.
            remote::on_targets("install-packages", install, &p.ssh, budget)
                .description("安装必要软件包")
                .retries(p.retries.unwrap_or(2))
                .rerun_with(["configure-nodes"]),
            configure_step,
        ])
    }

    fn evaluate(step: &Step, outcome: &StepOutcome) -> Verdict {
        let verdict = remote::verdict(step, outcome);
        let Verdict::Failed(reason) = &verdict else {
            return verdict;
        };
        let tempfail = format!("exit code {EX_TEMPFAIL} ");
        let asks_retry = match remote::target_report(outcome) {
            Some(found) => {
                found.unreachable == 0
                    && !found.problems.is_empty()
                    && found.problems.len() as u32 == found.failed
                    && found
                        .problems
                        .iter()
                        .all(|p| p.reason.starts_with(&tempfail))
            }
            None => outcome.exit_code == Some(EX_TEMPFAIL),
        };
        if asks_retry {
            Verdict::Retry(format!("temporary failure ({reason})"))
        } else {
            verdict
        }
    }
}

export_workflow_type!(Setup);

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(exit_code: i32, message: &str) -> StepOutcome {
        StepOutcome {
            succeeded: exit_code == 0,
            exit_code: Some(exit_code),
            message: message.to_owned(),
            attempt: 1,
            duration_ms: 30_000,
            targets: None,
        }
    }

    fn env<'a>(step: &'a Step, name: &str) -> &'a str {
        step.env
            .iter()
            .find(|e| e.name == name)
            .map_or("", |e| e.value.as_str())
    }

    fn steps(params: SetupParams) -> Vec<Step> {
        let ctx = Context {
            cluster_name: "prod".into(),
            params,
            ..Context::default()
        };
        Setup::template(&ctx).unwrap_or_default()
    }

    #[test]
    fn the_seeds_steps_install_then_configure_on_the_targets() {
        let steps = steps(SetupParams::default());
        assert_eq!(steps[0].rerun_with, ["configure-nodes"]);
        let names: Vec<_> = steps
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.description.as_str(),
                    s.depends_on.clone(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("install-packages", "安装必要软件包", vec![]),
                (
                    "configure-nodes",
                    "配置节点",
                    vec!["install-packages".to_owned()]
                ),
            ]
        );
        assert!(steps.iter().all(|s| s.command == "workflow-runner"));
        assert!(
            env(&steps[0], "WORKFLOW_SSH_COMMAND").starts_with("PACKAGES=''\n# install-packages")
        );
        assert_eq!(steps[0].retries, Some(2));
        assert!(
            env(&steps[1], "WORKFLOW_SSH_COMMAND")
                .starts_with("WORKFLOW_CLUSTER_NAME='prod'\n# configure-nodes")
        );
        assert_eq!(env(&steps[1], "WORKFLOW_SSH_STDIN_FILE"), "");
    }

    #[test]
    fn packages_and_the_script_file_reach_the_steps() {
        let steps = steps(SetupParams {
            packages: vec!["chrony".into(), "conntrack".into()],
            script_file: Some("/etc/workflow/scripts/configure.sh".into()),
            ..SetupParams::default()
        });
        assert!(
            env(&steps[0], "WORKFLOW_SSH_COMMAND").starts_with("PACKAGES='chrony conntrack'\n")
        );
        assert_eq!(
            env(&steps[1], "WORKFLOW_SSH_STDIN_FILE"),
            "/etc/workflow/scripts/configure.sh"
        );
    }

    #[test]
    fn a_package_name_with_shell_syntax_is_refused() {
        let params = SetupParams {
            packages: vec!["curl; rm -rf /".into()],
            ..SetupParams::default()
        };
        assert_eq!(
            Setup::validate(&params),
            Err(Error::new(
                "invalid params at `packages`: \"curl; rm -rf /\" is not a package name"
            ))
        );
    }

    #[test]
    fn info_names_the_type() {
        assert_eq!(Setup::info().type_name, "setup");
    }

    #[test]
    fn a_locked_package_database_on_every_failed_target_asks_for_a_retry() {
        let step = &steps(SetupParams::default())[0];
        let locked = "targets 2: 1 ok, 1 failed, 0 unreachable\n\
            FAIL node-2: exit code 75 after 1.00 s: the package database is locked by another process; trying again later\n\
            OK node-1 (3.0 s)\n";
        assert_eq!(
            Setup::evaluate(step, &outcome(1, locked)),
            Verdict::Retry(
                "temporary failure (1 of 2 targets failed (none may fail): node-2 failed: exit code 75 \
                 after 1.00 s: the package database is locked by another process; trying again later)"
                    .into()
            )
        );
    }

    #[test]
    fn other_failures_fail_the_step_naming_the_target() {
        let step = &steps(SetupParams::default())[0];
        let failed = "targets 2: 0 ok, 1 failed, 1 unreachable\n\
            FAIL node-2: exit code 1 after 1.00 s: apt-get could not install foo\n\
            UNREACHABLE node-1: connect 10.0.0.1:22: refused\n";
        assert_eq!(
            Setup::evaluate(step, &outcome(1, failed)),
            Verdict::Failed(
                "2 of 2 targets failed (none may fail): node-2 failed: exit code 1 after 1.00 s: \
                 apt-get could not install foo; node-1 unreachable: connect 10.0.0.1:22: refused"
                    .into()
            )
        );
    }

    #[test]
    fn a_plain_command_exiting_75_asks_for_a_retry() {
        let step = Step::new("install-packages", "install.sh");
        assert_eq!(
            Setup::evaluate(&step, &outcome(75, "mirror unavailable")),
            Verdict::Retry("temporary failure (exit code 75: mirror unavailable)".into())
        );
    }
}
