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
//! | `ssh` | | how to log in: `user`, `port`, `parallel`, `connectTimeoutSeconds`, `commandTimeoutSeconds`, `hostKeyPolicy`, `roles`, `jumpHost` (`address`, `user`, `port`) |
//! | `join` | none | make the targets Nodes of this cluster: a third step, `join-cluster` (below) |
//!
//! # Joining the cluster (`join`)
//!
//! With `join` (even `join: {}`), a step `join-cluster` (加入集群) follows `configure-nodes`. It
//! runs `workflow-runner --join`, which mints a bootstrap token for the run (Secret
//! `kube-system/bootstrap-token-<id>`, deleted when the step ends, expiring after
//! `tokenTtlSeconds` anyway) and gives every target a bootstrap kubeconfig on standard input;
//! the script `scripts/join-cluster.sh` then installs containerd, runc and the CNI plugins when
//! missing, checks the kubelet's version, writes the CA, the kubeconfig, a
//! `KubeletConfiguration` and a bridge CNI config, starts containerd and the kubelet (systemd
//! units, or supervised processes with pid files where there is no systemd) as Node
//! `<target name>` at `<target ip>`, tainted `workflow.rxg456.cn/joining:NoSchedule`, and waits
//! for the kubelet's client certificate. post-check's `nodeReady` removes the taint once the
//! Node is Ready. A target that is already a Node of this cluster is left as it is; one of
//! another cluster is refused. The step's pod needs the service account of `deploy/join/`
//! (`spec.podTemplates.setup.serviceAccountName`).
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
use workflow_plugin_sdk::words::{Kind, Rule, WordError};

/// The exit code (`EX_TEMPFAIL` of `sysexits.h`) by which a target asks for a retry.
pub const EX_TEMPFAIL: i32 = 75;

const INSTALL_PACKAGES: &str = include_str!("../scripts/install-packages.sh");
const CONFIGURE_NODES: &str = include_str!("../scripts/configure-nodes.sh");
const JOIN_CLUSTER: &str = include_str!("../scripts/join-cluster.sh");

/// A file of the step pod delivered to every target before the join script runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(
    crate = "workflow_plugin_sdk::serde",
    rename_all = "camelCase",
    deny_unknown_fields
)]
#[schemars(crate = "workflow_plugin_sdk::schemars")]
pub struct Delivery {
    /// The file in the step pod: in the step image, or a mounted ConfigMap, Secret or volume
    /// (`spec.podTemplates.setup`). An absolute path without `,` or `:`.
    pub from: String,
    /// Where it goes on each target. An absolute path without `,` or `:`.
    pub to: String,
    /// Its mode on the target, octal (default `0644`; `0755` for a program).
    #[serde(default)]
    #[schemars(regex(pattern = r"^[0-7]{3,4}$"))]
    pub mode: Option<String>,
}

/// `join`: the targets become Nodes of the cluster the operator runs in.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(
    crate = "workflow_plugin_sdk::serde",
    rename_all = "camelCase",
    deny_unknown_fields,
    default
)]
#[schemars(crate = "workflow_plugin_sdk::schemars")]
pub struct JoinParams {
    /// The kubelet's path on the targets (default: `kubelet` on PATH, /usr/local/bin or
    /// /usr/bin, else the package manager's package `kubelet`).
    pub kubelet: Option<String>,
    /// The kubelet version the targets must have, e.g. `v1.34.4` (default: any the API server
    /// allows, its minor version or up to three older).
    #[schemars(regex(pattern = r"^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$"))]
    pub kubernetes_version: Option<String>,
    /// The API server as the targets reach it, `https://host:port` (default: the address the
    /// `default/kubernetes` Endpoints list, which the API server advertises).
    #[schemars(regex(pattern = r"^https://[^\s/]+$"))]
    pub api_server: Option<String>,
    /// The pod sandbox image containerd runs (default `registry.k8s.io/pause:3.10`).
    pub sandbox_image: Option<String>,
    /// Files of the step pod copied to every target first (checked by SHA-256, renamed into
    /// place, not sent again when already there): a kubelet, image archives.
    pub files: Vec<Delivery>,
    /// Image archives on the targets to import into containerd before the kubelet starts (for
    /// machines that cannot pull, such as the sandbox image).
    pub images: Vec<String>,
    /// The subnet of the bridge network the join writes for the Node's pods when the machine has
    /// no CNI configuration (default `10.88.0.0/16`, containerd's own).
    #[schemars(regex(pattern = r"^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$"))]
    pub pod_subnet: Option<String>,
    /// Labels the Node registers with, `key=value`.
    #[schemars(inner(regex(pattern = r"^[A-Za-z0-9./_-]+=[A-Za-z0-9._-]*$")))]
    pub node_labels: Vec<String>,
    /// The cluster DNS Service addresses the kubelet gives pods.
    #[schemars(inner(regex(pattern = r"^[0-9a-fA-F.:]+$")))]
    pub cluster_dns: Vec<String>,
    /// The cluster's DNS domain (default `cluster.local`).
    pub cluster_domain: Option<String>,
    /// Seconds a kubelet may take to get its client certificate (default 120).
    #[schemars(range(min = 10, max = 3600))]
    pub bootstrap_timeout_seconds: Option<u32>,
    /// Seconds the run's bootstrap token is valid for, should the step not delete it (default
    /// 900, as Cluster API's kubeadm bootstrap provider).
    #[schemars(range(min = 60, max = 86400))]
    pub token_ttl_seconds: Option<u32>,
}

/// Why `value` of `join.<field>` (a format of its own: a URL, a version, a label, an address)
/// may not go into a script, when it may not.
fn refuse_word(field: &str, value: &str, fine: impl Fn(char) -> bool) -> Result<(), Error> {
    if value.is_empty() || !value.chars().all(fine) {
        return Err(Error::new(format!(
            "invalid params at `join.{field}`: {value:?} has characters it may not have"
        )));
    }
    Ok(())
}

impl JoinParams {
    fn validate(&self) -> Result<(), Error> {
        if let Some(kubelet) = &self.kubelet {
            words::path("join.kubelet", kubelet)?;
        }
        for (i, file) in self.files.iter().enumerate() {
            for (part, value) in [("from", &file.from), ("to", &file.to)] {
                let field = format!("join.files[{i}].{part}");
                words::path(&field, value)?;
                // They separate the files and their parts in `WORKFLOW_SSH_COPY`.
                if value.contains([',', ':']) {
                    let rule =
                        Rule::Characters("characters but ',' and ':' (they separate the files)");
                    return Err(WordError::new(&field, value, Kind::Path, rule).into());
                }
            }
            if let Some(mode) = &file.mode {
                refuse_word("files.mode", mode, |c| ('0'..='7').contains(&c))?;
            }
        }
        words::each("join.images", &self.images, words::path)?;
        let url =
            |c: char| !c.is_whitespace() && !c.is_control() && !"'\"`$;&|<>()\\*?[]".contains(c);
        if let Some(server) = &self.api_server {
            refuse_word("apiServer", server, url)?;
            if !server.starts_with("https://") {
                return Err(Error::new(format!(
                    "invalid params at `join.apiServer`: {server:?} must be an https:// URL"
                )));
            }
        }
        let version = |c: char| c.is_ascii_alphanumeric() || ".+-".contains(c);
        if let Some(v) = &self.kubernetes_version {
            refuse_word("kubernetesVersion", v, version)?;
            if !v.starts_with('v') {
                return Err(Error::new(format!(
                    "invalid params at `join.kubernetesVersion`: {v:?} must look like v1.34.4"
                )));
            }
        }
        for label in &self.node_labels {
            refuse_word("nodeLabels", label, |c| {
                c.is_ascii_alphanumeric() || "./_-=".contains(c)
            })?;
            if !label.contains('=') {
                return Err(Error::new(format!(
                    "invalid params at `join.nodeLabels`: {label:?} must be key=value"
                )));
            }
        }
        if let Some(image) = &self.sandbox_image {
            words::image("join.sandboxImage", image)?;
        }
        if let Some(domain) = &self.cluster_domain {
            words::dns_subdomain("join.clusterDomain", domain)?;
        }
        if let Some(subnet) = &self.pod_subnet {
            refuse_word("podSubnet", subnet, |c| {
                c.is_ascii_digit() || "./".contains(c)
            })?;
        }
        for dns in &self.cluster_dns {
            refuse_word("clusterDNS", dns, |c| {
                c.is_ascii_hexdigit() || ".:".contains(c)
            })?;
        }
        Ok(())
    }

    /// The `join-cluster` step: `workflow-runner --join` running the join script.
    fn step(&self, ssh: &SshParams, budget: TargetBudget) -> Step {
        let script = shell_assignments(&[
            ("KUBELET", self.kubelet.clone().unwrap_or_default()),
            (
                "KUBERNETES_VERSION",
                self.kubernetes_version.clone().unwrap_or_default(),
            ),
            (
                "SANDBOX_IMAGE",
                self.sandbox_image
                    .clone()
                    .unwrap_or_else(|| "registry.k8s.io/pause:3.10".into()),
            ),
            ("IMAGES", self.images.join(" ")),
            (
                "POD_SUBNET",
                self.pod_subnet
                    .clone()
                    .unwrap_or_else(|| "10.88.0.0/16".into()),
            ),
            ("NODE_LABELS", self.node_labels.join(",")),
            (
                "JOIN_TAINT",
                format!("{}:NoSchedule", remote::JOINING_TAINT),
            ),
            ("CLUSTER_DNS", self.cluster_dns.join(", ")),
            (
                "CLUSTER_DOMAIN",
                self.cluster_domain
                    .clone()
                    .unwrap_or_else(|| "cluster.local".into()),
            ),
            (
                "BOOTSTRAP_TIMEOUT",
                self.bootstrap_timeout_seconds.unwrap_or(120).to_string(),
            ),
        ]) + JOIN_CLUSTER;
        let mut step = remote::on_targets("join-cluster", script, ssh, budget)
            .description("加入集群")
            .depends_on(["configure-nodes"])
            .env("WORKFLOW_JOIN", "true")
            .env(
                "WORKFLOW_JOIN_TOKEN_TTL",
                self.token_ttl_seconds.unwrap_or(900).to_string(),
            );
        if let Some(server) = &self.api_server {
            step = step.env("WORKFLOW_JOIN_API_SERVER", server.clone());
        }
        if !self.files.is_empty() {
            let copies: Vec<String> = self
                .files
                .iter()
                .map(|f| {
                    format!(
                        "{}:{}:{}",
                        f.from,
                        f.to,
                        f.mode.as_deref().unwrap_or("0644")
                    )
                })
                .collect();
            step = step.env("WORKFLOW_SSH_COPY", copies.join(","));
        }
        step
    }
}

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
    /// Packages to install with each target's package manager (package names, without a
    /// version).
    pub packages: Vec<String>,
    /// A file in the step pod (e.g. a ConfigMap's key mounted by `spec.podTemplates.setup`)
    /// run on every target by `configure-nodes`.
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
    /// Make the targets Nodes of this cluster (a `join-cluster` step after `configure-nodes`).
    pub join: Option<JoinParams>,
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
        words::each("packages", &params.packages, words::package_name)?;
        if let Some(file) = &params.script_file {
            words::path("scriptFile", file)?;
        }
        // The key and the service account's token are never a script for the targets (the
        // runner refuses them too, links resolved).
        const SECRET_MOUNTS: [&str; 3] = [
            "/etc/workflow/ssh",
            "/var/run/secrets/kubernetes.io",
            "/run/secrets/kubernetes.io",
        ];
        if let Some(file) = &params.script_file
            && let Some(mount) = SECRET_MOUNTS.iter().find(|m| {
                let normal = file
                    .split('/')
                    .filter(|s| !s.is_empty() && *s != ".")
                    .collect::<Vec<_>>()
                    .join("/");
                format!("/{normal}/").starts_with(&format!("{m}/"))
            })
        {
            return Err(Error::new(format!(
                "invalid params at `scriptFile`: {file:?} is under {mount}, which holds the SSH key or the service account's token"
            )));
        }
        if let Some(join) = &params.join {
            join.validate()?;
        }
        params.ssh.validate()
    }

    fn template(ctx: &Context<SetupParams>) -> Result<Vec<Step>, Error> {
        Self::validate(&ctx.params)?;
        ctx.params.ssh.validate_targets(&ctx.targets)?;
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
        let mut steps = vec![
            // Packages installed again are configured again, in a re-run too.
            remote::on_targets("install-packages", install, &p.ssh, budget)
                .description("安装必要软件包")
                .retries(p.retries.unwrap_or(2))
                .rerun_with(["configure-nodes"]),
            configure_step,
        ];
        if let Some(join) = &p.join {
            steps.push(join.step(&p.ssh, budget));
        }
        Ok(steps)
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
                "invalid params at `packages[0]`: \"curl; rm -rf /\" is not a valid package name: \
                 it holds a blank, which would make it two words"
            ))
        );
    }

    #[test]
    fn a_package_name_apt_reads_as_an_option_a_removal_a_pattern_or_a_pin_is_refused() {
        let refused = |package: &str| {
            Setup::validate(&SetupParams {
                packages: vec!["chrony".into(), package.into()],
                ..SetupParams::default()
            })
            .err()
            .map(|e| e.message().to_owned())
            .unwrap_or_default()
        };
        for (package, says) in [
            (
                "-y",
                "it starts with '-', which a program reads as an option",
            ),
            ("chrony-", "it ends in '-' or in a single '+'"),
            ("lib*", "it holds '*', '?', '[' or ']'"),
            ("~nchrony", "it must start with a letter or digit"),
            ("curl=7.88.1", "it pins a version with '='"),
            ("curl\u{1b}[2J", "it holds a control character"),
        ] {
            let why = refused(package);
            assert!(
                why.starts_with("invalid params at `packages[1]`: ") && why.contains(says),
                "{package:?}: {why:?} should say {says:?}"
            );
        }
        for fine in ["g++", "gcc-c++", "python3.11", "libc6:i386", "mod_ssl"] {
            assert_eq!(refused(fine), "", "{fine}");
        }
    }

    #[test]
    fn a_script_file_under_the_key_or_the_token_is_refused() {
        for file in [
            "/etc/workflow/ssh/ssh-privatekey",
            "/etc/workflow//ssh/./known_hosts",
            "/var/run/secrets/kubernetes.io/serviceaccount/token",
            "/run/secrets/kubernetes.io/serviceaccount/token",
        ] {
            let params = SetupParams {
                script_file: Some(file.into()),
                ..SetupParams::default()
            };
            let Err(error) = Setup::validate(&params) else {
                panic!("{file} is accepted");
            };
            assert!(
                error
                    .to_string()
                    .contains("which holds the SSH key or the service account's token"),
                "{file}: {error}"
            );
        }
        let fine = SetupParams {
            script_file: Some("/etc/workflow/scripts/configure.sh".into()),
            ..SetupParams::default()
        };
        assert_eq!(Setup::validate(&fine), Ok(()));
    }

    #[test]
    fn join_adds_a_step_that_mints_a_token_and_registers_with_the_joining_taint() {
        let with_join = steps(SetupParams {
            join: Some(JoinParams {
                kubelet: Some("/opt/k8s/kubelet".into()),
                images: vec!["/opt/images/pause.tar".into()],
                files: vec![Delivery {
                    from: "/media/kubelet".into(),
                    to: "/opt/k8s/kubelet".into(),
                    mode: Some("0755".into()),
                }],
                node_labels: vec!["pool=new".into()],
                token_ttl_seconds: Some(600),
                ..JoinParams::default()
            }),
            ..SetupParams::default()
        });
        let join = &with_join[2];
        assert_eq!(
            (join.name.as_str(), join.depends_on.clone()),
            ("join-cluster", vec!["configure-nodes".to_owned()])
        );
        assert_eq!(env(join, "WORKFLOW_JOIN"), "true");
        assert_eq!(env(join, "WORKFLOW_JOIN_TOKEN_TTL"), "600");
        assert_eq!(env(join, "WORKFLOW_JOIN_API_SERVER"), "");
        assert_eq!(
            env(join, "WORKFLOW_SSH_COPY"),
            "/media/kubelet:/opt/k8s/kubelet:0755"
        );
        let script = env(join, "WORKFLOW_SSH_COMMAND");
        for line in [
            "KUBELET='/opt/k8s/kubelet'\n",
            "IMAGES='/opt/images/pause.tar'\n",
            "NODE_LABELS='pool=new'\n",
            "JOIN_TAINT='workflow.rxg456.cn/joining:NoSchedule'\n",
            "SANDBOX_IMAGE='registry.k8s.io/pause:3.10'\n",
            "# join-cluster",
        ] {
            assert!(script.contains(line), "{line:?} in {script}");
        }
        assert_eq!(
            steps(SetupParams::default()).len(),
            2,
            "no join unless asked"
        );
    }

    #[test]
    fn join_params_with_shell_syntax_or_relative_paths_are_refused() {
        let refused = |join: JoinParams| {
            Setup::validate(&SetupParams {
                join: Some(join),
                ..SetupParams::default()
            })
            .err()
            .map(|e| e.message().to_owned())
            .unwrap_or_default()
        };
        let cases = [
            (
                JoinParams {
                    kubelet: Some("/bin/kubelet;reboot".into()),
                    ..JoinParams::default()
                },
                "`join.kubelet`",
            ),
            (
                JoinParams {
                    files: vec![Delivery {
                        from: "/media/kubelet".into(),
                        to: "/opt/k8s/kube,let".into(),
                        mode: None,
                    }],
                    ..JoinParams::default()
                },
                "`join.files[0].to`: \"/opt/k8s/kube,let\" is not a valid path",
            ),
            (
                JoinParams {
                    images: vec!["/opt/images/*.tar".into()],
                    ..JoinParams::default()
                },
                "`join.images[0]`: \"/opt/images/*.tar\" is not a valid path: it holds '*'",
            ),
            (
                JoinParams {
                    cluster_domain: Some("Cluster.Local".into()),
                    ..JoinParams::default()
                },
                "`join.clusterDomain`",
            ),
            (
                JoinParams {
                    sandbox_image: Some("--privileged".into()),
                    ..JoinParams::default()
                },
                "`join.sandboxImage`: \"--privileged\" is not a valid image reference",
            ),
            (
                JoinParams {
                    images: vec!["pause.tar".into()],
                    ..JoinParams::default()
                },
                "must be an absolute path",
            ),
            (
                JoinParams {
                    api_server: Some("http://10.0.0.1:6443".into()),
                    ..JoinParams::default()
                },
                "https://",
            ),
            (
                JoinParams {
                    node_labels: vec!["pool".into()],
                    ..JoinParams::default()
                },
                "key=value",
            ),
        ];
        for (join, says) in cases {
            let why = refused(join);
            assert!(why.contains(says), "{why:?} should say {says:?}");
        }
        assert_eq!(refused(JoinParams::default()), "");
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
