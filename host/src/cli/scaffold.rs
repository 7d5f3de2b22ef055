//! `workflow-operator plugin new NAME`: a new workflow-type plugin crate, ready to build, as
//! `kwctl scaffold` and `spin new` make one.
//!
//! The crate depends on `workflow-plugin-sdk`, which is not on crates.io: by path (a
//! checkout of this repository) or by git. Without `--sdk-path` or `--sdk-git` the SDK is
//! looked for in a checkout around the current directory, then around the running binary
//! (`cargo run` or `target/debug/workflow-operator` in a checkout). A path baked in at compile
//! time would point at the build machine, not at the user's disk, so none is.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};

mod languages;

pub use languages::{COMPONENTIZE_JS, COMPONENTIZE_PY, Lang, ROLLDOWN};

/// Arguments of `plugin new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The workflow type's name, as groups list it in `workflowSteps` (a DNS label:
    /// lowercase letters, digits and '-', at most 63 characters).
    pub name: String,
    /// The language: a Rust crate on the SDK (the default), or a Python (componentize-py) or
    /// JavaScript (ComponentizeJS) project carrying the contract and the SDK's conveniences.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    pub lang: Lang,
    /// Directory to create the crate in (default: ./NAME). It must not exist or be empty.
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Depend on the SDK at this directory (`plugin-sdk/` of a workflow-operator checkout, or
    /// the checkout itself). Default: the checkout the current directory or this binary is in.
    #[arg(long, env = "WORKFLOW_PLUGIN_SDK_PATH", conflicts_with = "sdk_git")]
    pub sdk_path: Option<PathBuf>,
    /// Depend on the SDK from this git repository (workflow-operator's) instead of a path.
    #[arg(long)]
    pub sdk_git: Option<String>,
    /// With --sdk-git: the commit, tag or branch to use (default: the default branch).
    #[arg(long, requires = "sdk_git")]
    pub sdk_rev: Option<String>,
}

/// Where the new crate gets the SDK from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdkSource {
    /// A directory holding the SDK's `Cargo.toml`.
    Path(PathBuf),
    /// A git repository, at a revision or its default branch.
    Git { url: String, rev: Option<String> },
}

impl SdkSource {
    /// The `[dependencies]` line of the new crate's `Cargo.toml`.
    fn dependency(&self) -> anyhow::Result<String> {
        Ok(match self {
            SdkSource::Path(path) => {
                let path = path
                    .to_str()
                    .ok_or_else(|| anyhow!("the SDK path {} is not valid UTF-8", path.display()))?;
                format!("workflow-plugin-sdk = {{ path = {} }}", toml_string(path))
            }
            SdkSource::Git { url, rev: None } => {
                format!("workflow-plugin-sdk = {{ git = {} }}", toml_string(url))
            }
            SdkSource::Git {
                url,
                rev: Some(rev),
            } => format!(
                "workflow-plugin-sdk = {{ git = {}, rev = {} }}",
                toml_string(url),
                toml_string(rev)
            ),
        })
    }

    fn describe(&self) -> String {
        match self {
            SdkSource::Path(path) => format!("path {}", path.display()),
            SdkSource::Git { url, rev: None } => format!("git {url}"),
            SdkSource::Git {
                url,
                rev: Some(rev),
            } => format!("git {url} at {rev}"),
        }
    }
}

/// The crate `plugin new` writes: its files, relative paths and contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scaffold {
    /// The Cargo package name (the type name; prefixed when it starts with a digit, which a
    /// package name may not).
    pub crate_name: String,
    /// The plugin file `cargo build --profile plugin --target wasm32-wasip2` writes, relative
    /// to the crate.
    pub wasm: String,
    /// (relative path, contents).
    pub files: Vec<(&'static str, String)>,
}

/// The files of a new plugin crate for workflow type `name`, depending on the SDK at `sdk`.
///
/// # Errors
/// `name` is not a DNS label, or the SDK path is not UTF-8.
pub fn scaffold(name: &str, sdk: &SdkSource) -> anyhow::Result<Scaffold> {
    check_name(name)?;
    let crate_name = if name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("plugin-{name}")
    } else {
        name.to_string()
    };
    let wasm = format!(
        "target/wasm32-wasip2/plugin/{}.wasm",
        crate_name.replace('-', "_")
    );
    let sdk_note = match sdk {
        SdkSource::Path(_) => "a workflow-operator checkout; or `git = \"<url>\"`",
        SdkSource::Git { .. } => {
            "workflow-operator's repository; or `path = \"<checkout>/plugin-sdk\"`"
        }
    };
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{crate}}", &crate_name)
            .replace("{{type_ident}}", &type_ident(name))
            .replace("{{wasm}}", &wasm)
            .replace("{{sdk_note}}", sdk_note)
    };
    let cargo_toml = fill(include_str!("scaffold/Cargo.toml.in"))
        .replace("{{sdk_dependency}}", &sdk.dependency()?);
    Ok(Scaffold {
        files: vec![
            ("Cargo.toml", cargo_toml),
            (
                ".cargo/config.toml",
                include_str!("scaffold/cargo-config.toml").to_string(),
            ),
            ("src/lib.rs", fill(include_str!("scaffold/lib.rs.in"))),
            ("group.yaml", fill(include_str!("scaffold/group.yaml.in"))),
            ("README.md", fill(include_str!("scaffold/README.md.in"))),
            (".gitignore", include_str!("scaffold/gitignore").to_string()),
        ],
        crate_name,
        wasm,
    })
}

/// Runs `plugin new`: writes the crate and prints what to do next.
///
/// # Errors
/// The name is not a DNS label, the target directory is not empty, no SDK was found, or a
/// file could not be written.
pub fn run(args: &NewArgs) -> anyhow::Result<()> {
    let dir = args
        .path
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    // The name first: a bad name is the first mistake to hear about.
    check_name(&args.name)?;
    ensure_empty(&dir)?;
    if args.lang != Lang::Rust {
        let project = languages::scaffold(&args.name, args.lang);
        write_files(&dir, &project)?;
        println!(
            "created workflow type {} in {} ({:?})",
            args.name,
            dir.display(),
            args.lang
        );
        println!("next:");
        println!("  cd {}", dir.display());
        for step in languages::next_steps(args.lang, &project.wasm) {
            println!("  {step}");
        }
        return Ok(());
    }
    let sdk = sdk_source(args)?;
    let crate_files = scaffold(&args.name, &sdk)?;
    write_files(&dir, &crate_files)?;
    println!(
        "created workflow type {} in {} (SDK: {})",
        args.name,
        dir.display(),
        sdk.describe()
    );
    println!("next:");
    println!("  cd {}", dir.display());
    println!("  cargo test");
    println!("  cargo build --profile plugin --target wasm32-wasip2");
    println!(
        "  workflow-operator plugin render {} --group group.yaml",
        crate_files.wasm
    );
    Ok(())
}

/// Writes the files of `project` under `dir`.
fn write_files(dir: &Path, project: &Scaffold) -> anyhow::Result<()> {
    for (relative, contents) in &project.files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, contents)
            .with_context(|| format!("cannot write {}", path.display()))?;
        #[cfg(unix)]
        if relative.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", path.display()))?;
        }
    }
    Ok(())
}

/// Refuses a type name that is not a DNS label.
fn check_name(name: &str) -> anyhow::Result<()> {
    workflow_model::words::dns_label("NAME", name).map_err(|refused| {
        anyhow!(
            "{} is not a valid workflow type name: {} (a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)",
            workflow_model::text::printable(&format!("{:?}", refused.word), 80),
            refused.rule
        )
    })
}

/// Refuses a target that exists and is not an empty directory.
fn ensure_empty(dir: &Path) -> anyhow::Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!(
                    "{} is not empty: choose a new directory with --path",
                    dir.display()
                );
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if dir.exists() && !dir.is_dir() => {
            bail!("{} exists and is not a directory ({e})", dir.display())
        }
        Err(e) => bail!("cannot read {}: {e}", dir.display()),
    }
}

/// The SDK the new crate depends on: as given, else found in a checkout.
fn sdk_source(args: &NewArgs) -> anyhow::Result<SdkSource> {
    if let Some(url) = &args.sdk_git {
        return Ok(SdkSource::Git {
            url: url.clone(),
            rev: args.sdk_rev.clone(),
        });
    }
    if let Some(path) = &args.sdk_path {
        return sdk_dir(path)
            .map(SdkSource::Path)
            .ok_or_else(|| {
                anyhow!(
                    "{} holds no workflow-plugin-sdk: give the SDK's directory (plugin-sdk/ of a workflow-operator checkout) or the checkout",
                    path.display()
                )
            });
    }
    let mut starts = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        starts.push(cwd);
    }
    if let Ok(exe) = std::env::current_exe() {
        starts.push(exe);
    }
    starts
        .iter()
        .flat_map(|start| start.ancestors())
        .find_map(sdk_dir)
        .map(SdkSource::Path)
        .ok_or_else(|| {
            anyhow!(
                "cannot find workflow-plugin-sdk: pass --sdk-path <checkout>/plugin-sdk or --sdk-git <repository url>, or run this inside a workflow-operator checkout"
            )
        })
}

/// `dir` or `dir/plugin-sdk`, absolute, when it holds the SDK's `Cargo.toml`.
fn sdk_dir(dir: &Path) -> Option<PathBuf> {
    [dir.to_path_buf(), dir.join("plugin-sdk")]
        .into_iter()
        .find(|candidate| is_sdk(candidate))
        .and_then(|sdk| std::fs::canonicalize(sdk).ok())
}

fn is_sdk(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml")).is_ok_and(|manifest| {
        manifest
            .lines()
            .any(|l| l.replace(' ', "") == "name=\"workflow-plugin-sdk\"")
    })
}

/// `disk-check` -> `DiskCheck`; a leading digit gets a `Type` prefix.
fn type_ident(name: &str) -> String {
    let camel: String = name
        .split('-')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    if camel.starts_with(|c: char| c.is_ascii_digit()) {
        format!("Type{camel}")
    } else {
        camel
    }
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file<'a>(scaffold: &'a Scaffold, path: &str) -> &'a str {
        scaffold
            .files
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, contents)| contents.as_str())
            .unwrap_or_default()
    }

    #[test]
    fn names_that_are_not_dns_labels_are_refused() {
        let sdk = SdkSource::Path("/sdk".into());
        for bad in ["", "Disk", "disk_check", "-disk", "disk-", &"d".repeat(64)] {
            let error = scaffold(bad, &sdk).err().map(|e| e.to_string());
            assert!(
                error
                    .as_deref()
                    .is_some_and(|e| e.contains("not a valid workflow type name")),
                "{bad:?}: {error:?}"
            );
        }
    }

    #[test]
    fn the_crate_depends_on_the_sdk_as_asked() {
        let by_path = scaffold(
            "disk-check",
            &SdkSource::Path("/src/wo \"x\"/plugin-sdk".into()),
        )
        .unwrap();
        assert!(
            file(&by_path, "Cargo.toml")
                .contains(r#"workflow-plugin-sdk = { path = "/src/wo \"x\"/plugin-sdk" }"#),
            "{}",
            file(&by_path, "Cargo.toml")
        );
        let by_git = SdkSource::Git {
            url: "https://example.com/workflow-operator.git".into(),
            rev: Some("v0.1.0".into()),
        };
        let by_git = scaffold("disk-check", &by_git).unwrap();
        assert!(file(&by_git, "Cargo.toml").contains(
            r#"workflow-plugin-sdk = { git = "https://example.com/workflow-operator.git", rev = "v0.1.0" }"#
        ));
    }

    #[test]
    fn the_crate_has_the_stack_flag_the_type_name_and_no_placeholders_left() {
        let s = scaffold("disk-check", &SdkSource::Path("/sdk".into())).unwrap();
        assert_eq!(s.crate_name, "disk-check");
        assert_eq!(s.wasm, "target/wasm32-wasip2/plugin/disk_check.wasm");
        assert!(file(&s, ".cargo/config.toml").contains("link-arg=-zstack-size=65536"));
        assert!(file(&s, "src/lib.rs").contains("Info::new(\"disk-check\""));
        assert!(file(&s, "src/lib.rs").contains("impl WorkflowType for DiskCheck"));
        for (path, contents) in &s.files {
            assert!(!contents.contains("{{"), "{path} keeps a placeholder");
        }
    }

    #[test]
    fn a_name_starting_with_a_digit_gets_a_valid_crate_name_and_type() {
        let s = scaffold("7zip", &SdkSource::Path("/sdk".into())).unwrap();
        assert_eq!(s.crate_name, "plugin-7zip");
        assert!(file(&s, "src/lib.rs").contains("impl WorkflowType for Type7zip"));
        assert!(file(&s, "src/lib.rs").contains("Info::new(\"7zip\""));
    }

    #[test]
    fn a_non_empty_directory_is_refused_and_an_empty_one_is_used() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ensure_empty(dir.path()).is_ok());
        assert!(ensure_empty(&dir.path().join("new")).is_ok());
        std::fs::write(dir.path().join("x"), "x").unwrap();
        let error = ensure_empty(dir.path()).unwrap_err().to_string();
        assert!(error.contains("is not empty"), "{error}");
    }

    #[test]
    fn the_sdk_is_found_in_a_checkout_or_its_plugin_sdk_directory() {
        let checkout = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let sdk = checkout.join("plugin-sdk").canonicalize().unwrap();
        assert_eq!(sdk_dir(&checkout), Some(sdk.clone()));
        assert_eq!(sdk_dir(&sdk), Some(sdk));
        assert_eq!(sdk_dir(&checkout.join("host")), None);
    }
}
