//! Test plugin: workflow type `recursive-schema`, whose params schema has two definitions that
//! refer to each other. Validating `{}` against it unbounded never ends (jsonschema follows
//! the references forever, growing memory); the operator must refuse it at load.

use std::borrow::Cow;

use workflow_plugin_sdk::prelude::*;
use workflow_plugin_sdk::schemars::{Schema, SchemaGenerator, json_schema};

/// Params whose schema is `a -> b -> a`.
#[derive(Debug, Default, Deserialize)]
#[serde(crate = "workflow_plugin_sdk::serde")]
pub struct LoopingParams {}

impl JsonSchema for LoopingParams {
    fn schema_name() -> Cow<'static, str> {
        "LoopingParams".into()
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "$defs": {
                "a": {"allOf": [{"$ref": "#/$defs/b"}]},
                "b": {"allOf": [{"$ref": "#/$defs/a"}]}
            },
            "$ref": "#/$defs/a"
        })
    }
}

/// The `recursive-schema` workflow type.
pub struct RecursiveSchema;

impl WorkflowType for RecursiveSchema {
    type Params = LoopingParams;

    fn info() -> Info {
        Info::new("recursive-schema", env!("CARGO_PKG_VERSION"))
    }

    fn template(_ctx: &Context<LoopingParams>) -> Result<Vec<Step>, Error> {
        Ok(vec![Step::new("ok", "true")])
    }
}

export_workflow_type!(RecursiveSchema);
