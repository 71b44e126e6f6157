//! `volley init --from-openrpc`: example text is sent as written (a `${`
//! in it is escaped, not taken for a generator), `$ref`s within the
//! document are followed, and the document's first server is the target
//! unless one is given.

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;
use volley::init::{from_openrpc, from_openrpc_with, DEFAULT_TARGET};
use volley::scenario::{Scenario, TargetSpec};

fn parse(text: &str) -> Scenario {
    Scenario::parse(text, "gen.toml", "gen", &|_| None).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("volley-init-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn volley(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(args)
        .output()
        .unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code(), text(&output.stdout), text(&output.stderr))
}

#[test]
fn example_text_with_dollar_braces_is_sent_as_written() {
    let document = json!({
        "openrpc": "1.2.6",
        "info": {"title": "Templates", "version": "1"},
        "methods": [{
            "name": "render",
            "params": [{"name": "template"}, {"name": "vars"}],
            "examples": [{"name": "e", "params": [
                {"name": "template", "value": "Hello ${name}, cost $5, $${kept}"},
                {"name": "vars", "value": {"${key}": ["${a}", 1]}}
            ]}]
        }]
    });
    let dir = temp_dir("escape");
    let (doc, out) = (dir.join("openrpc.json"), dir.join("gen.toml"));
    std::fs::write(&doc, document.to_string()).unwrap();
    let (doc, out) = (doc.to_str().unwrap(), out.to_str().unwrap());
    let (code, _, stderr) = volley(&["init", out, "--from-openrpc", doc]);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stdout, stderr) = volley(&["validate", out]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // The sample requests are the bytes a run sends: the example's text.
    let sent = r#""params":["Hello ${name}, cost $5, $${kept}",{"${key}":["${a}",1]}]"#;
    assert!(stdout.contains(sent), "{stdout}");
}

#[test]
fn refs_to_components_are_followed() {
    let document = json!({
        "openrpc": "1.2.6",
        "info": {"title": "Refs", "version": "1"},
        "methods": [
            {"$ref": "#/components/methods/balance"},
            {
                "name": "get_pet",
                "paramStructure": "by-name",
                "params": [{"$ref": "#/components/contentDescriptors/PetId"}],
                "examples": [{"$ref": "#/components/examplePairingObjects/onePet"}]
            },
            {
                "name": "far_away",
                "params": [{"name": "x"}],
                "examples": [{"name": "e", "params": [{"$ref": "other.json#/components/examples/x"}]}]
            },
            {
                "name": "unfetched",
                "params": [{"$ref": "#/components/contentDescriptors/PetId"}]
            }
        ],
        "components": {
            "methods": {"balance": {
                "name": "eth_getBalance",
                "params": [{"name": "address", "required": true}, {"name": "block"}],
                "examples": [{"name": "e", "params": [
                    {"$ref": "#/components/examples/address"},
                    {"name": "block", "value": "latest"}
                ]}]
            }},
            "contentDescriptors": {"PetId": {"name": "id", "required": true, "schema": {"type": "string"}}},
            "examples": {
                "address": {"name": "anAddress", "value": "0x00000000219ab540356cBB839Cbe05303d7705Fa"},
                "petId": {"name": "somePet", "value": "p-${7}"},
                "alias": {"$ref": "#/components/examples/petId"}
            },
            "examplePairingObjects": {"onePet": {"name": "one", "params": [{"$ref": "#/components/examples/alias"}]}}
        }
    });
    let text = from_openrpc(&document.to_string(), "http://127.0.0.1:8545").unwrap();
    let scenario = parse(&text);
    let methods: Vec<&str> = scenario.calls.iter().map(|c| c.method.as_str()).collect();
    assert_eq!(methods, ["eth_getBalance", "get_pet", "far_away", "unfetched"]);
    assert_eq!(
        scenario.calls[0].params,
        Some(json!(["0x00000000219ab540356cBB839Cbe05303d7705Fa", "latest"]))
    );
    // By name, the key is the method's param, not the shared example's name.
    assert_eq!(scenario.calls[1].params, Some(json!({"id": "p-$${7}"})));
    assert_eq!(scenario.calls[2].params, None);
    assert!(text.contains("points outside the document"), "{text}");
    assert!(
        text.contains("# no example in the document; params: id\n"),
        "{text}"
    );
}

#[test]
fn the_first_server_is_the_target_unless_one_is_given() {
    let document = json!({
        "openrpc": "1.2.6",
        "info": {"title": "Served", "version": "1"},
        "servers": [
            {"name": "local", "url": "http://{host}:{port}/rpc",
             "variables": {"host": {"default": "127.0.0.1"}, "port": {"default": "9000"}}},
            {"name": "other", "url": "http://10.0.0.1/rpc"}
        ],
        "methods": [{"name": "ping", "params": []}]
    })
    .to_string();
    let target = |text: &str| parse(text).target;
    let from_servers = from_openrpc_with(&document, None).unwrap();
    assert_eq!(
        target(&from_servers),
        TargetSpec::Url("http://127.0.0.1:9000/rpc".into())
    );
    let given = from_openrpc_with(&document, Some("ws://127.0.0.1:8547")).unwrap();
    assert_eq!(target(&given), TargetSpec::Url("ws://127.0.0.1:8547".into()));
    let unserved = json!({"openrpc": "1.2.6", "methods": [{"name": "ping"}]}).to_string();
    let fallback = from_openrpc_with(&unserved, None).unwrap();
    assert_eq!(target(&fallback), TargetSpec::Url(DEFAULT_TARGET.into()));
}
