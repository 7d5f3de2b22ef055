//! The plugin registry and its hot reload, in a temporary directory laid out as kubelet lays
//! out a ConfigMap volume, and updated as kubelet's AtomicWriter does: a new timestamped
//! directory, then an atomic rename of a temporary symlink over `..data`.

mod plugin_support;

use std::collections::BTreeSet;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::{Duration, Instant};

use plugin_support::{builtin, runtime, test_plugin};
use tokio::sync::watch;
use workflow_operator::plugin::{Origin, PluginRegistry};

const WAIT: Duration = Duration::from_secs(20);

/// A ConfigMap volume: `..<timestamp>/<key>`, `..data -> ..<timestamp>`, `<key> -> ..data/<key>`.
struct ConfigMapVolume {
    dir: tempfile::TempDir,
    version: u32,
    current: Option<String>,
}

impl ConfigMapVolume {
    fn new() -> Self {
        let mut volume = Self {
            dir: tempfile::tempdir().expect("temp dir"),
            version: 0,
            current: None,
        };
        volume.publish(&[]);
        volume
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Replaces the volume's content by `files`, atomically, as kubelet does.
    fn publish(&mut self, files: &[(&str, &[u8])]) {
        let root = self.dir.path();
        self.version += 1;
        let ts = format!("..2026_01_01_00_00_00.{}", self.version);
        std::fs::create_dir(root.join(&ts)).expect("timestamped dir");
        for (name, bytes) in files {
            std::fs::write(root.join(&ts).join(name), bytes).expect("write key");
        }
        symlink(&ts, root.join("..data_tmp")).expect("temp symlink");
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).expect("swap ..data");
        let keys: BTreeSet<&str> = files.iter().map(|(name, _)| *name).collect();
        for name in &keys {
            let link = root.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(Path::new("..data").join(name), &link).expect("key symlink");
            }
        }
        for entry in std::fs::read_dir(root).expect("read volume") {
            let entry = entry.expect("entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with('.') && !keys.contains(name.as_str()) {
                std::fs::remove_file(entry.path()).expect("remove stale key");
            }
        }
        if let Some(old) = self.current.replace(ts) {
            std::fs::remove_dir_all(root.join(old)).expect("remove old version");
        }
    }
}

/// Waits until the registry's generation changes, then returns it.
async fn next_generation(rx: &mut watch::Receiver<u64>) -> u64 {
    tokio::time::timeout(WAIT, rx.changed())
        .await
        .expect("the registry did not report a change in time")
        .expect("registry dropped");
    *rx.borrow_and_update()
}

/// Waits until `cond` holds (for changes that do not change the set of types).
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < WAIT, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn digest_of(registry: &PluginRegistry, type_name: &str) -> Option<String> {
    registry.get(type_name).map(|p| p.digest().to_string())
}

#[tokio::test]
async fn hot_reload_follows_configmap_updates_add_replace_break_fix_remove() {
    let v1 = builtin("pre-check");
    let v2 = test_plugin("pre-check-v2");
    let mut volume = ConfigMapVolume::new();
    let registry = PluginRegistry::new(runtime().clone());
    let mut rx = registry.subscribe();
    let _guard = registry.watch(volume.path()).expect("watch");
    assert!(registry.types().is_empty());

    // Add.
    volume.publish(&[("pre-check.wasm", &v1)]);
    next_generation(&mut rx).await;
    let d1 = digest_of(&registry, "pre-check").expect("pre-check served after add");
    let types = registry.types();
    assert_eq!(types.len(), 1);
    assert_eq!(
        types[0].file,
        Origin::File(volume.path().join("pre-check.wasm"))
    );
    assert!(registry.problems().is_empty(), "{:?}", registry.problems());

    // Replace: the new digest is served, the old one stays reachable by pin.
    volume.publish(&[("pre-check.wasm", &v2)]);
    next_generation(&mut rx).await;
    let d2 = digest_of(&registry, "pre-check").expect("pre-check served after replace");
    assert_ne!(d1, d2);
    assert_eq!(registry.types()[0].version, "2.0.0");
    let pinned = registry
        .get_pinned("pre-check", &d1)
        .expect("old version still pinned");
    assert_eq!(pinned.digest(), d1);
    assert!(
        registry.get_pinned("setup", &d1).is_none(),
        "a pin is for one type"
    );

    // Break: the last good version keeps serving, the problem is reported.
    volume.publish(&[("pre-check.wasm", b"not a component")]);
    eventually("the broken file is reported", || {
        !registry.problems().is_empty()
    })
    .await;
    let problems = registry.problems();
    assert_eq!(
        problems[0].file,
        Origin::File(volume.path().join("pre-check.wasm"))
    );
    assert!(
        problems[0]
            .message()
            .contains("not a WebAssembly component"),
        "{problems:?}"
    );
    assert!(
        problems[0].message().contains("last good version"),
        "{problems:?}"
    );
    assert_eq!(
        digest_of(&registry, "pre-check").as_deref(),
        Some(d2.as_str())
    );
    assert!(
        !rx.has_changed().expect("registry alive"),
        "breaking must not change the set"
    );

    // Fix.
    volume.publish(&[("pre-check.wasm", &v1)]);
    next_generation(&mut rx).await;
    assert_eq!(
        digest_of(&registry, "pre-check").as_deref(),
        Some(d1.as_str())
    );
    assert!(registry.problems().is_empty(), "{:?}", registry.problems());

    // Remove.
    volume.publish(&[]);
    next_generation(&mut rx).await;
    assert!(registry.get("pre-check").is_none());
    assert!(registry.types().is_empty());
    // Still pinned: Workflows started with it finish with the version they started with.
    assert!(registry.get_pinned("pre-check", &d2).is_some());
}

#[test]
fn two_files_claiming_one_type_is_a_reported_conflict() {
    let v1 = builtin("pre-check");
    let v2 = test_plugin("pre-check-v2");
    let mut volume = ConfigMapVolume::new();
    let registry = PluginRegistry::new(runtime().clone());

    // No previous holder: neither is served.
    volume.publish(&[("a.wasm", &v1), ("b.wasm", &v2)]);
    let report = registry.load_dir(volume.path());
    assert!(
        registry.get("pre-check").is_none(),
        "a conflict must not pick silently"
    );
    assert_eq!(report.problems.len(), 2, "{:?}", report.problems);
    for problem in &report.problems {
        assert!(problem.message().contains("conflict"), "{problem:?}");
        assert!(problem.message().contains("a.wasm") && problem.message().contains("b.wasm"));
    }

    // A previous holder keeps serving when a second file claims its type.
    volume.publish(&[("pre-check.wasm", &v1)]);
    registry.load_dir(volume.path());
    let d1 = registry
        .get("pre-check")
        .expect("served")
        .digest()
        .to_string();
    volume.publish(&[("pre-check.wasm", &v1), ("zz-copy.wasm", &v2)]);
    let report = registry.load_dir(volume.path());
    assert!(!report.changed);
    assert_eq!(
        registry.get("pre-check").expect("still served").digest(),
        d1
    );
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.message().contains("conflict"))
    );

    // Resolving the conflict clears the problem.
    volume.publish(&[("pre-check.wasm", &v1)]);
    let report = registry.load_dir(volume.path());
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn a_scan_loads_every_wasm_file_and_skips_dotfiles_and_other_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("pre-check.wasm"), builtin("pre-check")).expect("write");
    std::fs::write(dir.path().join("setup.wasm"), builtin("setup")).expect("write");
    std::fs::write(dir.path().join(".hidden.wasm"), b"junk").expect("write");
    std::fs::write(dir.path().join("README.md"), b"junk").expect("write");
    std::fs::create_dir(dir.path().join("sub.wasm")).expect("dir");
    let registry = PluginRegistry::new(runtime().clone());
    let mut rx = registry.subscribe();
    let report = registry.load_dir(dir.path());
    assert!(report.changed);
    assert!(rx.has_changed().expect("alive"));
    assert_eq!(*rx.borrow_and_update(), 1);
    let names: Vec<&str> = report.loaded.iter().map(|t| t.type_name.as_str()).collect();
    assert_eq!(names, ["pre-check", "setup"]);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // A rescan of unchanged files changes nothing.
    assert!(!registry.load_dir(dir.path()).changed);
    assert!(!rx.has_changed().expect("alive"));
}

#[test]
fn a_missing_directory_is_a_problem_not_a_crash() {
    let registry = PluginRegistry::new(runtime().clone());
    let report = registry.load_dir(Path::new("/nonexistent/plugins"));
    assert!(report.loaded.is_empty());
    assert_eq!(report.problems.len(), 1);
    assert!(
        report.problems[0]
            .message()
            .contains("/nonexistent/plugins")
    );
}

#[test]
fn load_file_names_the_file_when_it_cannot_be_read() {
    let registry = PluginRegistry::new(runtime().clone());
    let err = registry
        .load_file(Path::new("/nonexistent/x.wasm"))
        .expect_err("missing file");
    assert!(err.to_string().contains("/nonexistent/x.wasm"), "{err}");
}

#[tokio::test]
async fn a_watched_directory_is_not_scanned_again_while_nothing_in_it_changes() {
    let mut volume = ConfigMapVolume::new();
    let registry = PluginRegistry::new(runtime().clone());
    let mut rx = registry.subscribe();
    let _guard = registry.watch(volume.path()).expect("watch");
    volume.publish(&[("pre-check.wasm", &builtin("pre-check"))]);
    next_generation(&mut rx).await;
    // Quiet for ten debounce periods after the last scan. A scan opens and reads every file;
    // inotify reports those opens, and a watch that took them for changes scanned for ever.
    let mut scans = registry.scans();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = registry.scans();
        if now == scans {
            break;
        }
        assert!(
            now <= scans + 1,
            "the directory was scanned {} times in 2 s while nothing in it changed",
            now - scans
        );
        scans = now;
    }
    // Others reading the files change nothing either.
    std::fs::read(volume.path().join("pre-check.wasm")).expect("read the plugin");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(registry.scans(), scans, "a read of a plugin file rescanned");
    // A real change is still seen.
    volume.publish(&[("pre-check.wasm", &test_plugin("pre-check-v2"))]);
    next_generation(&mut rx).await;
    assert!(registry.scans() > scans);
}
