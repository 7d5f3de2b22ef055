//! `workflow-operator ui` (`kubectl workflow ui`): a read-only web view of WorkflowGroups, live,
//! served on loopback with the user's own kubeconfig. It shows what `get` shows (the same
//! [`GroupView`](crate::view::GroupView)) and the waves as a grid of targets by type; it can
//! never show more than the user may read, since it reads as them.

use std::net::SocketAddr;
use std::process::{Command, Stdio};

mod live;
mod server;

use self::live::Live;
use self::server::Server;
use super::get::{connect, runtime};

/// What `ui` serves and how.
#[derive(Debug, clap::Args)]
pub struct UiArgs {
    /// The namespace to show (by default the kubeconfig's).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Show the groups of every namespace the user may list.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Where to listen: a loopback address (port 0 lets the system choose).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub address: SocketAddr,
    /// Do not open a browser; only print the URL.
    #[arg(long)]
    pub no_open: bool,
    /// The namespace of the lock Leases (the operator's `--lock-namespace`).
    #[arg(long, default_value = "workflow-system")]
    pub lock_namespace: String,
}

/// Serves the view until interrupted. Prints its URL (with this start's secret) first.
///
/// # Errors
/// No kubeconfig, an address that is not loopback or cannot be bound.
pub fn ui(args: UiArgs) -> anyhow::Result<u8> {
    runtime()?.block_on(async {
        let listener = server::bind(args.address).await?;
        let addr = listener.local_addr()?;
        let (client, default_ns) = connect(args.namespace).await?;
        let namespace = (!args.all_namespaces).then_some(default_ns);
        let live = Live::start(client, namespace.clone(), args.lock_namespace);
        let secret = server::new_secret()?;
        let host = match addr {
            SocketAddr::V4(a) => format!("{}:{}", a.ip(), a.port()),
            SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
        };
        let url = format!("http://{host}/?token={secret}");
        println!("{url}");
        eprintln!(
            "serving the WorkflowGroups of {} read-only on {addr}, as your kubeconfig's user; Ctrl-C stops",
            namespace.map_or_else(|| "every namespace you may list".into(), |ns| format!("namespace {ns}"))
        );
        if !args.no_open {
            open_browser(&url);
        }
        let server = Server {
            live,
            secret,
            hosts: server::hosts_of(addr),
        };
        tokio::select! {
            () = server::serve(listener, server) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(0)
    })
}

/// Opens `url` in the desktop's browser, when there is a desktop; says so when it cannot.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let started = Command::new(opener)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    if started.is_err() {
        eprintln!("(no {opener} here: open the URL above in a browser)");
    }
}
