//! The `pre-check` workflow type: checks the target nodes and their network before anything is
//! installed. Its steps are the seed's `pre-check` template; each logs in to every target over
//! SSH (`workflow-runner`, see [`workflow_plugin_sdk::remote`]) and checks it there:
//!
//! | step | description | checks on each target | depends on |
//! |---|---|---|---|
//! | `validate-nodes` | 验证节点配置 | Linux, OS family and version, free disk and memory, commands, clock skew | |
//! | `check-network` | 检查网络连接 | TCP to the other targets' SSH port and to the `endpoints` | `validate-nodes` |
//!
//! # Parameters (`spec.params.pre-check`), all optional
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `osFamilies` | any | the target's `/etc/os-release` `ID` or `ID_LIKE` must be one of these, e.g. `[debian, rhel]` |
//! | `minOsVersion` | none | its `VERSION_ID` must be at least this (dotted numbers), e.g. `"11"` |
//! | `diskPath` | `/` | where free disk space is measured |
//! | `minDiskMiB` | 1024 | free MiB needed at `diskPath` |
//! | `minMemoryMiB` | 256 | available memory needed, MiB |
//! | `requiredCommands` | `[]` | commands that must be on the login's PATH (`sh` always is) |
//! | `maxClockSkewSeconds` | 300 | how far the target's clock may be from the step pod's |
//! | `endpoints` | `[]` | `host:port` every target must open a TCP connection to, e.g. the API server `10.0.0.1:6443` |
//! | `checkPeers` | when at most 50 targets | each target must reach every other target on the SSH port |
//! | `probeTimeoutSeconds` | 3 | time for one TCP probe |
//! | `maxFailedTargets`, `minHealthyPercent` | none may fail | how many targets may fail a step before it fails |
//! | `ssh` | | how to log in: `user`, `port`, `parallel`, `connectTimeoutSeconds`, `commandTimeoutSeconds`, `hostKeyPolicy`, `roles`, `jumpHost` (`address`, `user`, `port`) |
//!
//! ```yaml
//! spec:
//!   workflowSteps: [pre-check]
//!   params:
//!     pre-check:
//!       osFamilies: [debian, ubuntu]
//!       minDiskMiB: 4096
//!       requiredCommands: [systemctl, iptables]
//!       endpoints: ["10.0.0.1:6443"]
//!       maxFailedTargets: 1
//! ```
//!
//! # Success logic
//!
//! A step is Completed when every target passed, or when the targets that failed (or could not
//! be reached) are within `maxFailedTargets` / `minHealthyPercent`. Otherwise it fails, naming
//! each failed target and why, e.g. `1 of 3 targets failed (none may fail): node-2 failed: exit
//! code 1 after 0.04 s: disk: 512 MiB free on /, need 1024`.

use workflow_plugin_sdk::prelude::*;
use workflow_plugin_sdk::remote::{self, SshParams, TargetBudget, shell_assignments};

/// Peers are checked by default when there are at most this many targets (each target probes
/// every other one).
pub const PEER_CHECK_DEFAULT_LIMIT: usize = 50;

const VALIDATE_NODES: &str = include_str!("../scripts/validate-nodes.sh");
const CHECK_NETWORK: &str = include_str!("../scripts/check-network.sh");

/// The parameters of a `pre-check` workflow.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(
    crate = "workflow_plugin_sdk::serde",
    rename_all = "camelCase",
    deny_unknown_fields,
    default
)]
#[schemars(crate = "workflow_plugin_sdk::schemars")]
pub struct PreCheckParams {
    /// The target's OS (`/etc/os-release` `ID` or `ID_LIKE`) must be one of these; any when empty.
    pub os_families: Vec<String>,
    /// The target's `VERSION_ID` must be at least this (dotted numbers, e.g. `"11"`, `"22.04"`).
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)*$"))]
    pub min_os_version: Option<String>,
    /// Where free disk space is measured (default `/`).
    #[schemars(length(min = 1))]
    pub disk_path: Option<String>,
    /// Free MiB needed at `diskPath` (default 1024).
    #[serde(rename = "minDiskMiB")]
    #[schemars(rename = "minDiskMiB")]
    pub min_disk_mib: Option<u64>,
    /// Available memory needed, in MiB (default 256).
    #[serde(rename = "minMemoryMiB")]
    #[schemars(rename = "minMemoryMiB")]
    pub min_memory_mib: Option<u64>,
    /// Commands that must be on the login's PATH.
    pub required_commands: Vec<String>,
    /// How far the target's clock may be from the step pod's, in seconds (default 300).
    pub max_clock_skew_seconds: Option<u32>,
    /// `host:port` (or `[IPv6]:port`) every target must open a TCP connection to.
    pub endpoints: Vec<String>,
    /// Whether each target must reach every other target on the SSH port (default: when there
    /// are at most 50 targets).
    pub check_peers: Option<bool>,
    /// Time for one TCP probe, in seconds (default 3).
    #[schemars(range(min = 1, max = 60))]
    pub probe_timeout_seconds: Option<u32>,
    /// At most this many targets may fail a step.
    pub max_failed_targets: Option<u32>,
    /// At least this percentage of the targets must pass a step.
    #[schemars(range(max = 100))]
    pub min_healthy_percent: Option<u8>,
    /// How to log in to the targets.
    pub ssh: SshParams,
}

impl PreCheckParams {
    fn budget(&self) -> TargetBudget {
        TargetBudget {
            max_failed_targets: self.max_failed_targets,
            min_healthy_percent: self.min_healthy_percent,
        }
    }
}

/// The `pre-check` workflow type.
pub struct PreCheck;

impl WorkflowType for PreCheck {
    type Params = PreCheckParams;

    fn info() -> Info {
        Info::new("pre-check", env!("CARGO_PKG_VERSION")).description(
            "Checks every target over SSH (OS, disk, memory, commands, clock), then its network",
        )
    }

    fn validate(params: &PreCheckParams) -> Result<(), Error> {
        words::each("osFamilies", &params.os_families, words::os_id)?;
        words::each(
            "requiredCommands",
            &params.required_commands,
            words::command_name,
        )?;
        words::each("endpoints", &params.endpoints, words::endpoint)?;
        if let Some(disk_path) = &params.disk_path {
            words::path("diskPath", disk_path)?;
        }
        params.ssh.validate()
    }

    fn template(ctx: &Context<PreCheckParams>) -> Result<Vec<Step>, Error> {
        Self::validate(&ctx.params)?;
        ctx.params.ssh.validate_targets(&ctx.targets)?;
        let p = &ctx.params;
        let mut commands = vec!["sh".to_owned()];
        commands.extend(p.required_commands.iter().cloned());
        let validate = shell_assignments(&[
            ("OS_FAMILIES", p.os_families.join(" ")),
            (
                "MIN_OS_VERSION",
                p.min_os_version.clone().unwrap_or_default(),
            ),
            (
                "DISK_PATH",
                p.disk_path.clone().unwrap_or_else(|| "/".into()),
            ),
            ("MIN_DISK_MIB", p.min_disk_mib.unwrap_or(1024).to_string()),
            (
                "MIN_MEMORY_MIB",
                p.min_memory_mib.unwrap_or(256).to_string(),
            ),
            ("REQUIRED_COMMANDS", commands.join(" ")),
            (
                "MAX_CLOCK_SKEW_SECONDS",
                p.max_clock_skew_seconds.unwrap_or(300).to_string(),
            ),
        ]) + VALIDATE_NODES;
        let check_peers = p
            .check_peers
            .unwrap_or(ctx.targets.len() <= PEER_CHECK_DEFAULT_LIMIT);
        let peers = if check_peers {
            ctx.targets
                .iter()
                .map(|t| format!("{} {}", t.name, t.ip.trim()))
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            String::new()
        };
        let network = shell_assignments(&[
            ("PEERS", peers),
            ("PEER_PORT", p.ssh.port.unwrap_or(22).to_string()),
            ("ENDPOINTS", p.endpoints.join(" ")),
            (
                "PROBE_TIMEOUT_SECONDS",
                p.probe_timeout_seconds.unwrap_or(3).to_string(),
            ),
        ]) + CHECK_NETWORK;
        Ok(vec![
            remote::on_targets("validate-nodes", validate, &p.ssh, p.budget())
                .description("验证节点配置"),
            remote::on_targets("check-network", network, &p.ssh, p.budget())
                .description("检查网络连接")
                .depends_on(["validate-nodes"]),
        ])
    }

    fn evaluate(step: &Step, outcome: &StepOutcome) -> Verdict {
        remote::verdict(step, outcome)
    }
}

export_workflow_type!(PreCheck);

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str, ip: &str) -> Target {
        Target {
            name: name.into(),
            ip: ip.into(),
            role: "Worker".into(),
        }
    }

    fn ctx(params: PreCheckParams, targets: Vec<Target>) -> Context<PreCheckParams> {
        Context {
            targets,
            params,
            ..Context::default()
        }
    }

    fn env<'a>(step: &'a Step, name: &str) -> &'a str {
        step.env
            .iter()
            .find(|e| e.name == name)
            .map_or("", |e| e.value.as_str())
    }

    fn outcome(exit_code: i32, message: &str) -> StepOutcome {
        StepOutcome {
            succeeded: exit_code == 0,
            exit_code: Some(exit_code),
            message: message.to_owned(),
            attempt: 1,
            duration_ms: 1200,
            targets: None,
        }
    }

    #[test]
    fn the_seeds_steps_run_their_checks_on_the_targets_with_harmless_defaults() {
        let steps = PreCheck::template(&ctx(
            PreCheckParams::default(),
            vec![target("node-1", "192.168.1.101")],
        ))
        .unwrap_or_default();
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
                ("validate-nodes", "验证节点配置", vec![]),
                (
                    "check-network",
                    "检查网络连接",
                    vec!["validate-nodes".to_owned()]
                ),
            ]
        );
        assert!(steps.iter().all(|s| s.command == "workflow-runner"));
        let validate = env(&steps[0], "WORKFLOW_SSH_COMMAND");
        assert!(
            validate.starts_with(
                "OS_FAMILIES=''\nMIN_OS_VERSION=''\nDISK_PATH='/'\nMIN_DISK_MIB='1024'\n\
                 MIN_MEMORY_MIB='256'\nREQUIRED_COMMANDS='sh'\nMAX_CLOCK_SKEW_SECONDS='300'\n# validate-nodes"
            ),
            "{validate}"
        );
        let network = env(&steps[1], "WORKFLOW_SSH_COMMAND");
        assert!(
            network.starts_with("PEERS='node-1 192.168.1.101'\nPEER_PORT='22'\nENDPOINTS=''\n"),
            "{network}"
        );
        // Nothing else is set: the runner's own defaults apply.
        assert_eq!(steps[0].env.len(), 1);
    }

    #[test]
    fn params_reach_the_scripts_quoted_and_the_runner_as_options() {
        let params: PreCheckParams = workflow_plugin_sdk::serde_json::from_str(
            r#"{"osFamilies": ["debian"], "minOsVersion": "11", "minDiskMiB": 4096,
                "requiredCommands": ["systemctl"], "endpoints": ["10.0.0.1:6443"],
                "checkPeers": false, "maxFailedTargets": 1,
                "ssh": {"user": "ops", "port": 2222, "hostKeyPolicy": "accept-any"}}"#,
        )
        .expect("params");
        let steps =
            PreCheck::template(&ctx(params, vec![target("n1", "10.0.0.2")])).unwrap_or_default();
        let validate = env(&steps[0], "WORKFLOW_SSH_COMMAND");
        assert!(validate.contains("OS_FAMILIES='debian'\nMIN_OS_VERSION='11'\n"));
        assert!(validate.contains("MIN_DISK_MIB='4096'\n"));
        assert!(validate.contains("REQUIRED_COMMANDS='sh systemctl'\n"));
        let network = env(&steps[1], "WORKFLOW_SSH_COMMAND");
        assert!(network.starts_with("PEERS=''\nPEER_PORT='2222'\nENDPOINTS='10.0.0.1:6443'\n"));
        for step in &steps {
            assert_eq!(env(step, "WORKFLOW_SSH_USER"), "ops");
            assert_eq!(env(step, "WORKFLOW_SSH_PORT"), "2222");
            assert_eq!(env(step, "WORKFLOW_SSH_HOST_KEY_POLICY"), "accept-any");
            assert_eq!(env(step, "WORKFLOW_MAX_FAILED_TARGETS"), "1");
        }
    }

    #[test]
    fn peers_are_checked_by_default_only_up_to_the_limit() {
        let many: Vec<Target> = (0..=PEER_CHECK_DEFAULT_LIMIT)
            .map(|i| target(&format!("n{i}"), &format!("10.0.0.{i}")))
            .collect();
        let steps = PreCheck::template(&ctx(PreCheckParams::default(), many)).unwrap_or_default();
        assert!(env(&steps[1], "WORKFLOW_SSH_COMMAND").starts_with("PEERS=''\n"));
    }

    #[test]
    fn a_word_that_is_not_a_word_of_its_kind_is_refused_naming_the_field_and_the_rule() {
        let refused = |params: PreCheckParams| {
            PreCheck::validate(&params)
                .err()
                .map(|e| e.message().to_owned())
                .unwrap_or_default()
        };
        assert_eq!(
            refused(PreCheckParams {
                required_commands: vec!["systemctl".into(), "rm -rf".into()],
                ..PreCheckParams::default()
            }),
            "invalid params at `requiredCommands[1]`: \"rm -rf\" is not a valid command name: \
             it holds a blank, which would make it two words"
        );
        let cases = [
            (
                PreCheckParams {
                    required_commands: vec!["-h".into()],
                    ..PreCheckParams::default()
                },
                "`requiredCommands[0]`: \"-h\" is not a valid command name: it starts with '-'",
            ),
            (
                PreCheckParams {
                    endpoints: vec!["10.0.0.*:6443".into()],
                    ..PreCheckParams::default()
                },
                "`endpoints[0]`: \"10.0.0.*:6443\" is not a valid endpoint: it holds '*'",
            ),
            (
                PreCheckParams {
                    os_families: vec!["Debian".into()],
                    ..PreCheckParams::default()
                },
                "`osFamilies[0]`: \"Debian\" is not a valid OS ID",
            ),
            (
                PreCheckParams {
                    disk_path: Some("var/lib".into()),
                    ..PreCheckParams::default()
                },
                "`diskPath`: \"var/lib\" is not a valid path: it must be an absolute path",
            ),
            (
                PreCheckParams {
                    ssh: SshParams {
                        roles: vec!["Worker Master".into()],
                        ..SshParams::default()
                    },
                    ..PreCheckParams::default()
                },
                "`ssh.roles[0]`: \"Worker Master\" is not a valid role",
            ),
        ];
        for (params, says) in cases {
            let why = refused(params);
            assert!(why.contains(says), "{why:?} should say {says:?}");
        }
        let fine = PreCheckParams {
            os_families: vec!["debian".into(), "rhel".into()],
            required_commands: vec!["iptables-save".into()],
            endpoints: vec!["10.0.0.1:6443".into(), "[fd00::1]:6443".into()],
            disk_path: Some("/var/lib".into()),
            ..PreCheckParams::default()
        };
        assert_eq!(PreCheck::validate(&fine), Ok(()));
    }

    #[test]
    fn a_template_for_params_that_are_refused_is_refused_too() {
        let params = PreCheckParams {
            endpoints: vec!["-x:1".into()],
            ..PreCheckParams::default()
        };
        assert!(PreCheck::template(&ctx(params, vec![])).is_err());
    }

    #[test]
    fn info_names_the_type() {
        let info = PreCheck::info();
        assert_eq!(info.type_name, "pre-check");
        assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn every_target_passing_is_completed_and_a_failing_one_fails_naming_it() {
        let steps = PreCheck::template(&ctx(PreCheckParams::default(), vec![])).unwrap_or_default();
        let ok = "targets 2: 2 ok, 0 failed, 0 unreachable\nOK node-1 (0.1 s)\nOK node-2 (0.1 s)\n";
        assert_eq!(
            PreCheck::evaluate(&steps[0], &outcome(0, ok)),
            Verdict::Completed
        );
        let down = "targets 2: 1 ok, 0 failed, 1 unreachable\n\
                    UNREACHABLE node-3: connect 10.0.0.3:22: no route to host\nOK node-1 (0.1 s)\n";
        assert_eq!(
            PreCheck::evaluate(&steps[1], &outcome(1, down)),
            Verdict::Failed(
                "1 of 2 targets failed (none may fail): node-3 unreachable: connect 10.0.0.3:22: \
                 no route to host"
                    .into()
            )
        );
    }

    #[test]
    fn a_runner_that_could_not_start_fails_with_its_words() {
        let step = Step::new("validate-nodes", "workflow-runner");
        let verdict = PreCheck::evaluate(&step, &outcome(2, "workflow-runner: no usable SSH key"));
        assert_eq!(
            verdict,
            Verdict::Failed("exit code 2: workflow-runner: no usable SSH key".into())
        );
    }
}
