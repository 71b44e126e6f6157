//! `volley init`: a commented starter scenario, or one built from an
//! OpenRPC document (the JSON-RPC world's OpenAPI).

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

#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    info: Info,
    methods: Vec<Method>,
}

#[derive(Deserialize, Default)]
struct Info {
    #[serde(default)]
    title: String,
}

#[derive(Deserialize)]
struct Method {
    name: String,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    params: Vec<Param>,
    #[serde(default, rename = "paramStructure")]
    param_structure: Option<String>,
    #[serde(default)]
    examples: Vec<Example>,
}

#[derive(Deserialize)]
struct Param {
    name: String,
    #[serde(default)]
    required: bool,
}

#[derive(Deserialize)]
struct Example {
    #[serde(default)]
    params: Vec<ExampleParam>,
}

#[derive(Deserialize)]
struct ExampleParam {
    name: String,
    value: Value,
}

/// A scenario with one call per method of an OpenRPC document, its params
/// taken from the method's first example where it has one.
pub fn from_openrpc(document: &str, target: &str) -> Result<String, String> {
    let doc: Document =
        serde_json::from_str(document).map_err(|e| format!("not an OpenRPC document: {e}"))?;
    if doc.methods.is_empty() {
        return Err("the OpenRPC document lists no methods".into());
    }
    let mut out = String::new();
    let title = if doc.info.title.is_empty() {
        "OpenRPC API".to_string()
    } else {
        doc.info.title.clone()
    };
    let _ = writeln!(
        out,
        "# Built by `volley init --from-openrpc` from \"{title}\": one call per method."
    );
    let _ = writeln!(
        out,
        "# Adjust weights to your traffic and fill in params where no example was given.\n"
    );
    let _ = writeln!(out, "name = {}", toml_string(&slug(&title)));
    let _ = writeln!(out, "target = {}", toml_string(target));
    let _ = writeln!(
        out,
        "timeout = \"10s\"\n\n[load]\nconcurrency = 16\nduration = \"30s\""
    );
    for method in &doc.methods {
        let _ = writeln!(out, "\n[[calls]]");
        if let Some(summary) = &method.summary {
            let _ = writeln!(out, "# {}", summary.lines().next().unwrap_or(""));
        }
        let _ = writeln!(out, "method = {}\nweight = 1", toml_string(&method.name));
        match method.examples.first() {
            Some(example) if !example.params.is_empty() => {
                let by_name = method.param_structure.as_deref() == Some("by-name");
                let params = if by_name {
                    Value::Object(
                        example
                            .params
                            .iter()
                            .map(|p| (p.name.clone(), p.value.clone()))
                            .collect(),
                    )
                } else {
                    Value::Array(example.params.iter().map(|p| p.value.clone()).collect())
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
            _ if method.params.is_empty() => {}
            _ => {
                let names: Vec<String> = method
                    .params
                    .iter()
                    .map(|p| format!("{}{}", p.name, if p.required { "" } else { "?" }))
                    .collect();
                let _ = writeln!(out, "# no example in the document; params: {}", names.join(", "));
            }
        }
    }
    Ok(out)
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
