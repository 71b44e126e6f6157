//! `volley init`: a commented starter scenario, or one built from an
//! OpenRPC document (the JSON-RPC world's OpenAPI).

mod capture;
mod node;

pub use capture::{from_capture, FromCapture};
pub use node::{harvest, scenario as from_node, Harvest};

use std::fmt::Write;

use serde::Deserialize;
use serde_json::Value;

/// The starter scenario, every key commented.
pub const STARTER: &str = r#"# A volley scenario. Check it with `volley validate FILE`, run it with `volley run FILE`.

name = "my-scenario"
# A URL, or "builtin" for volley's own server on a free loopback port.
target = "builtin"
# A call not answered within this time counts as a `timeout`.
timeout = "10s"
# Seeds every random choice, so a run can be repeated.
seed = 1

[headers]
# Values may read the environment; keys never belong in the file itself.
# Authorization = "Bearer ${RPC_TOKEN}"

[load]
# Closed model: this many calls in flight. For the open model use `rate = 500`.
concurrency = 16
duration = "30s"
# Sent first, left out of the figures.
warmup = "2s"
# Or ramp: stages = [{ duration = "30s", rate = 100 }, { duration = "1m", rate = 1000 }]

[[calls]]
method = "eth_blockNumber"
weight = 3
# Checks every answer: a hex quantity.
expect = { type = "string", regex = "^0x[0-9a-f]+$" }

[[calls]]
method = "eth_getBalance"
weight = 2
# ${...} generates a value per call: hex(20) is a random 20-byte address.
params = ["${hex(20)}", "latest"]

[[calls]]
# A negative test: an unknown method must answer -32601.
method = "no_such_method"
weight = 1
expect = { error = -32601 }
"#;

/// The target written when neither the command line nor the document's
/// `servers` names one.
pub const DEFAULT_TARGET: &str = "http://127.0.0.1:8545";

/// How many `$ref`s may lead to one another before the chain is taken for
/// a loop.
const MAX_REF_HOPS: usize = 32;

#[derive(Deserialize)]
struct Method {
    name: String,
    #[serde(default)]
    summary: Option<String>,
    /// Content descriptors, or `$ref`s to them.
    #[serde(default)]
    params: Vec<Value>,
    #[serde(default, rename = "paramStructure")]
    param_structure: Option<String>,
    /// Example pairings, or `$ref`s to them.
    #[serde(default)]
    examples: Vec<Value>,
}

#[derive(Deserialize)]
struct Param {
    name: String,
    #[serde(default)]
    required: bool,
}

#[derive(Deserialize)]
struct Pairing {
    /// Example objects, or `$ref`s to them.
    #[serde(default)]
    params: Vec<Value>,
}

#[derive(Deserialize)]
struct ExampleParam {
    name: String,
    /// Absent when the example gives an `externalValue` instead.
    value: Option<Value>,
}

/// A scenario with one call per method of an OpenRPC document, its params
/// taken from the method's first example where it has one, aimed at
/// `target`.
pub fn from_openrpc(document: &str, target: &str) -> Result<String, String> {
    from_openrpc_with(document, Some(target))
}

/// As [`from_openrpc`], with the target given on the command line if any;
/// without one, the document's `servers[0].url` (its variables at their
/// defaults), else [`DEFAULT_TARGET`].
pub fn from_openrpc_with(document: &str, target: Option<&str>) -> Result<String, String> {
    let root: Value = serde_json::from_str(document).map_err(|e| format!("not an OpenRPC document: {e}"))?;
    let methods = root
        .get("methods")
        .and_then(Value::as_array)
        .ok_or("not an OpenRPC document: it has no `methods` list")?;
    if methods.is_empty() {
        return Err("the OpenRPC document lists no methods".into());
    }
    // The title goes into a comment line: only its first line fits.
    let title = match root.pointer("/info/title").and_then(Value::as_str) {
        Some(title) if !title.trim().is_empty() => title.lines().next().unwrap_or(title),
        _ => "OpenRPC API",
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Built by `volley init --from-openrpc` from \"{title}\": one call per method."
    );
    let _ = writeln!(
        out,
        "# Adjust weights to your traffic and fill in params where no example was given.\n"
    );
    let _ = writeln!(out, "name = {}", toml_string(&slug(title)));
    match (target, server_url(&root)) {
        (Some(target), _) => {
            let _ = writeln!(out, "target = {}", toml_string(target));
        }
        (None, Some(url)) => {
            let _ = writeln!(
                out,
                "target = {}   # the document's servers[0]",
                toml_string(&url)
            );
        }
        (None, None) => {
            let _ = writeln!(out, "target = {}", toml_string(DEFAULT_TARGET));
        }
    }
    let _ = writeln!(
        out,
        "timeout = \"10s\"\n\n[load]\nconcurrency = 16\nduration = \"30s\""
    );
    for (index, method) in methods.iter().enumerate() {
        let method: Method = resolve(&root, method)
            .and_then(|m| serde_json::from_value(m.clone()).map_err(|e| e.to_string()))
            .map_err(|e| format!("methods[{index}]: {e}"))?;
        write_call(&mut out, &root, &method);
    }
    Ok(out)
}

/// One `[[calls]]` entry: the method, and its first example's params or,
/// failing that, a comment saying what they would be.
fn write_call(out: &mut String, root: &Value, method: &Method) {
    let _ = writeln!(out, "\n[[calls]]");
    if let Some(summary) = &method.summary {
        let _ = writeln!(out, "# {}", summary.lines().next().unwrap_or(""));
    }
    let _ = writeln!(out, "method = {}\nweight = 1", toml_string(&method.name));
    let params = match example_params(root, method) {
        Ok(Some(params)) => params,
        Ok(None) => {
            if let Ok(params) = declared_params(root, method) {
                if !params.is_empty() {
                    let names: Vec<String> = params
                        .iter()
                        .map(|p| format!("{}{}", p.name, if p.required { "" } else { "?" }))
                        .collect();
                    let _ = writeln!(out, "# no example in the document; params: {}", names.join(", "));
                }
            }
            return;
        }
        Err(why) => {
            let _ = writeln!(out, "# the first example was not used: {why}");
            return;
        }
    };
    match toml::Value::try_from(&params) {
        Ok(value) => {
            let _ = writeln!(out, "params = {value}");
        }
        Err(_) => {
            let _ = writeln!(
                out,
                "# the example's params hold a null, which TOML cannot write: {params}"
            );
        }
    }
}

/// The method's content descriptors, `$ref`s followed.
fn declared_params(root: &Value, method: &Method) -> Result<Vec<Param>, String> {
    method
        .params
        .iter()
        .map(|p| {
            let param = resolve(root, p)?;
            serde_json::from_value(param.clone()).map_err(|e| format!("a param: {e}"))
        })
        .collect()
}

/// The params of the method's first example, by position or by name as
/// the method says, every string escaped so that it is sent as written;
/// `None` when the method has no example with params.
fn example_params(root: &Value, method: &Method) -> Result<Option<Value>, String> {
    let Some(pairing) = method.examples.first() else {
        return Ok(None);
    };
    let pairing: Pairing =
        serde_json::from_value(resolve(root, pairing)?.clone()).map_err(|e| format!("its example: {e}"))?;
    if pairing.params.is_empty() {
        return Ok(None);
    }
    let mut values = Vec::with_capacity(pairing.params.len());
    for example in &pairing.params {
        let example: ExampleParam = serde_json::from_value(resolve(root, example)?.clone())
            .map_err(|e| format!("an example param: {e}"))?;
        let value = example.value.ok_or_else(|| {
            format!(
                "param `{}` has no `value` (an externalValue is not fetched)",
                example.name
            )
        })?;
        values.push((example.name, escape_templates(value)));
    }
    if method.param_structure.as_deref() != Some("by-name") {
        return Ok(Some(Value::Array(values.into_iter().map(|(_, v)| v).collect())));
    }
    // By name, the key is the method's param at the same position (an
    // example shared through components may carry a name of its own).
    let declared = declared_params(root, method).unwrap_or_default();
    let fields = values
        .into_iter()
        .enumerate()
        .map(|(i, (name, value))| (declared.get(i).map_or(name, |p| p.name.clone()), value));
    Ok(Some(Value::Object(fields.collect())))
}

/// Follows `value`'s `$ref` (and the `$ref`s it leads to) within the
/// document; a value without one is itself.
fn resolve<'a>(root: &'a Value, mut value: &'a Value) -> Result<&'a Value, String> {
    for _ in 0..MAX_REF_HOPS {
        let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
            return Ok(value);
        };
        let pointer = reference.strip_prefix('#').ok_or_else(|| {
            format!("$ref \"{reference}\" points outside the document, which is not followed")
        })?;
        value = root
            .pointer(pointer)
            .ok_or_else(|| format!("$ref \"{reference}\" names nothing in the document"))?;
    }
    Err(format!(
        "$refs lead to one another more than {MAX_REF_HOPS} times (a loop?)"
    ))
}

/// In a scenario's params `${` starts a generated value; an example's
/// text is literal, so each `${` in it is written as the escape `$${`.
fn escape_templates(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(text.replace("${", "$${")),
        Value::Array(items) => Value::Array(items.into_iter().map(escape_templates).collect()),
        // Keys are sent as written: only values are templates.
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| (key, escape_templates(value)))
                .collect(),
        ),
        other => other,
    }
}

/// The first server's URL, its `{variables}` at their defaults.
fn server_url(root: &Value) -> Option<String> {
    let server = root.pointer("/servers/0")?;
    let mut url = server.get("url")?.as_str()?.to_string();
    if let Some(variables) = server.get("variables").and_then(Value::as_object) {
        for (name, variable) in variables {
            if let Some(default) = variable.get("default").and_then(Value::as_str) {
                url = url.replace(&format!("{{{name}}}"), default);
            }
        }
    }
    Some(url).filter(|url| !url.is_empty())
}

fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

fn slug(title: &str) -> String {
    let slug: String = title
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    slug.split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    #[test]
    fn the_starter_is_a_valid_scenario() {
        let scenario = Scenario::parse(STARTER, "starter.toml", "starter", &|_| None).unwrap();
        assert_eq!(scenario.calls.len(), 3);
    }

    #[test]
    fn openrpc_methods_become_calls_with_example_params() {
        let document = r#"{
            "openrpc": "1.2.6",
            "info": {"title": "Petstore JSON-RPC", "version": "1"},
            "methods": [
                {"name": "list_pets", "params": [{"name": "limit", "required": false}],
                 "examples": [{"name": "ten", "params": [{"name": "limit", "value": 10}], "result": {"name": "r", "value": []}}]},
                {"name": "get_pet", "paramStructure": "by-name", "params": [{"name": "id", "required": true}],
                 "examples": [{"name": "one", "params": [{"name": "id", "value": "p-1"}]}]},
                {"name": "create_pet", "params": [{"name": "pet", "required": true}]},
                {"name": "ping", "params": []}
            ]
        }"#;
        let text = from_openrpc(document, "http://127.0.0.1:8545").unwrap();
        let scenario = Scenario::parse(&text, "gen.toml", "gen", &|_| None).unwrap();
        assert_eq!(scenario.name, "petstore-json-rpc");
        let methods: Vec<&str> = scenario.calls.iter().map(|c| c.method.as_str()).collect();
        assert_eq!(methods, ["list_pets", "get_pet", "create_pet", "ping"]);
        assert_eq!(scenario.calls[0].params, Some(serde_json::json!([10])));
        assert_eq!(scenario.calls[1].params, Some(serde_json::json!({"id": "p-1"})));
        assert_eq!(scenario.calls[2].params, None);
        assert!(text.contains("# no example in the document; params: pet"));
    }
}
