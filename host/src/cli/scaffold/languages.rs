//! `plugin new --lang python|js`: a workflow type in Python (componentize-py) or JavaScript
//! (ComponentizeJS), with the contract's WIT and the SDK's conveniences in the language's
//! idiom copied in, so that the project builds on its own.

use super::Scaffold;

/// The componentize-py a Python project builds with (`pip install componentize-py==...`).
pub const COMPONENTIZE_PY: &str = "0.25.1";
/// The ComponentizeJS and the bundler a JavaScript project builds with (its `package.json`).
pub const COMPONENTIZE_JS: &str = "0.23.0";
pub const ROLLDOWN: &str = "1.3.4";

/// The contract, as `plugin-sdk/wit` publishes it.
const WIT: &str = include_str!("../../../../plugin-sdk/wit/workflow-plugin.wit");
const PYTHON_SDK: &str = include_str!("../../../../plugin-sdk/python/workflow_plugin.py");
const JS_SDK: &str = include_str!("../../../../plugin-sdk/js/workflow-plugin.js");

/// A language other than Rust that a workflow type can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// The files of a new `lang` project for workflow type `name` (checked already).
pub fn scaffold(name: &str, lang: Lang) -> Scaffold {
    let wasm = format!("{name}.wasm");
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{wasm}}", &wasm)
            .replace("{{componentize_py}}", COMPONENTIZE_PY)
            .replace("{{componentize_js}}", COMPONENTIZE_JS)
            .replace("{{rolldown}}", ROLLDOWN)
    };
    let group = fill(include_str!("group.yaml.in"));
    let mut files = vec![
        ("wit/workflow-plugin.wit", WIT.to_string()),
        ("group.yaml", group),
    ];
    match lang {
        Lang::Python => files.extend([
            ("app.py", fill(include_str!("python/app.py.in"))),
            ("workflow_plugin.py", PYTHON_SDK.to_string()),
            ("build.sh", fill(include_str!("python/build.sh.in"))),
            ("README.md", fill(include_str!("python/README.md.in"))),
            (".gitignore", include_str!("python/gitignore").to_string()),
        ]),
        Lang::Js => files.extend([
            ("app.js", fill(include_str!("js/app.js.in"))),
            ("workflow-plugin.js", JS_SDK.to_string()),
            ("build.mjs", fill(include_str!("js/build.mjs.in"))),
            ("package.json", fill(include_str!("js/package.json.in"))),
            ("README.md", fill(include_str!("js/README.md.in"))),
            (".gitignore", include_str!("js/gitignore").to_string()),
        ]),
        Lang::Rust => unreachable!("a Rust crate is scaffold::scaffold's"),
    }
    Scaffold {
        crate_name: name.to_string(),
        wasm,
        files,
    }
}

/// The commands that build and try a new `lang` project.
pub fn next_steps(lang: Lang, wasm: &str) -> Vec<String> {
    let build = match lang {
        Lang::Python => vec![
            format!(
                "python3 -m venv .venv && .venv/bin/pip install componentize-py=={COMPONENTIZE_PY}"
            ),
            "PATH=.venv/bin:$PATH ./build.sh".to_string(),
        ],
        Lang::Js => vec!["npm install && npm run build".to_string()],
        Lang::Rust => Vec::new(),
    };
    build
        .into_iter()
        .chain([format!(
            "workflow-operator plugin render {wasm} --group group.yaml"
        )])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_or_js_project_carries_the_contract_the_sdk_and_a_build_for_its_type() {
        for (lang, app, sdk, build) in [
            (Lang::Python, "app.py", "workflow_plugin.py", "build.sh"),
            (Lang::Js, "app.js", "workflow-plugin.js", "build.mjs"),
        ] {
            let s = scaffold("disk-check", lang);
            let file = |name: &str| {
                s.files
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, c)| c.as_str())
                    .unwrap_or_else(|| panic!("{lang:?}: no {name}"))
            };
            assert_eq!(s.wasm, "disk-check.wasm");
            assert!(file("wit/workflow-plugin.wit").contains("package workflow:plugin@0.3.0;"));
            assert!(
                file(app).contains("\"disk-check\"") || file(app).contains("'disk-check'"),
                "{lang:?}"
            );
            assert!(file(sdk).contains("WORKFLOW_SSH_COMMAND"), "{lang:?}");
            assert!(file(build).contains("disk-check.wasm"), "{lang:?}");
            assert!(file("group.yaml").contains("- disk-check"), "{lang:?}");
            assert!(
                s.files.iter().all(|(_, c)| !c.contains("{{")),
                "{lang:?}: a placeholder is left"
            );
        }
        let js = scaffold("x", Lang::Js);
        let package = &js
            .files
            .iter()
            .find(|(n, _)| *n == "package.json")
            .unwrap()
            .1;
        let package: serde_json::Value =
            serde_json::from_str(package).expect("package.json is JSON");
        assert_eq!(
            package["devDependencies"]["@bytecodealliance/componentize-js"],
            COMPONENTIZE_JS
        );
    }
}
