//! The `workflow-operator` binary: wires the pieces together, nothing more.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use kube::runtime::events::Reporter;
use tracing::{info, warn};
use workflow_model::text::printable;
use workflow_operator::cli::plugin::PluginCommand;
use workflow_operator::controllers::context::StepDefaults;
use workflow_operator::controllers::{self, Metrics, OperatorConfig};
use workflow_operator::locks::LockConfig;

/// jemalloc instead of the C library's allocator: glibc keeps much of what a burst freed (the
/// plugin compiler's at start-up, a thousand groups' at scale) in its per-thread arenas, and
/// musl's is slow. Measured at 1000 groups at once: peak RSS 108 MiB instead of 125 MiB, and
/// a fifth less CPU. Its settings are in `.cargo/config.toml`.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
use workflow_operator::http::{self, Readiness};
use workflow_operator::leader::{self, LeaseConfig};
use workflow_operator::plugin::{PluginMetrics, PluginRegistry, Runtime, RuntimeConfig};
use workflow_operator::plugin_configmaps::{self, ConfigMapSource, PLUGIN_LABEL};
use workflow_operator::webhook::{self, WebhookMetrics};

#[derive(Parser)]
#[command(
    name = "workflow-operator",
    version,
    about = "Runs WorkflowGroups whose workflow types are WebAssembly plugins"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator against the current kubeconfig (or in-cluster config).
    Run(Box<RunArgs>),
    /// Print the CustomResourceDefinitions as YAML.
    Crdgen,
    /// Tools for plugin authors: inspect, render and evaluate a plugin without a cluster.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Print a WorkflowGroup as a tree: its Workflows, their steps and the steps' targets, with
    /// phase, start, duration, attempts, exit code and why anything waits.
    Get {
        /// What to print: `wfg` (a WorkflowGroup).
        kind: workflow_operator::cli::get::Kind,
        /// The group's name.
        name: String,
        /// Its namespace (by default the kubeconfig's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Print what a WorkflowGroup would do, in order, without creating anything: its waves
    /// and their targets, each type's steps (with `--plugins`), when waves may start, and
    /// which of its targets are locked now and by whom.
    Plan {
        /// The WorkflowGroup YAML.
        #[arg(short = 'f', long = "filename")]
        file: std::path::PathBuf,
        /// A directory of plugins (`*.wasm`), to list each type's steps.
        #[arg(long)]
        plugins: Option<std::path::PathBuf>,
        /// The namespace of the lock Leases (the operator's `--lock-namespace`).
        #[arg(long, default_value = "workflow-system")]
        lock_namespace: String,
        /// `server`: first have the API server judge the group as it would at apply (its
        /// schema, its rules, the admission webhook where one runs) without keeping it, as
        /// `kubectl apply --dry-run=server` does; a refusal is the command's error. `none`
        /// (the default): the group is checked here only.
        #[arg(long = "dry-run", value_enum, default_value_t = DryRun::None)]
        dry_run: DryRun,
    },
    /// Approve (or reject) a step that waits for approval, in its group's current run, as
    /// you: creates an Approval whose approver is the user the API server says you are.
    Approve {
        /// The group's name.
        group: String,
        /// The step: its name, or `<type>/<name>` or `<workflow>/<name>` when the step of that
        /// name waits in several Workflows (in a rollout, the wave that waits is found).
        step: String,
        /// The group's namespace (by default the kubeconfig's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// Reject it instead: the step fails.
        #[arg(long)]
        reject: bool,
        /// Why, for the record.
        #[arg(long)]
        comment: Option<String>,
    },
    /// Run a finished group again (`spec.rerun`), as you: your name goes with the request and
    /// `status.runs` records it.
    Rerun {
        /// The group's name.
        group: String,
        /// The group's namespace (by default the kubeconfig's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// The re-run's id (by default one made of the time): the operator acts once per id.
        #[arg(long)]
        id: Option<String>,
        /// Run every step again, not only those that did not complete.
        #[arg(long)]
        all: bool,
        /// Run each step again only on the targets where it failed or that it could not reach.
        #[arg(long)]
        failed_targets: bool,
    },
    /// Pause a group (no new step or Workflow starts), as you: `status.runs` records it.
    Pause {
        /// The group's name.
        group: String,
        /// The group's namespace (by default the kubeconfig's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Resume a paused group, as you: `status.runs` records it.
    Resume {
        /// The group's name.
        group: String,
        /// The group's namespace (by default the kubeconfig's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Print a step's output: from its pod while the pod exists, then the end of it that the
    /// step's status kept.
    Logs {
        /// The group's name.
        group: String,
        /// The step: its name, or `<type>/<name>` when several types have one of that name.
        step: String,
        /// The group's namespace (by default the kubeconfig's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Serve a read-only web view of the groups, live, on loopback, as the kubeconfig's user:
    /// the groups with their phase and progress, and a group's waves as a grid of targets by
    /// type, its steps, runs, locks, Events and logs. Prints the URL and opens a browser.
    Ui(workflow_operator::cli::ui::UiArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Directory of `*.wasm` workflow type plugins, watched for changes (a mounted volume).
    /// Plugins from ConfigMaps (`--plugin-configmaps`) are served beside it.
    #[arg(long, env = "WORKFLOW_PLUGIN_DIR")]
    plugin_dir: Option<PathBuf>,
    /// Label selector of the ConfigMaps whose `*.wasm` entries are plugins, read through the
    /// API in the plugin namespace; an empty value turns this source off.
    #[arg(long, env = "WORKFLOW_PLUGIN_CONFIGMAPS", default_value = PLUGIN_LABEL)]
    plugin_configmaps: String,
    /// Namespace of the plugin ConfigMaps (and of the leader lease): by default the pod's own
    /// namespace (`POD_NAMESPACE`), else the kubeconfig's.
    #[arg(long, env = "POD_NAMESPACE")]
    plugin_namespace: Option<String>,
    /// Run the controllers only while holding a Lease, so that replicas wait as standbys.
    #[arg(long, env = "WORKFLOW_LEADER_ELECT")]
    leader_elect: bool,
    /// Name of the leader election Lease.
    #[arg(
        long,
        env = "WORKFLOW_LEADER_ELECTION_ID",
        default_value = "workflow-operator"
    )]
    leader_election_id: String,
    /// Namespace of the leader election Lease (by default the plugin namespace).
    #[arg(long, env = "WORKFLOW_LEADER_ELECTION_NAMESPACE")]
    leader_election_namespace: Option<String>,
    /// Image of a step's container when the step names none: the step image, with a shell,
    /// the usual commands and `workflow-runner` (the built-in types' steps need it).
    #[arg(
        long,
        env = "WORKFLOW_DEFAULT_IMAGE",
        default_value = "workflow-step:dev"
    )]
    default_image: String,
    /// A `kubernetes.io/ssh-auth` Secret of the group's namespace mounted (optional) at
    /// /etc/workflow/ssh in every step pod whose pod template mounts nothing there: the key and
    /// known hosts `workflow-runner` logs in to the targets with. Empty: none.
    #[arg(long, env = "WORKFLOW_SSH_SECRET", default_value = "workflow-ssh")]
    ssh_secret: String,
    /// Address of the health, readiness, metrics and plugins endpoints.
    #[arg(long, env = "WORKFLOW_HTTP_ADDR", default_value = "127.0.0.1:8080")]
    http_addr: std::net::SocketAddr,
    /// Time limit of one plugin call, in milliseconds.
    #[arg(long, env = "WORKFLOW_PLUGIN_TIMEOUT_MS", default_value_t = 1000)]
    plugin_timeout_ms: u64,
    /// Memory limit of one plugin call, in MiB.
    #[arg(long, env = "WORKFLOW_PLUGIN_MEMORY_MIB", default_value_t = 64)]
    plugin_memory_mib: u64,
    /// A directory to keep compiled plugins in (wasmtime's cache: keyed by the plugin's bytes,
    /// the wasmtime version and the engine's settings), so that a restart does not compile
    /// them again. Without it every start compiles every plugin (about a second of CPU for the
    /// built-in types).
    #[arg(long, env = "WORKFLOW_PLUGIN_COMPILE_CACHE")]
    plugin_compile_cache: Option<PathBuf>,
    /// A directory to keep plugins pulled from OCI registries in, by digest (and the digest
    /// each tag was pinned to), so that a restart pulls nothing it has. Without it they are
    /// kept in memory and pulled again at every start.
    #[arg(long, env = "WORKFLOW_PLUGIN_PULL_CACHE")]
    plugin_pull_cache: Option<PathBuf>,
    /// Registries (`host[:port]`, comma-separated) that plugins are pulled from over plain
    /// HTTP instead of HTTPS: a registry on loopback.
    #[arg(
        long,
        env = "WORKFLOW_PLUGIN_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    plugin_insecure_registries: Vec<String>,
    /// The largest plugin pulled from a registry, in MiB.
    #[arg(long, env = "WORKFLOW_PLUGIN_MAX_MIB", default_value_t = workflow_operator::oci::DEFAULT_MAX_BYTES >> 20)]
    plugin_max_mib: u64,
    /// How long one pull of a plugin from a registry may take, in seconds; a failed pull is
    /// tried again after 5 s, then twice as long each time, up to 5 minutes.
    #[arg(long, env = "WORKFLOW_PLUGIN_PULL_TIMEOUT_SECONDS", default_value_t = workflow_operator::oci::DEFAULT_PULL_TIMEOUT.as_secs())]
    plugin_pull_timeout_seconds: u64,
    /// Watch only this namespace (all namespaces when unset).
    #[arg(long, env = "WORKFLOW_NAMESPACE")]
    namespace: Option<String>,
    /// Requests per second to the API server on average, client-side (0: no limit). Unset:
    /// no limit when the API server enforces API Priority and Fairness (it queues each client
    /// fairly and answers 429 with Retry-After, which the client honours), else 200.
    #[arg(long, env = "WORKFLOW_KUBE_API_QPS")]
    kube_api_qps: Option<u32>,
    /// Requests the client may send at once above the average rate.
    #[arg(long, env = "WORKFLOW_KUBE_API_BURST", default_value_t = 400)]
    kube_api_burst: u32,
    /// Reconciles each controller runs at once (each waits mostly on the API server).
    #[arg(long, env = "WORKFLOW_CONCURRENT_RECONCILES", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    concurrent_reconciles: u16,
    /// Namespace of the Leases that lock targets (by default the plugin namespace). Every
    /// operator sharing targets must use the same one.
    #[arg(long, env = "WORKFLOW_LOCK_NAMESPACE")]
    lock_namespace: Option<String>,
    /// The lock Leases' `leaseDurationSeconds`: a lock whose group is gone (deleted, finished)
    /// is freed within this time, whatever happened to the operator meanwhile.
    #[arg(long, env = "WORKFLOW_LOCK_LEASE_SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(3..=3600))]
    lock_lease_seconds: u64,
    /// How long a group may hold locks while its Workflow waits with nothing running (a
    /// schedule, an approval, a pause) before it gives them to groups waiting for them; it
    /// takes them again, first come first served, before a step starts.
    #[arg(long, env = "WORKFLOW_LOCK_IDLE_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
    lock_idle_seconds: u64,
    /// A group acting on more targets at once than this locks them by range (at most 256
    /// Leases per cluster, however many targets) instead of one Lease per target; 0: never.
    /// Every operator sharing targets must use the same value.
    #[arg(long, env = "WORKFLOW_LOCK_RANGES_ABOVE", default_value_t = 256)]
    lock_ranges_above: usize,
    /// Log format: `text` for people, `json` (one object per line) for log pipelines.
    #[arg(long, env = "WORKFLOW_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(flatten)]
    webhook: WebhookArgs,
}

/// The validating admission webhook (see docs/src/using-groups.md: "Refusal at apply time").
#[derive(clap::Args)]
struct WebhookArgs {
    /// Address of the admission webhook (HTTPS), served by every replica; unset: no webhook.
    #[arg(long, env = "WORKFLOW_WEBHOOK_ADDR")]
    webhook_addr: Option<std::net::SocketAddr>,
    /// The Secret, in the operator's namespace, holding the webhook's CA and serving
    /// certificate: made and renewed by the leader, watched by every replica.
    #[arg(
        long,
        env = "WORKFLOW_WEBHOOK_SECRET",
        default_value = "workflow-operator-webhook-tls"
    )]
    webhook_secret: String,
    /// The ValidatingWebhookConfiguration whose webhooks' caBundle the leader keeps equal to
    /// the Secret's CA bundle; empty: the install keeps it.
    #[arg(
        long,
        env = "WORKFLOW_WEBHOOK_CONFIG_NAME",
        default_value = "workflow-operator"
    )]
    webhook_config_name: String,
    /// The webhook's Service (in the operator's namespace): the serving certificate covers
    /// its DNS names, and localhost.
    #[arg(
        long,
        env = "WORKFLOW_WEBHOOK_SERVICE",
        default_value = "workflow-operator-webhook"
    )]
    webhook_service: String,
    /// How long the plugins of one admission may take, in milliseconds: below the webhook's
    /// `timeoutSeconds`, so that a slow plugin lets the group in with a warning instead of
    /// the API server applying the failure policy.
    #[arg(long, env = "WORKFLOW_WEBHOOK_BUDGET_MS", default_value_t = 3000)]
    webhook_budget_ms: u64,
    /// Admission reviews decoded and decided at once by one replica; one more is answered
    /// 503 with `Retry-After: 1` (see docs/src/security.md: "The webhook holds under abuse").
    #[arg(
        long,
        env = "WORKFLOW_WEBHOOK_MAX_REVIEWS",
        default_value_t = webhook::WebhookLimits::default().max_reviews_in_flight
    )]
    webhook_max_reviews: usize,
    /// Plugin calls of admission reviews at once, apart from the controllers' own: reviews
    /// wait for each other within their budget, never for the controllers.
    #[arg(
        long,
        env = "WORKFLOW_WEBHOOK_REVIEW_PLUGIN_CALLS",
        default_value_t = webhook::WebhookLimits::default().max_review_plugin_calls
    )]
    webhook_review_plugin_calls: usize,
    /// Lifetime of the webhook's CA, in seconds (renewed at two thirds).
    #[arg(long, hide = true, default_value_t = 365 * 24 * 3600)]
    webhook_ca_lifetime_secs: u64,
    /// Lifetime of the webhook's serving certificate, in seconds (renewed at two thirds).
    #[arg(long, hide = true, default_value_t = 30 * 24 * 3600)]
    webhook_serving_lifetime_secs: u64,
    /// How often the leader checks the certificates, in seconds. After a new CA, the serving
    /// certificate switches to it one check later, once API servers have had time to see it.
    #[arg(long, hide = true, default_value_t = 60)]
    webhook_check_secs: u64,
}

/// Whether `plan` has the API server judge the group too (`--dry-run`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum DryRun {
    None,
    Server,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crdgen => print_crds().map(|()| 0),
        Command::Plugin { command } => workflow_operator::cli::plugin::run(command),
        Command::Run(args) => run(*args).map(|()| 0),
        Command::Get {
            kind,
            name,
            namespace,
        } => workflow_operator::cli::get::get(kind, &name, namespace),
        Command::Plan {
            file,
            plugins,
            lock_namespace,
            dry_run,
        } => workflow_operator::cli::plan::plan(
            &file,
            plugins.as_deref(),
            &lock_namespace,
            dry_run == DryRun::Server,
        ),
        Command::Logs {
            group,
            step,
            namespace,
        } => workflow_operator::cli::get::logs(&group, &step, namespace),
        Command::Ui(args) => workflow_operator::cli::ui::ui(args),
        Command::Approve {
            group,
            step,
            namespace,
            reject,
            comment,
        } => workflow_operator::cli::get::approve(&group, &step, namespace, reject, comment),
        Command::Rerun {
            group,
            namespace,
            id,
            all,
            failed_targets,
        } => {
            use workflow_operator::api::{RerunFrom, RerunTargets};
            let rerun = workflow_operator::cli::ask::Rerun {
                id,
                from: if all {
                    RerunFrom::All
                } else {
                    RerunFrom::Failed
                },
                targets: if failed_targets {
                    RerunTargets::Failed
                } else {
                    RerunTargets::All
                },
            };
            workflow_operator::cli::ask::rerun(&group, namespace, rerun)
        }
        Command::Pause { group, namespace } => {
            workflow_operator::cli::ask::pause(&group, namespace, true)
        }
        Command::Resume { group, namespace } => {
            workflow_operator::cli::ask::pause(&group, namespace, false)
        }
    };
    match result {
        Ok(status) => ExitCode::from(status),
        Err(error) => {
            // One line a user can act on: the error and its causes, with any plugin text in
            // them escaped (no raw newlines or terminal sequences) and cut.
            let chain: Vec<String> = error.chain().map(ToString::to_string).collect();
            eprintln!("error: {}", printable(&chain.join(": "), 8192));
            ExitCode::FAILURE
        }
    }
}

fn print_crds() -> anyhow::Result<()> {
    print!("{}", workflow_operator::api::crds_yaml()?);
    Ok(())
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube=warn,wasmtime=warn,cranelift=warn".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .init(),
        // Each line an object with the reconcile span's fields (controller, namespace, name).
        LogFormat::Json => logs.json().with_current_span(true).init(),
    }
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    init_logs(args.log_format);
    // Spawned, not run by the main thread: the controllers' futures then run on the workers
    // that also drive their connections, instead of each wake crossing to the main thread.
    tokio::runtime::Runtime::new()?.block_on(async {
        tokio::spawn(operate(args))
            .await
            .map_err(|e| anyhow::anyhow!("the operator's task failed: {e}"))?
    })
}

/// The operator's life: plugins loaded, the webhook served, the leader lease held, the
/// controllers run until a shutdown signal or the loss of the lease.
async fn operate(args: RunArgs) -> anyhow::Result<()> {
    let mut prometheus = prometheus_client::registry::Registry::default();
    let registry = plugin_registry(&args, &mut prometheus)?;
    let _watch = watch_plugin_dir(&args, &registry)?;
    let readiness = Readiness::default();
    let metrics = Arc::new(Metrics::register(&mut prometheus));
    let webhook_metrics = args
        .webhook
        .webhook_addr
        .map(|_| WebhookMetrics::register(&mut prometheus));
    let client = api_client(&args, metrics.clone()).await?;
    // The standby serves /healthz (and /plugins) too; /readyz waits for the controllers.
    tokio::spawn(http::serve(
        args.http_addr,
        Arc::new(prometheus),
        registry.clone(),
        readiness.clone(),
    ));
    let own_namespace = args
        .plugin_namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let reporter = Reporter {
        controller: "workflow-operator".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    // Controllers start with every source read once: a group must not be told its type is
    // missing while its ConfigMap is still being listed. A standby compiles them too, so
    // that it takes over ready.
    let plugins_loaded =
        watch_plugin_configmaps(&args, &client, &registry, &own_namespace, &reporter);
    tokio::select! {
        _ = plugins_loaded => readiness.set_plugins_loaded(),
        () = shutdown_signal() => return Ok(()),
    }
    // Every replica answers admissions, with the plugins just loaded.
    if let Some(addr) = args.webhook.webhook_addr {
        serve_webhook(
            addr,
            &args.webhook,
            &client,
            &own_namespace,
            &registry,
            webhook_metrics,
        )
        .await?;
    }
    let Some(role) = lead(&args, &client, &own_namespace).await? else {
        info!("stopped while waiting for the leader lease");
        return Ok(());
    };
    if args.webhook.webhook_addr.is_some() {
        // Leader only: the process ends with the lease, and this task with it.
        tokio::spawn(webhook::keeper::keep(
            client.clone(),
            keeper_config(&args.webhook, &own_namespace),
        ));
    }
    let config = operator_config(args, &own_namespace);
    let controllers = controllers::run(client, registry, config, metrics, readiness, reporter);
    match role {
        Role::Only => controllers.await,
        Role::Leader(mut leadership) => {
            tokio::select! {
                () = controllers => leadership.release().await,
                () = leadership.lost() => {
                    // Another replica may be leading already: stop every write at once.
                    anyhow::bail!("lost the leader lease; stopping so that this replica restarts as a standby");
                }
            }
        }
    }
    Ok(())
}

/// The plugin registry, its runtime bounded by the flags, its calls counted in `prometheus`.
fn plugin_registry(
    args: &RunArgs,
    prometheus: &mut prometheus_client::registry::Registry,
) -> anyhow::Result<PluginRegistry> {
    let config = RuntimeConfig {
        call_timeout: std::time::Duration::from_millis(args.plugin_timeout_ms),
        memory_limit_bytes: args.plugin_memory_mib * 1024 * 1024,
        compile_cache: args.plugin_compile_cache.clone(),
        ..RuntimeConfig::default()
    };
    let plugin_metrics = PluginMetrics::register(prometheus);
    Ok(PluginRegistry::new(
        Runtime::new(config)?.with_metrics(plugin_metrics),
    ))
}

/// Loads the plugins of `--plugin-dir` and follows its changes while the guard lives.
fn watch_plugin_dir(
    args: &RunArgs,
    registry: &PluginRegistry,
) -> anyhow::Result<Option<workflow_operator::plugin::WatchGuard>> {
    let Some(dir) = &args.plugin_dir else {
        return Ok(None);
    };
    let guard = registry.watch(dir)?;
    info!(dir = %dir.display(), types = ?registry.types().len(), "loaded plugins from the directory");
    Ok(Some(guard))
}

/// The API client: every request counted, and held to the flags' rate ([`client_limit`]).
async fn api_client(args: &RunArgs, metrics: Arc<Metrics>) -> anyhow::Result<kube::Client> {
    let config = kube::Config::infer().await?;
    let fair = match args.kube_api_qps {
        Some(_) => None,
        None => Some(server_is_fair(&config).await),
    };
    let limit = client_limit(args.kube_api_qps, args.kube_api_burst, fair);
    match limit {
        Some((qps, burst)) => info!(qps, burst, "client-side rate limit of API requests"),
        None if fair == Some(true) => info!(
            "no client-side rate limit of API requests: the API server enforces API Priority and Fairness"
        ),
        None => info!("no client-side rate limit of API requests (--kube-api-qps 0)"),
    }
    let count_requests =
        tower::util::MapRequestLayer::new(move |request: ::http::Request<kube::client::Body>| {
            metrics.api_request(
                request.method().as_str(),
                request.uri().path(),
                request.uri().query(),
            );
            request
        });
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&count_requests)
        .with_layer(&rate_limit(limit))
        .build())
}

/// The client-side limit when the flag does not set one and the API server has no fairness of
/// its own.
const DEFAULT_QPS: u32 = 200;

/// The client-side rate limit, as (requests per second, burst): the flag's, when it is set (0:
/// none); unset, none when the API server enforces API Priority and Fairness (`fair`, asked
/// only then), as Flux's controllers do: the server then queues each client's requests fairly
/// against everyone else's and answers 429 with Retry-After when it is full, which the client
/// honours; a second, client-side queue in front of it only delays the operator's steps (at
/// 100 groups at once it held step starts for seconds). Otherwise [`DEFAULT_QPS`].
fn client_limit(qps: Option<u32>, burst: u32, fair: Option<bool>) -> Option<(u32, u32)> {
    let qps = match (qps, fair) {
        (Some(qps), _) => qps,
        (None, Some(true)) => 0,
        (None, _) => DEFAULT_QPS,
    };
    (qps > 0).then(|| (qps, burst.max(1)))
}

/// Whether the API server enforces API Priority and Fairness: it names the priority level of
/// every request it classifies in a response header (what client-go's `flowcontrol.IsEnabled`
/// asks). Asked of `/version`, which every client may read; an answer that cannot be had counts
/// as no.
async fn server_is_fair(config: &kube::Config) -> bool {
    const HEADER: &str = "x-kubernetes-pf-prioritylevel-uid";
    let asked = async {
        let client = kube::Client::try_from(config.clone())?;
        let request = ::http::Request::get("/version").body(kube::client::Body::empty())?;
        anyhow::Ok(client.send(request).await?.headers().contains_key(HEADER))
    };
    match tokio::time::timeout(std::time::Duration::from_secs(10), asked).await {
        Ok(Ok(fair)) => fair,
        Ok(Err(error)) => {
            warn!(%error, "could not ask the API server whether it enforces API Priority and Fairness; limiting requests client-side");
            false
        }
        Err(_) => {
            warn!(
                "the API server did not say within 10 s whether it enforces API Priority and Fairness; limiting requests client-side"
            );
            false
        }
    }
}

/// Starts the watch of the plugin ConfigMaps, if any are selected; the receiver is told once
/// they have all been read.
fn watch_plugin_configmaps(
    args: &RunArgs,
    client: &kube::Client,
    registry: &PluginRegistry,
    own_namespace: &str,
    reporter: &Reporter,
) -> tokio::sync::oneshot::Receiver<()> {
    let (loaded, plugins_loaded) = tokio::sync::oneshot::channel::<()>();
    if args.plugin_configmaps.is_empty() {
        let _ = loaded.send(());
    } else {
        let source = ConfigMapSource {
            namespace: own_namespace.to_string(),
            selector: args.plugin_configmaps.clone(),
            puller: workflow_operator::oci::Puller::new(workflow_operator::oci::PullConfig {
                cache_dir: args.plugin_pull_cache.clone(),
                insecure_registries: args.plugin_insecure_registries.clone(),
                max_bytes: args.plugin_max_mib << 20,
                timeout: std::time::Duration::from_secs(args.plugin_pull_timeout_seconds),
            }),
        };
        tokio::spawn(plugin_configmaps::watch(
            client.clone(),
            registry.clone(),
            source,
            reporter.clone(),
            move || {
                let _ = loaded.send(());
            },
        ));
    }
    plugins_loaded
}

/// How this replica runs the controllers.
enum Role {
    /// Without leader election: it is the only one.
    Only,
    /// As the holder of the leader lease, until it loses it.
    Leader(leader::Leadership),
}

/// This replica's role, once it has it (for the leader: the lease held); `None` when a
/// shutdown signal came first.
async fn lead(
    args: &RunArgs,
    client: &kube::Client,
    own_namespace: &str,
) -> anyhow::Result<Option<Role>> {
    if !args.leader_elect {
        return Ok(Some(Role::Only));
    }
    let lease = LeaseConfig {
        name: args.leader_election_id.clone(),
        namespace: args
            .leader_election_namespace
            .clone()
            .unwrap_or_else(|| own_namespace.to_string()),
        identity: identity(),
    };
    tokio::select! {
        held = leader::acquire(client.clone(), &lease) => Ok(Some(Role::Leader(held?))),
        () = shutdown_signal() => Ok(None),
    }
}

/// What the controllers are told of the flags.
fn operator_config(args: RunArgs, own_namespace: &str) -> OperatorConfig {
    OperatorConfig {
        step_defaults: StepDefaults {
            image: args.default_image,
            ssh_secret: (!args.ssh_secret.is_empty()).then_some(args.ssh_secret),
        },
        namespace: args.namespace,
        concurrent_reconciles: args.concurrent_reconciles,
        locks: LockConfig {
            namespace: args
                .lock_namespace
                .unwrap_or_else(|| own_namespace.to_string()),
            lease_duration: std::time::Duration::from_secs(args.lock_lease_seconds),
            idle: std::time::Duration::from_secs(args.lock_idle_seconds),
            ranges_above: args.lock_ranges_above,
        },
    }
}

/// Serves the admission webhook on `addr` (every replica), with the certificate of the
/// Secret, followed as it is renewed.
async fn serve_webhook(
    addr: std::net::SocketAddr,
    args: &WebhookArgs,
    client: &kube::Client,
    own_namespace: &str,
    registry: &PluginRegistry,
    metrics: Option<WebhookMetrics>,
) -> anyhow::Result<()> {
    let provider = webhook::crypto_provider();
    let serving = Arc::new(webhook::ServingCert::new(provider.clone()));
    tokio::spawn(webhook::tls::follow(
        client.clone(),
        own_namespace.to_string(),
        args.webhook_secret.clone(),
        serving.clone(),
    ));
    let limits = webhook::WebhookLimits {
        max_reviews_in_flight: args.webhook_max_reviews.max(1),
        max_review_plugin_calls: args.webhook_review_plugin_calls.max(1),
        ..webhook::WebhookLimits::default()
    };
    let reviewer = webhook::Reviewer::new(
        registry.clone(),
        std::time::Duration::from_millis(args.webhook_budget_ms),
        limits.max_review_plugin_calls,
        metrics.clone(),
    );
    let server = webhook::Webhook::bind(addr, serving, provider, reviewer, limits, metrics).await?;
    tokio::spawn(server.run());
    Ok(())
}

/// What the leader keeps: the Secret, the configuration's caBundle, the certificates' names.
fn keeper_config(args: &WebhookArgs, own_namespace: &str) -> webhook::KeeperConfig {
    webhook::KeeperConfig {
        namespace: own_namespace.to_string(),
        secret: args.webhook_secret.clone(),
        webhook_configuration: (!args.webhook_config_name.is_empty())
            .then(|| args.webhook_config_name.clone()),
        names: webhook::certs::serving_names(&args.webhook_service, own_namespace),
        lifetimes: webhook::Lifetimes {
            ca: std::time::Duration::from_secs(args.webhook_ca_lifetime_secs),
            serving: std::time::Duration::from_secs(args.webhook_serving_lifetime_secs),
        },
        interval: std::time::Duration::from_secs(args.webhook_check_secs.max(1)),
    }
}

/// The client-side limit of API requests, if any: `burst` requests per `burst / qps` seconds,
/// which averages `qps` and lets `burst` go at once (client-go's token bucket, approximated by
/// tower's fixed windows).
fn rate_limit(
    limit: Option<(u32, u32)>,
) -> tower::util::Either<tower::limit::RateLimitLayer, tower::layer::util::Identity> {
    let layer = limit.map(|(qps, burst)| {
        let window = std::time::Duration::from_secs_f64(f64::from(burst) / f64::from(qps));
        tower::limit::RateLimitLayer::new(u64::from(burst), window)
    });
    tower::util::option_layer(layer)
}

/// Who this replica is in the leader election: its pod name in a cluster, else the host
/// name and process id.
fn identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME") {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "workflow-operator".into());
    format!("{host}-{}", std::process::id())
}

/// SIGTERM (what the kubelet sends) or Ctrl-C.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_limits_requests_only_when_told_to_or_when_the_server_has_no_fairness() {
        // Unset: none before a fair server, the default before one without fairness (or that
        // could not be asked).
        assert_eq!(client_limit(None, 400, Some(true)), None);
        assert_eq!(
            client_limit(None, 400, Some(false)),
            Some((DEFAULT_QPS, 400))
        );
        assert_eq!(client_limit(None, 400, None), Some((DEFAULT_QPS, 400)));
        // Set: the flag, whatever the server does; 0 is no limit.
        assert_eq!(client_limit(Some(50), 100, Some(true)), Some((50, 100)));
        assert_eq!(client_limit(Some(50), 0, Some(false)), Some((50, 1)));
        assert_eq!(client_limit(Some(0), 400, Some(false)), None);
    }
}
