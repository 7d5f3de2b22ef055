//! Steps that act on the targets themselves, over SSH.
//!
//! Such a step runs `workflow-runner` (in the operator's step image, `workflow-step`): it logs
//! in to each of the Workflow's targets, a bounded number at a time, runs a shell script there
//! and reports per target in the step's termination message:
//!
//! ```text
//! targets 3: 1 ok, 1 failed, 1 unreachable
//! FAIL node-2: exit code 1 after 0.20 s: disk: 512 MiB free on /, need 1024
//! UNREACHABLE node-3: connect 10.0.0.3:22: Connection refused (os error 111)
//! OK node-1 (0.21 s)
//! ```
//!
//! [`on_targets`] builds the step from a script and the type's [`SshParams`]; [`verdict`]
//! judges it, allowing as many failed targets as the step's [`TargetBudget`] says. The
//! credentials are not the plugin's business: the runner reads a `kubernetes.io/ssh-auth`
//! Secret mounted at `/etc/workflow/ssh` (by default the Secret `workflow-ssh` of the group's
//! namespace; another one with the group's pod template): its `ssh-privatekey`, its
//! `known_hosts` (with `@cert-authority` and `@revoked` lines, as OpenSSH reads them) and, when
//! present, a user certificate for the key, `ssh-certificate`. Targets that only a bastion
//! reaches are reached through [`SshParams::jump_host`].
//!
//! ```
//! use workflow_plugin_sdk::remote::{self, SshParams, TargetBudget};
//! use workflow_plugin_sdk::{StepOutcome, Verdict};
//!
//! let budget = TargetBudget { max_failed_targets: Some(1), ..TargetBudget::default() };
//! let step = remote::on_targets("disk", "df -P /", &SshParams::default(), budget);
//! assert_eq!(step.command, "workflow-runner");
//!
//! let outcome = StepOutcome {
//!     exit_code: Some(1),
//!     message: "targets 3: 2 ok, 1 failed, 0 unreachable\nFAIL n2: exit code 1 after 0.10 s: full\n".into(),
//!     ..StepOutcome::default()
//! };
//! assert_eq!(remote::verdict(&step, &outcome), Verdict::Completed);
//! ```

use crate::report::{self, Problem};
use crate::types::{Step, StepOutcome, TargetReport, Verdict, quote};
use schemars::JsonSchema;
use serde::Deserialize;

/// The runner's name in the step image.
pub const RUNNER: &str = "workflow-runner";
/// The taint a joining Node registers with (effect `NoSchedule`), so that nothing lands on it
/// before it is Ready; [`nodes_ready`] removes it from each Node once it is.
pub const JOINING_TAINT: &str = "workflow.rxg456.cn/joining";
/// The step's environment variable holding the script the runner runs on every target.
pub const COMMAND_ENV: &str = "WORKFLOW_SSH_COMMAND";
/// The step's environment variable holding [`TargetBudget::max_failed_targets`].
pub const MAX_FAILED_ENV: &str = "WORKFLOW_MAX_FAILED_TARGETS";
/// The step's environment variable holding [`TargetBudget::min_healthy_percent`].
pub const MIN_HEALTHY_ENV: &str = "WORKFLOW_MIN_HEALTHY_PERCENT";

/// How the runner reaches the targets: the `ssh` object of a type's params. Every field is
/// optional; the runner's defaults apply.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SshParams {
    /// The user to log in as (default `root`); another user needs passwordless `sudo` for
    /// steps that change the machine.
    #[schemars(length(min = 1, max = 64))]
    pub user: Option<String>,
    /// The targets' SSH port (default 22).
    #[schemars(range(min = 1))]
    pub port: Option<u16>,
    /// How many targets are worked on at once (default 16).
    #[schemars(range(min = 1, max = 1000))]
    pub parallel: Option<u32>,
    /// Seconds to connect, check the host key and log in, per target (default 10).
    #[schemars(range(min = 1, max = 3600))]
    pub connect_timeout_seconds: Option<u32>,
    /// Seconds the script may run on one target (default 300).
    #[schemars(range(min = 1, max = 86400))]
    pub command_timeout_seconds: Option<u32>,
    /// `known-hosts` (default: a target's host key must be in the Secret's `known_hosts`) or
    /// `accept-any` (trust any key: no protection from a machine in the middle).
    pub host_key_policy: Option<HostKeyPolicy>,
    /// Only the targets of these roles (ignoring case); all targets when empty.
    #[serde(default)]
    pub roles: Vec<String>,
    /// A host every target is reached through (a bastion), when the targets cannot be reached
    /// directly; none by default.
    pub jump_host: Option<JumpHost>,
}

/// The `ssh.jumpHost` object: the runner logs in there with the same key (and certificate),
/// checks its host key against the same `known_hosts` (listed under `address`), and connects
/// to each target from it. Nothing runs on the jump host, and it must not be one of the
/// targets (the run is refused).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JumpHost {
    /// Its IP address or host name.
    #[schemars(length(min = 1, max = 253))]
    pub address: String,
    /// The user to log in to it as (default: `ssh.user`).
    #[schemars(length(min = 1, max = 64))]
    pub user: Option<String>,
    /// Its SSH port (default 22).
    #[schemars(range(min = 1))]
    pub port: Option<u16>,
}

impl SshParams {
    /// Checks the words of `ssh`: the users user names, each role a role, the jump host's
    /// address a host ([`words`](crate::words)). Every type that takes `ssh` calls it from its
    /// `validate`.
    ///
    /// ```
    /// use workflow_plugin_sdk::remote::SshParams;
    ///
    /// let ssh = SshParams { user: Some("-oProxyCommand=x".into()), ..SshParams::default() };
    /// assert!(ssh.validate().unwrap_err().message().starts_with("invalid params at `ssh.user`"));
    /// ```
    ///
    /// # Errors
    /// The first word refused, naming its field.
    pub fn validate(&self) -> Result<(), crate::Error> {
        if let Some(user) = &self.user {
            crate::words::user_name("ssh.user", user)?;
        }
        crate::words::each("ssh.roles", &self.roles, crate::words::role)?;
        if let Some(jump) = &self.jump_host {
            crate::words::host("ssh.jumpHost.address", &jump.address)?;
            if let Some(user) = &jump.user {
                crate::words::user_name("ssh.jumpHost.user", user)?;
            }
        }
        Ok(())
    }
}

impl SshParams {
    /// Checks `ssh` against the group's targets: the jump host must not be one of the targets
    /// the steps act on (those of `ssh.roles`), by address or name. Types call it from their
    /// `template`, where the targets are known, so the group's condition names the field
    /// instead of every step failing in the runner.
    ///
    /// ```
    /// use workflow_plugin_sdk::Target;
    /// use workflow_plugin_sdk::remote::{JumpHost, SshParams};
    ///
    /// let jump = JumpHost { address: "10.0.0.1".into(), ..JumpHost::default() };
    /// let ssh = SshParams { jump_host: Some(jump), ..SshParams::default() };
    /// let node = Target { name: "node-1".into(), ip: "10.0.0.1".into(), role: "Worker".into() };
    /// let refused = ssh.validate_targets(&[node]).unwrap_err();
    /// assert!(refused.message().starts_with("invalid params at `ssh.jumpHost.address`"));
    /// ```
    ///
    /// # Errors
    /// The target the jump host is.
    pub fn validate_targets(&self, targets: &[crate::Target]) -> Result<(), crate::Error> {
        let Some(jump) = &self.jump_host else {
            return Ok(());
        };
        let address = jump.address.trim();
        let acted_on = |t: &&crate::Target| {
            self.roles.is_empty() || self.roles.iter().any(|r| r.eq_ignore_ascii_case(&t.role))
        };
        match targets.iter().filter(acted_on).find(|t| {
            t.ip.trim().eq_ignore_ascii_case(address) || t.name.eq_ignore_ascii_case(address)
        }) {
            Some(target) => Err(crate::Error::new(format!(
                "invalid params at `ssh.jumpHost.address`: {address:?} is the target {}: a jump \
                 host reaches the targets, it is not one of them",
                target.name
            ))),
            None => Ok(()),
        }
    }
}

/// Which host keys the runner trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum HostKeyPolicy {
    /// Only keys listed in `known_hosts`, by address or name.
    KnownHosts,
    /// Any key.
    AcceptAny,
}

/// How many of a step's targets may fail (or be unreachable) before the step fails. Both
/// unset: none may. With both, a step must satisfy both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetBudget {
    /// At most this many targets may fail.
    pub max_failed_targets: Option<u32>,
    /// At least this percentage of the targets must succeed.
    #[schemars(range(max = 100))]
    pub min_healthy_percent: Option<u8>,
}

impl TargetBudget {
    /// The budget [`on_targets`] wrote into `step` (none when it wrote none).
    pub fn of_step(step: &Step) -> Self {
        let read = |name: &str| {
            step.env
                .iter()
                .find(|e| e.name == name)
                .and_then(|e| e.value.trim().parse().ok())
        };
        TargetBudget {
            max_failed_targets: read(MAX_FAILED_ENV),
            min_healthy_percent: read(MIN_HEALTHY_ENV).map(|p: u32| p.min(100) as u8),
        }
    }

    /// Whether `bad` failed targets of `total` are within the budget.
    ///
    /// ```
    /// use workflow_plugin_sdk::remote::TargetBudget;
    ///
    /// let percent = TargetBudget { min_healthy_percent: Some(90), ..TargetBudget::default() };
    /// assert!(percent.allows(1, 10));
    /// assert!(!percent.allows(2, 10));
    /// assert!(!TargetBudget::default().allows(1, 10));
    /// ```
    pub fn allows(&self, bad: u32, total: u32) -> bool {
        let by_count = bad <= self.max_failed_targets.unwrap_or(0);
        let by_percent = self.min_healthy_percent.is_none_or(|min| {
            let healthy = u64::from(total.saturating_sub(bad));
            healthy * 100 >= u64::from(min) * u64::from(total)
        });
        match (self.max_failed_targets, self.min_healthy_percent) {
            (None, Some(_)) => by_percent,
            _ => by_count && by_percent,
        }
    }

    fn describe(&self) -> String {
        match (self.max_failed_targets, self.min_healthy_percent) {
            (None, None) => "none may fail".into(),
            (Some(n), None) => format!("at most {n} may fail"),
            (None, Some(p)) => format!("at least {p}% must succeed"),
            (Some(n), Some(p)) => format!("at most {n} may fail and at least {p}% must succeed"),
        }
    }
}

/// A step named `name` that runs `script` with `/bin/sh -c` on each target (as the SSH user,
/// with `WORKFLOW_TARGET_NAME`, `WORKFLOW_TARGET_IP`, `WORKFLOW_TARGET_ROLE` and
/// `WORKFLOW_RUNNER_TIME` in its environment). The script's last line of output is the reason
/// shown for a target where it exits non-zero.
pub fn on_targets(
    name: impl Into<String>,
    script: impl Into<String>,
    ssh: &SshParams,
    budget: TargetBudget,
) -> Step {
    let mut step = Step::new(name, RUNNER).env(COMMAND_ENV, script);
    let mut set = |var: &str, value: Option<String>| {
        if let Some(value) = value {
            step.env.push(crate::EnvVar {
                name: var.into(),
                value,
            });
        }
    };
    set("WORKFLOW_SSH_USER", ssh.user.clone());
    set("WORKFLOW_SSH_PORT", ssh.port.map(|p| p.to_string()));
    set("WORKFLOW_SSH_PARALLEL", ssh.parallel.map(|p| p.to_string()));
    set(
        "WORKFLOW_SSH_CONNECT_TIMEOUT",
        ssh.connect_timeout_seconds.map(|s| s.to_string()),
    );
    set(
        "WORKFLOW_SSH_COMMAND_TIMEOUT",
        ssh.command_timeout_seconds.map(|s| s.to_string()),
    );
    set(
        "WORKFLOW_SSH_HOST_KEY_POLICY",
        ssh.host_key_policy.map(|p| {
            match p {
                HostKeyPolicy::KnownHosts => "known-hosts",
                HostKeyPolicy::AcceptAny => "accept-any",
            }
            .to_owned()
        }),
    );
    set(
        "WORKFLOW_SSH_ROLES",
        (!ssh.roles.is_empty()).then(|| ssh.roles.join(",")),
    );
    if let Some(jump) = &ssh.jump_host {
        set("WORKFLOW_SSH_JUMP_HOST", Some(jump.address.clone()));
        set("WORKFLOW_SSH_JUMP_USER", jump.user.clone());
        set("WORKFLOW_SSH_JUMP_PORT", jump.port.map(|p| p.to_string()));
    }
    set(
        MAX_FAILED_ENV,
        budget.max_failed_targets.map(|n| n.to_string()),
    );
    set(
        MIN_HEALTHY_ENV,
        budget.min_healthy_percent.map(|p| p.to_string()),
    );
    step
}

/// A step named `name` that checks, through the API server, that each target's Node object
/// (the Node named as the target) is Ready, waiting up to `timeout_seconds`, and then removes
/// the [`JOINING_TAINT`] from it when it has it; it reports per target as [`on_targets`] steps
/// do. Its pod needs a service account that may get nodes (and patch them, for a Node that has
/// the taint: the group's `podTemplates.<type>.serviceAccountName`); only `ssh.roles` of `ssh`
/// applies.
///
/// ```
/// use workflow_plugin_sdk::remote::{self, SshParams, TargetBudget};
///
/// let step = remote::nodes_ready("verify-node-ready", 120, &SshParams::default(), TargetBudget::default());
/// assert_eq!(step.command, "workflow-runner");
/// assert!(step.env.iter().any(|e| e.name == "WORKFLOW_CHECK_NODE_READY" && e.value == "true"));
/// ```
pub fn nodes_ready(
    name: impl Into<String>,
    timeout_seconds: u32,
    ssh: &SshParams,
    budget: TargetBudget,
) -> Step {
    on_nodes(name, "WORKFLOW_CHECK_NODE_READY", ssh, budget)
        .env("WORKFLOW_NODE_READY_TIMEOUT", timeout_seconds.to_string())
        .env("WORKFLOW_NODE_READY_REMOVE_TAINT", JOINING_TAINT)
        // The pod outlives the wait: the runner reports before the kubelet would stop it.
        .timeout_secs(timeout_seconds.saturating_add(60))
}

/// A step named `name` that acts on each target's Node (the Node named as the target) through
/// the API server instead of logging in: the runner in the mode the environment variable
/// `mode` turns on (`WORKFLOW_CHECK_NODE_READY`, `WORKFLOW_DRAIN`, `WORKFLOW_DELETE_NODES`),
/// reporting per target as [`on_targets`] steps do. Its pod needs a service account with the
/// mode's rights; only `ssh.roles` of `ssh` applies.
///
/// ```
/// use workflow_plugin_sdk::remote::{self, SshParams, TargetBudget};
///
/// let step = remote::on_nodes("delete-nodes", "WORKFLOW_DELETE_NODES", &SshParams::default(), TargetBudget::default());
/// assert!(step.env.iter().any(|e| e.name == "WORKFLOW_DELETE_NODES" && e.value == "true"));
/// assert!(!step.env.iter().any(|e| e.name == "WORKFLOW_SSH_COMMAND"));
/// ```
pub fn on_nodes(
    name: impl Into<String>,
    mode: &str,
    ssh: &SshParams,
    budget: TargetBudget,
) -> Step {
    let roles = SshParams {
        roles: ssh.roles.clone(),
        ..SshParams::default()
    };
    let mut step = on_targets(name, "", &roles, budget);
    step.env.retain(|e| e.name != COMMAND_ENV);
    step.env(mode, "true")
}

/// The step's report over its targets: what the operator passed in `outcome.targets`, or, from
/// an operator that passes none, what its termination message says (the runner's report).
///
/// ```
/// use workflow_plugin_sdk::{remote::target_report, StepOutcome};
///
/// let outcome = StepOutcome {
///     message: "targets 2: 1 ok, 0 failed, 1 unreachable\nUNREACHABLE n2: refused\nOK n1 (0.1 s)".into(),
///     ..StepOutcome::default()
/// };
/// let report = target_report(&outcome).unwrap();
/// assert_eq!((report.total, report.unreachable, report.problems[0].name.as_str()), (2, 1, "n2"));
/// ```
pub fn target_report(outcome: &StepOutcome) -> Option<TargetReport> {
    outcome
        .targets
        .clone()
        .or_else(|| TargetReport::parse(&outcome.message))
}

/// Judges an attempt of a step built by [`on_targets`]: Completed when every target succeeded,
/// or when the targets that failed are within the step's [`TargetBudget`]; Failed otherwise,
/// naming the failed targets and why. A runner that could not run at all (no key, no targets)
/// fails with its own words.
pub fn verdict(step: &Step, outcome: &StepOutcome) -> Verdict {
    let Some(found) = target_report(outcome) else {
        return report::verdict(outcome);
    };
    let bad = found.bad();
    let budget = TargetBudget::of_step(step);
    if bad == 0 && outcome.exit_code.is_none_or(|c| c == 0) {
        return Verdict::Completed;
    }
    if bad > 0 && budget.allows(bad, found.total) {
        return Verdict::Completed;
    }
    if bad == 0 {
        return report::verdict(outcome);
    }
    // `node-2 failed: why`, as the check-output convention's problems read.
    let named: Vec<String> = found
        .problems
        .iter()
        .map(|problem| Problem::from(problem).to_string())
        .collect();
    let unnamed = (bad as usize).saturating_sub(named.len());
    let mut reason = format!(
        "{bad} of {} targets failed ({}): {}",
        found.total,
        budget.describe(),
        named.join("; ")
    );
    if unnamed > 0 {
        reason.push_str(&format!("; and {unnamed} more"));
    }
    Verdict::Failed(quote(&reason))
}

/// `text` as one single-quoted shell word, for values a plugin puts into a script (the
/// same quoting the runner gives the command it sends to a target).
///
/// ```
/// assert_eq!(workflow_plugin_sdk::remote::shell_quote("it's"), r"'it'\''s'");
/// ```
pub use workflow_model::text::shell_quote;

/// `name='value'` lines, one per pair: the parameters a script reads, set at its top.
///
/// ```
/// use workflow_plugin_sdk::remote::shell_assignments;
/// assert_eq!(shell_assignments(&[("MIN_DISK_MIB", "1024".into())]), "MIN_DISK_MIB='1024'\n");
/// ```
pub fn shell_assignments(pairs: &[(&str, String)]) -> String {
    pairs
        .iter()
        .map(|(name, value)| format!("{name}={}\n", shell_quote(value)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(code: i32, message: &str) -> StepOutcome {
        StepOutcome {
            succeeded: code == 0,
            exit_code: Some(code),
            message: message.into(),
            attempt: 1,
            duration_ms: 100,
            targets: None,
        }
    }

    const ONE_OF_TEN: &str = "targets 10: 9 ok, 1 failed, 0 unreachable\n\
        FAIL n7: exit code 1 after 0.10 s: disk: 10 MiB free on /, need 1024\nOK n1 (0.1 s)\n";

    #[test]
    fn an_ssh_user_or_role_that_is_not_a_word_is_refused_naming_its_field() {
        let refused = |ssh: SshParams| ssh.validate().err().map(|e| e.message().to_owned());
        let user = refused(SshParams {
            user: Some("-oProxyCommand=reboot".into()),
            ..SshParams::default()
        });
        assert_eq!(
            user.as_deref(),
            Some(
                "invalid params at `ssh.user`: \"-oProxyCommand=reboot\" is not a valid user name: \
                 it starts with '-', which a program reads as an option"
            )
        );
        let role = refused(SshParams {
            roles: vec!["Worker".into(), "Worker,Master".into()],
            ..SshParams::default()
        });
        assert!(
            role.as_deref().is_some_and(
                |r| r.starts_with("invalid params at `ssh.roles[1]`: \"Worker,Master\"")
            ),
            "{role:?}"
        );
        let fine = SshParams {
            user: Some("ops".into()),
            roles: vec!["Worker".into()],
            ..SshParams::default()
        };
        assert_eq!(fine.validate(), Ok(()));
    }

    #[test]
    fn a_jump_host_whose_address_or_user_is_not_a_word_is_refused_naming_its_field() {
        let refused = |jump: JumpHost| {
            let ssh = SshParams {
                jump_host: Some(jump),
                ..SshParams::default()
            };
            ssh.validate().err().map(|e| e.message().to_owned())
        };
        let address = refused(JumpHost {
            address: "-oProxyCommand=reboot".into(),
            ..JumpHost::default()
        });
        assert!(
            address.as_deref().is_some_and(|a| a.starts_with(
                "invalid params at `ssh.jumpHost.address`: \"-oProxyCommand=reboot\" is not a valid host"
            )),
            "{address:?}"
        );
        let user = refused(JumpHost {
            address: "bastion.example.com".into(),
            user: Some("a b".into()),
            ..JumpHost::default()
        });
        assert!(
            user.as_deref()
                .is_some_and(|u| u.starts_with("invalid params at `ssh.jumpHost.user`")),
            "{user:?}"
        );
        let fine = refused(JumpHost {
            address: "10.0.0.1".into(),
            user: Some("ops".into()),
            port: Some(2222),
        });
        assert_eq!(fine, None);
    }

    #[test]
    fn a_jump_host_reaches_the_runner_as_its_address_user_and_port() {
        let ssh: SshParams = serde_json::from_value(serde_json::json!({
            "user": "ops",
            "jumpHost": {"address": "10.0.0.1", "port": 2222}
        }))
        .expect("ssh params");
        let step = on_targets("check", "true", &ssh, TargetBudget::default());
        let env: Vec<(&str, &str)> = step
            .env
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(
            env,
            [
                ("WORKFLOW_SSH_COMMAND", "true"),
                ("WORKFLOW_SSH_USER", "ops"),
                ("WORKFLOW_SSH_JUMP_HOST", "10.0.0.1"),
                ("WORKFLOW_SSH_JUMP_PORT", "2222"),
            ]
        );
        let unknown = serde_json::from_value::<SshParams>(serde_json::json!({
            "jumpHost": {"address": "10.0.0.1", "proxyCommand": "x"}
        }));
        assert!(unknown.is_err());
    }

    #[test]
    fn a_jump_host_that_is_one_of_the_targets_acted_on_is_refused_naming_the_field() {
        let target = |name: &str, ip: &str, role: &str| crate::Target {
            name: name.into(),
            ip: ip.into(),
            role: role.into(),
        };
        let targets = [
            target("bastion", "10.0.0.1", "Master"),
            target("node-2", "10.0.0.2", "Worker"),
        ];
        let through = |address: &str, roles: &[&str]| SshParams {
            jump_host: Some(JumpHost {
                address: address.into(),
                ..JumpHost::default()
            }),
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            ..SshParams::default()
        };
        for address in ["10.0.0.1", "bastion", "BASTION"] {
            let refused = through(address, &[])
                .validate_targets(&targets)
                .unwrap_err();
            assert_eq!(
                refused.message(),
                format!(
                    "invalid params at `ssh.jumpHost.address`: {address:?} is the target bastion: \
                     a jump host reaches the targets, it is not one of them"
                )
            );
        }
        // The steps act on the Workers only: the Master may be their jump host.
        assert_eq!(
            through("10.0.0.1", &["Worker"]).validate_targets(&targets),
            Ok(())
        );
        assert_eq!(through("10.0.0.9", &[]).validate_targets(&targets), Ok(()));
        assert_eq!(SshParams::default().validate_targets(&targets), Ok(()));
    }

    #[test]
    fn the_schema_of_ssh_has_the_jump_host_with_its_address_required() {
        let schema = serde_json::to_value(schemars::schema_for!(SshParams)).expect("schema");
        let jump = &schema["$defs"]["JumpHost"];
        assert_eq!(jump["required"], serde_json::json!(["address"]), "{schema}");
        assert_eq!(jump["additionalProperties"], false);
        assert!(jump["properties"]["port"].is_object());
        assert!(schema["properties"]["jumpHost"].is_object(), "{schema}");
    }

    #[test]
    fn the_step_runs_the_runner_with_the_script_and_only_the_options_given() {
        let ssh = SshParams {
            user: Some("ops".into()),
            parallel: Some(4),
            host_key_policy: Some(HostKeyPolicy::AcceptAny),
            roles: vec!["Worker".into(), "Master".into()],
            ..SshParams::default()
        };
        let step = on_targets("check", "uname -s", &ssh, TargetBudget::default());
        assert_eq!(step.command, "workflow-runner");
        let env: Vec<(&str, &str)> = step
            .env
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(
            env,
            [
                ("WORKFLOW_SSH_COMMAND", "uname -s"),
                ("WORKFLOW_SSH_USER", "ops"),
                ("WORKFLOW_SSH_PARALLEL", "4"),
                ("WORKFLOW_SSH_HOST_KEY_POLICY", "accept-any"),
                ("WORKFLOW_SSH_ROLES", "Worker,Master"),
            ]
        );
    }

    #[test]
    fn one_failed_target_of_ten_is_completed_within_max_failed_targets_one() {
        let budget = TargetBudget {
            max_failed_targets: Some(1),
            ..TargetBudget::default()
        };
        let step = on_targets("s", "true", &SshParams::default(), budget);
        assert_eq!(TargetBudget::of_step(&step), budget);
        assert_eq!(verdict(&step, &outcome(1, ONE_OF_TEN)), Verdict::Completed);
    }

    #[test]
    fn a_failed_target_beyond_the_budget_fails_the_step_naming_it() {
        let step = on_targets("s", "true", &SshParams::default(), TargetBudget::default());
        assert_eq!(
            verdict(&step, &outcome(1, ONE_OF_TEN)),
            Verdict::Failed(
                "1 of 10 targets failed (none may fail): n7 failed: exit code 1 after 0.10 s: \
                 disk: 10 MiB free on /, need 1024"
                    .into()
            )
        );
    }

    #[test]
    fn min_healthy_percent_counts_unreachable_targets_too() {
        let budget = TargetBudget {
            min_healthy_percent: Some(80),
            ..TargetBudget::default()
        };
        let step = on_targets("s", "true", &SshParams::default(), budget);
        let two_bad = "targets 10: 8 ok, 1 failed, 1 unreachable\nFAIL a: x\nUNREACHABLE b: y\n";
        assert_eq!(verdict(&step, &outcome(1, two_bad)), Verdict::Completed);
        let three_bad = "targets 10: 7 ok, 1 failed, 2 unreachable\nFAIL a: x\nUNREACHABLE b: y\n";
        assert_eq!(
            verdict(&step, &outcome(1, three_bad)),
            Verdict::Failed(
                "3 of 10 targets failed (at least 80% must succeed): a failed: x; b unreachable: y; \
                 and 1 more"
                    .into()
            )
        );
    }

    #[test]
    fn a_runner_that_could_not_run_fails_with_its_words_whatever_the_budget() {
        let budget = TargetBudget {
            max_failed_targets: Some(100),
            ..TargetBudget::default()
        };
        let step = on_targets("s", "true", &SshParams::default(), budget);
        assert_eq!(
            verdict(&step, &outcome(2, "workflow-runner: no usable SSH key at /etc/workflow/ssh/ssh-privatekey: x\n")),
            Verdict::Failed(
                "exit code 2: workflow-runner: no usable SSH key at /etc/workflow/ssh/ssh-privatekey: x"
                    .into()
            )
        );
    }

    #[test]
    fn every_target_ok_is_completed() {
        let step = on_targets("s", "true", &SshParams::default(), TargetBudget::default());
        let all_ok = "targets 2: 2 ok, 0 failed, 0 unreachable\nOK a (0.1 s)\nOK b (0.1 s)\n";
        assert_eq!(verdict(&step, &outcome(0, all_ok)), Verdict::Completed);
    }

    #[test]
    fn the_operators_report_is_used_before_the_message() {
        let step = on_targets("s", "true", &SshParams::default(), TargetBudget::default());
        // The message was cut: only the report the operator passed names the failed target.
        let outcome = StepOutcome {
            exit_code: Some(1),
            message: "targets 10: 9 ok, 1 failed, 0 unreachable\n".into(),
            targets: TargetReport::parse(ONE_OF_TEN),
            ..StepOutcome::default()
        };
        assert_eq!(
            verdict(&step, &outcome),
            Verdict::Failed(
                "1 of 10 targets failed (none may fail): n7 failed: exit code 1 after 0.10 s: \
                 disk: 10 MiB free on /, need 1024"
                    .into()
            )
        );
    }
}
