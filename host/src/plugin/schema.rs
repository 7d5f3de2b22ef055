//! The JSON Schema a plugin declares for its params is compiled and evaluated by the operator,
//! outside the sandbox, so it is bounded before jsonschema sees it: its size and nesting, its
//! references (only local `#...` ones, no cycles, and no web of references that would expand
//! past a fixed number of values when compiled), its regular expressions (compiled size,
//! backtracking) and nothing fetched from anywhere. Every refusal says which bound was hit.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

/// Largest params schema, in bytes.
pub(crate) const MAX_BYTES: usize = 64 << 10;
/// Deepest nesting of objects and arrays in a params schema.
pub(crate) const MAX_DEPTH: usize = 32;
/// Most `$ref`s in a params schema.
pub(crate) const MAX_REFS: usize = 256;
/// Most JSON values in a params schema once every `$ref` is replaced by what it points to:
/// what compiling and applying it costs, whatever the references do.
pub(crate) const MAX_EXPANDED_VALUES: u64 = 10_000;
/// Most regular expressions (`pattern`, `patternProperties`) once references are expanded.
pub(crate) const MAX_PATTERNS: u64 = 64;
/// Largest compiled size of one regular expression, in bytes.
const MAX_REGEX_BYTES: usize = 256 << 10;
/// Most backtracking steps of one regular expression match.
const MAX_BACKTRACK_STEPS: usize = 100_000;

/// Parses, checks and compiles a params schema. The error completes "its params schema ...".
pub(crate) fn compile(text: &str) -> Result<(Value, jsonschema::Validator), String> {
    if text.len() > MAX_BYTES {
        return Err(format!(
            "has {} bytes, at most {MAX_BYTES} are allowed",
            text.len()
        ));
    }
    // serde_json refuses nesting deeper than 128 while parsing.
    let schema: Value = serde_json::from_str(text).map_err(|e| format!("is not JSON: {e}"))?;
    check(&schema)?;
    let validator = jsonschema::options()
        .with_retriever(NothingRemote)
        .with_pattern_options(
            jsonschema::PatternOptions::fancy_regex()
                .backtrack_limit(MAX_BACKTRACK_STEPS)
                .size_limit(MAX_REGEX_BYTES)
                .dfa_size_limit(MAX_REGEX_BYTES),
        )
        .build(&schema)
        .map_err(|e| format!("is not a valid JSON Schema: {e}"))?;
    Ok((schema, validator))
}

/// Refuses every schema that is not part of the plugin's own: no file or URL is ever read.
struct NothingRemote;

impl jsonschema::Retrieve for NothingRemote {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("{} is outside the schema; nothing is fetched", uri.as_str()).into())
    }
}

/// The static bounds: depth, references, expansion and regular expressions.
pub(crate) fn check(schema: &Value) -> Result<(), String> {
    let refs = References::collect(schema)?;
    Expansion::new(&refs).measure(schema)
}

/// Every `$ref` of a schema, resolved to the value it points to.
struct References<'a> {
    /// By the address of the object holding the `$ref`.
    targets: HashMap<*const Value, (&'a str, &'a Value)>,
}

impl<'a> References<'a> {
    /// Walks `root`: checks its depth and the form of its references, and resolves them.
    fn collect(root: &'a Value) -> Result<Self, String> {
        let mut anchors: HashMap<&'a str, &'a Value> = HashMap::new();
        let mut holders: Vec<(&'a Value, &'a str)> = Vec::new();
        let mut stack: Vec<(&'a Value, usize)> = vec![(root, 1)];
        while let Some((value, depth)) = stack.pop() {
            let children: Box<dyn Iterator<Item = &'a Value>> = match value {
                Value::Object(map) => {
                    if let Some(Value::String(reference)) = map.get("$ref") {
                        if !reference.starts_with('#') {
                            return Err(format!(
                                "refers to {}: only references within the schema (`#...`) are \
                                 allowed",
                                quoted(reference)
                            ));
                        }
                        holders.push((value, reference));
                        if holders.len() > MAX_REFS {
                            return Err(format!(
                                "has more than {MAX_REFS} `$ref`s, at most {MAX_REFS} are allowed"
                            ));
                        }
                    }
                    for keyword in ["$dynamicRef", "$recursiveRef"] {
                        if map.get(keyword).is_some_and(Value::is_string) {
                            return Err(format!("uses `{keyword}`, which is not supported"));
                        }
                    }
                    if depth > 1 && map.get("$id").is_some_and(Value::is_string) {
                        return Err("sets `$id` below its top level, which is not supported".into());
                    }
                    for keyword in ["$anchor", "$dynamicAnchor"] {
                        if let Some(Value::String(name)) = map.get(keyword) {
                            anchors.insert(name, value);
                        }
                    }
                    Box::new(map.values())
                }
                Value::Array(items) => Box::new(items.iter()),
                _ => continue,
            };
            for child in children {
                if matches!(child, Value::Object(_) | Value::Array(_)) {
                    if depth + 1 > MAX_DEPTH {
                        return Err(format!(
                            "nests deeper than {MAX_DEPTH} levels, at most {MAX_DEPTH} are allowed"
                        ));
                    }
                    stack.push((child, depth + 1));
                }
            }
        }
        let mut targets = HashMap::with_capacity(holders.len());
        for (holder, reference) in holders {
            let target = resolve(root, &anchors, reference).ok_or_else(|| {
                format!(
                    "refers to {}, which is not in the schema",
                    quoted(reference)
                )
            })?;
            targets.insert(holder as *const Value, (reference, target));
        }
        Ok(Self { targets })
    }
}

/// What the local reference `#...` points to in `root`: the root, a JSON pointer or an anchor.
fn resolve<'a>(
    root: &'a Value,
    anchors: &HashMap<&'a str, &'a Value>,
    reference: &str,
) -> Option<&'a Value> {
    let fragment = percent_decode(reference.strip_prefix('#')?)?;
    if fragment.is_empty() {
        Some(root)
    } else if fragment.starts_with('/') {
        root.pointer(&fragment)
    } else {
        anchors.get(fragment.as_str()).copied()
    }
}

/// `%xx` escapes of a URI fragment decoded; `None` when they do not make UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Counts the values and regular expressions of a schema with its references expanded,
/// once per value (references form a graph; a value reached twice is counted from memory),
/// and finds reference cycles on the way.
struct Expansion<'r, 'a> {
    refs: &'r References<'a>,
    /// Finished values and their expanded (values, patterns); absent while being counted.
    done: HashMap<*const Value, (u64, u64)>,
}

/// One value being counted: what remains of its children, and the sum so far.
struct Frame<'a> {
    value: &'a Value,
    /// The `$ref` it was reached through, if any.
    via: Option<&'a str>,
    children: Vec<&'a Value>,
    next: usize,
    values: u64,
    patterns: u64,
}

impl<'r, 'a> Expansion<'r, 'a> {
    fn new(refs: &'r References<'a>) -> Self {
        Self {
            refs,
            done: HashMap::new(),
        }
    }

    fn frame(&self, value: &'a Value, via: Option<&'a str>) -> Frame<'a> {
        let mut children: Vec<&'a Value> = match value {
            Value::Object(map) => map.values().collect(),
            Value::Array(items) => items.iter().collect(),
            _ => Vec::new(),
        };
        if let Some((_, target)) = self.refs.targets.get(&(value as *const Value)) {
            children.push(target);
        }
        let patterns = match value {
            Value::Object(map) => {
                u64::from(map.get("pattern").is_some_and(Value::is_string))
                    + map
                        .get("patternProperties")
                        .and_then(Value::as_object)
                        .map_or(0, |p| p.len() as u64)
            }
            _ => 0,
        };
        Frame {
            value,
            via,
            children,
            next: 0,
            values: 1,
            patterns,
        }
    }

    /// Checks the expansion of `root` against [`MAX_EXPANDED_VALUES`] and [`MAX_PATTERNS`].
    fn measure(mut self, root: &'a Value) -> Result<(), String> {
        let mut stack: Vec<Frame<'a>> = vec![self.frame(root, None)];
        let mut on_stack: HashSet<*const Value> = HashSet::from([root as *const Value]);
        loop {
            let Some(top) = stack.last_mut() else {
                return Ok(());
            };
            let Some(&child) = top.children.get(top.next) else {
                let Some(frame) = stack.pop() else {
                    return Ok(());
                };
                let key = frame.value as *const Value;
                on_stack.remove(&key);
                self.done.insert(key, (frame.values, frame.patterns));
                if let Some(parent) = stack.last_mut() {
                    add(parent, (frame.values, frame.patterns))?;
                }
                continue;
            };
            top.next += 1;
            let key = child as *const Value;
            let reference = self
                .refs
                .targets
                .get(&(top.value as *const Value))
                .filter(|(_, target)| std::ptr::eq(*target, child))
                .map(|(reference, _)| *reference);
            if let Some(&counted) = self.done.get(&key) {
                add(top, counted)?;
            } else if on_stack.contains(&key) {
                let reference = reference
                    .or_else(|| stack.iter().rev().find_map(|frame| frame.via))
                    .unwrap_or("#");
                return Err(format!(
                    "is recursive: `$ref` {} leads back to where it is; recursive schemas are \
                     not supported",
                    quoted(reference)
                ));
            } else {
                on_stack.insert(key);
                let frame = self.frame(child, reference);
                stack.push(frame);
            }
        }
    }
}

/// Adds a child's counts to `parent`, refusing once a bound is passed.
fn add(parent: &mut Frame<'_>, (values, patterns): (u64, u64)) -> Result<(), String> {
    parent.values = parent.values.saturating_add(values);
    parent.patterns = parent.patterns.saturating_add(patterns);
    if parent.values > MAX_EXPANDED_VALUES {
        return Err(format!(
            "expands to more than {MAX_EXPANDED_VALUES} values when its `$ref`s are followed \
             (references that multiply, such as `allOf` of two `$ref`s to the next level at \
             every level?)"
        ));
    }
    if parent.patterns > MAX_PATTERNS {
        return Err(format!(
            "has more than {MAX_PATTERNS} regular expressions when its `$ref`s are followed"
        ));
    }
    Ok(())
}

/// A plugin-supplied string for a message: quoted, escaped and cut short.
fn quoted(s: &str) -> String {
    let cut: String = s.chars().take(80).collect();
    if cut.len() < s.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::*;

    fn refused(schema: Value) -> String {
        match compile(&schema.to_string()) {
            Ok(_) => panic!("accepted: {schema}"),
            Err(reason) => reason,
        }
    }

    /// `$defs` `d0` .. `d{levels}`, each an `allOf` of two `$ref`s to the next: 2^levels paths.
    fn doubling(levels: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..levels {
            let next = json!({"$ref": format!("#/$defs/d{}", i + 1)});
            defs.insert(format!("d{i}"), json!({"allOf": [next.clone(), next]}));
        }
        defs.insert(format!("d{levels}"), json!({"type": "object"}));
        json!({"$defs": defs, "$ref": "#/$defs/d0"})
    }

    #[test]
    fn a_schema_as_the_sdk_writes_it_compiles() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "AtParams",
            "type": "object",
            "properties": {
                "schedule": {"type": "string", "pattern": "^[0-9]{4}-"},
                "mode": {"$ref": "#/$defs/Mode"},
                "retries": {"type": ["integer", "null"], "minimum": 0}
            },
            "required": ["schedule"],
            "$defs": {"Mode": {"oneOf": [{"const": "a"}, {"const": "b"}]}}
        });
        let (_, validator) = compile(&schema.to_string()).expect("compiles");
        assert!(validator.is_valid(&json!({"schedule": "2026-01-30", "mode": "a"})));
        assert!(!validator.is_valid(&json!({"schedule": "2026-01-30", "mode": "c"})));
    }

    #[test]
    fn mutually_recursive_refs_are_refused_as_recursive() {
        let reason = refused(json!({
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "$ref": "#/$defs/a"
        }));
        assert!(
            reason.starts_with("is recursive: `$ref` \"#/$defs/"),
            "{reason}"
        );
        let reason = refused(json!({"properties": {"child": {"$ref": "#"}}}));
        assert!(reason.contains("\"#\""), "{reason}");
    }

    #[test]
    fn refs_that_double_at_every_level_are_refused_quickly() {
        // 2^64 paths: expanding it would never end; measuring it visits each value once.
        let started = Instant::now();
        let reason = refused(doubling(64));
        assert!(
            reason.starts_with(&format!(
                "expands to more than {MAX_EXPANDED_VALUES} values"
            )),
            "{reason}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "took {:?}",
            started.elapsed()
        );
        // A few levels of the same shape are fine.
        compile(&doubling(4).to_string()).expect("16 paths compile");
    }

    #[test]
    fn the_largest_expansion_allowed_compiles_and_validates_quickly() {
        // Near the bound (about 6 000 values): 2^8 paths, counted under `$defs` and from the root.
        let schema = doubling(8);
        check(&schema).expect("within the bound");
        let started = Instant::now();
        let (_, validator) = compile(&schema.to_string()).expect("compiles");
        for _ in 0..10 {
            assert!(validator.is_valid(&json!({})));
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn remote_and_file_refs_are_refused_naming_them() {
        for reference in [
            "https://example.com/schema.json",
            "file:///etc/passwd",
            "other.json#/a",
        ] {
            let reason = refused(json!({"$ref": reference}));
            assert!(
                reason.contains(reference) && reason.contains("only references within the schema"),
                "{reason}"
            );
        }
        let reason = refused(json!({"$ref": "#/$defs/missing"}));
        assert!(reason.contains("which is not in the schema"), "{reason}");
    }

    #[test]
    fn a_remote_meta_schema_is_not_fetched() {
        let reason = refused(json!({"$schema": "https://example.com/my-meta-schema"}));
        assert!(reason.starts_with("is not a valid JSON Schema"), "{reason}");
    }

    #[test]
    fn size_depth_and_ref_count_are_bounded() {
        let big = json!({"description": "x".repeat(MAX_BYTES)});
        assert!(refused(big).starts_with("has "), "size");
        let mut deep = json!({"type": "object"});
        for _ in 0..MAX_DEPTH {
            deep = json!({"properties": {"a": deep}});
        }
        let reason = refused(deep);
        assert!(
            reason.starts_with("nests deeper than 32 levels"),
            "{reason}"
        );
        let refs: Vec<Value> = (0..=MAX_REFS)
            .map(|_| json!({"$ref": "#/$defs/a"}))
            .collect();
        let reason = refused(json!({"$defs": {"a": {}}, "anyOf": refs}));
        assert!(reason.starts_with("has more than 256 `$ref`s"), "{reason}");
        let reason = refused(json!({"$defs": {"a": {"$dynamicRef": "#meta"}}}));
        assert!(reason.contains("`$dynamicRef`"), "{reason}");
    }

    #[test]
    fn regular_expressions_are_bounded() {
        let patterns: Vec<Value> = (0..=MAX_PATTERNS)
            .map(|i| json!({"pattern": format!("^a{i}$")}))
            .collect();
        let reason = refused(json!({"anyOf": patterns}));
        assert!(reason.contains("regular expressions"), "{reason}");
        // A pattern that backtracks exponentially stops at the backtracking bound.
        let (_, validator) =
            compile(&json!({"type": "string", "pattern": "^(a|a)*(?=b)$"}).to_string())
                .expect("compiles");
        let started = Instant::now();
        assert!(!validator.is_valid(&json!("a".repeat(64))));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn refs_through_anchors_and_escaped_pointers_resolve() {
        let schema = json!({
            "$defs": {"a/b": {"$anchor": "thing", "type": "string"}},
            "properties": {"x": {"$ref": "#thing"}, "y": {"$ref": "#/$defs/a~1b"}}
        });
        let (_, validator) = compile(&schema.to_string()).expect("compiles");
        assert!(!validator.is_valid(&json!({"x": 1})));
        assert!(!validator.is_valid(&json!({"y": 1})));
    }
}
