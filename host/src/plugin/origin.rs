//! Where a plugin file comes from.

use std::fmt;
use std::path::PathBuf;

use serde::{Serialize, Serializer};

/// Where a plugin file comes from: a file of a directory, or an entry of a ConfigMap.
///
/// Shown (and serialized) as the file's path, or as `configmap/<namespace>/<name>/<key>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// A file on disk.
    File(PathBuf),
    /// The entry `key` of the ConfigMap `namespace/name`.
    ConfigMap {
        namespace: String,
        name: String,
        key: String,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::ConfigMap {
                namespace,
                name,
                key,
            } => write!(f, "configmap/{namespace}/{name}/{key}"),
        }
    }
}

impl Serialize for Origin {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl From<PathBuf> for Origin {
    fn from(path: PathBuf) -> Self {
        Origin::File(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reads_as_its_path_and_a_configmap_entry_as_configmap_namespace_name_key() {
        let file = Origin::File(PathBuf::from("/etc/plugins/at.wasm"));
        let entry = Origin::ConfigMap {
            namespace: "ops".into(),
            name: "at".into(),
            key: "at.wasm".into(),
        };
        assert_eq!(file.to_string(), "/etc/plugins/at.wasm");
        assert_eq!(entry.to_string(), "configmap/ops/at/at.wasm");
        assert_eq!(
            serde_json::to_value([&file, &entry]).expect("serialize"),
            serde_json::json!(["/etc/plugins/at.wasm", "configmap/ops/at/at.wasm"])
        );
    }
}
