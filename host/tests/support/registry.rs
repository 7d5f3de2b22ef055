//! A registry for the plugin-pull tests: the CNCF Distribution registry (the reference
//! implementation of the OCI distribution spec), built by `tests/oci/build-registry.sh`, on
//! loopback, storing in a directory of its own.
//!
//! A test binary takes it with `#[path = "support/registry.rs"] mod registry;` beside
//! `support/operator.rs`.
// Each test binary uses a part of it.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use workflow_e2e::repo_root;

use crate::operator::{TIMEOUT, log_dir, now_millis};

/// A registry on loopback, storing in a directory of its own; stopped when dropped.
pub struct Registry {
    child: Child,
    pub addr: String,
    storage: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Registry {
        Registry::start_with(None)
    }

    /// A registry that lets in only `login` (user, bcrypt hash of the password), as its
    /// htpasswd file says.
    pub fn start_with_login(user: &str, bcrypt_hash: &str) -> Registry {
        Registry::start_with(Some(format!("{user}:{bcrypt_hash}\n")))
    }

    fn start_with(htpasswd: Option<String>) -> Registry {
        let script = repo_root().join("tests/oci/build-registry.sh");
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .expect("run build-registry.sh");
        assert!(
            out.status.success(),
            "build-registry.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let bin = PathBuf::from(stdout.lines().last().expect("the registry's path").trim());
        let storage = tempfile::tempdir().expect("registry storage");
        let addr = format!("127.0.0.1:{}", free_port());
        let config = storage.path().join("config.yml");
        let mut text = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n  secret: e2e\n",
            storage.path().join("data").display()
        );
        if let Some(htpasswd) = htpasswd {
            let file = storage.path().join("htpasswd");
            std::fs::write(&file, htpasswd).expect("htpasswd");
            text.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: e2e\n    path: {}\n",
                file.display()
            ));
        }
        std::fs::write(&config, text).expect("registry config");
        let log = std::fs::File::create(log_dir().join(format!("registry-{}.log", now_millis())))
            .expect("registry log");
        let child = Command::new(bin)
            .args([Path::new("serve"), &config])
            .env("OTEL_TRACES_EXPORTER", "none")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start the registry");
        let started = Instant::now();
        while TcpStream::connect(&addr).is_err() {
            assert!(
                started.elapsed() < TIMEOUT,
                "the registry never listened on {addr}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Registry {
            child,
            addr,
            storage,
        }
    }

    /// The file the registry keeps the blob of `digest` in.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.storage
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on (yet).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}
