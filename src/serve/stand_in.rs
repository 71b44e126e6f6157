//! Enough of MCP and of LSP for the built-in server to stand in for an MCP
//! server (`--mcp`, `--stdio`) or a language server (`--stdio --framing
//! content-length`) under the shipped scenarios: plausible, valid results
//! for the methods they send. Nothing is kept between calls (an opened
//! document is not remembered), so every answer depends on its params alone.

use serde_json::{json, Value};

use super::methods::{self, MethodResult, INVALID_PARAMS};

/// MCP protocol versions a client may ask for; the answer repeats the one
/// asked for when it is known, as MCP's version negotiation says.
const MCP_VERSIONS: [&str; 3] = ["2024-11-05", "2025-03-26", "2025-06-18"];
const MCP_LATEST: &str = "2025-06-18";

/// The answer to `method` when it is one of MCP's or LSP's, else `None`.
pub fn call(method: &str, params: &Value) -> Option<MethodResult> {
    let result = match method {
        // Both protocols start with `initialize`: LSP's carries `processId`
        // (required there, if null), MCP's never does.
        "initialize" if params.get("processId").is_some() => Ok(lsp_initialize()),
        "initialize" => Ok(mcp_initialize(params)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": tools() })),
        "tools/call" => tools_call(params),
        "resources/list" => Ok(json!({ "resources": resources() })),
        "resources/read" => resources_read(params),
        // LSP's lifecycle; `exit` ends a stdio server (see `serve_headed`).
        "shutdown" => Ok(Value::Null),
        // Notifications: known, so that one sent as a request is not
        // `-32601`; the document is not kept, so there is nothing to do.
        "textDocument/didOpen" | "textDocument/didClose" => document(params).map(|_| Value::Null),
        "textDocument/hover" => hover(params),
        "textDocument/completion" => completion(params),
        "textDocument/documentSymbol" => document_symbols(params),
        _ => return None,
    };
    Some(result.map(|value| value.to_string()))
}

fn server_info() -> Value {
    json!({ "name": "volley-serve", "version": env!("CARGO_PKG_VERSION") })
}

fn mcp_initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked.filter(|v| MCP_VERSIONS.contains(v)).unwrap_or(MCP_LATEST);
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": {}, "resources": {} },
        "serverInfo": server_info(),
    })
}

/// `add` comes first: clients (and volley's own tests) may expect it there.
fn tools() -> Value {
    json!([
        {
            "name": "add",
            "description": "Adds two numbers",
            "inputSchema": {
                "type": "object",
                "properties": { "a": { "type": "number" }, "b": { "type": "number" } },
                "required": ["a", "b"],
            },
        },
        {
            "name": "echo",
            "description": "Echoes back the message",
            "inputSchema": {
                "type": "object",
                "properties": { "message": { "type": "string" } },
                "required": ["message"],
            },
        },
    ])
}

/// Runs a tool; an unknown tool or arguments that do not fit its schema
/// are invalid params, as MCP says of protocol errors.
fn tools_call(params: &Value) -> Result<Value, (i64, &'static str)> {
    let arguments = params.get("arguments").unwrap_or(&Value::Null);
    let text = match params.get("name").and_then(Value::as_str) {
        Some("echo") => {
            let message = arguments.get("message").and_then(Value::as_str);
            format!("Echo: {}", message.ok_or(INVALID_PARAMS)?)
        }
        Some("add") => {
            let (a, b) = (arguments.get("a"), arguments.get("b"));
            let (Some(a), Some(b)) = (a, b) else {
                return Err(INVALID_PARAMS);
            };
            let sum = methods::add(json!([a, b]))?;
            format!("The sum of {a} and {b} is {sum}.")
        }
        _ => return Err(INVALID_PARAMS),
    };
    Ok(json!({ "content": [{ "type": "text", "text": text }] }))
}

/// How many resources there are: `volley://resources/1` to this.
const RESOURCES: u32 = 3;

fn resources() -> Value {
    (1..=RESOURCES)
        .map(|n| json!({ "uri": format!("volley://resources/{n}"), "name": format!("resource-{n}"), "mimeType": "text/plain" }))
        .collect()
}

/// A listed resource's text; any other URI is invalid params.
fn resources_read(params: &Value) -> Result<Value, (i64, &'static str)> {
    let uri = params.get("uri").and_then(Value::as_str).ok_or(INVALID_PARAMS)?;
    let n: u32 = uri
        .strip_prefix("volley://resources/")
        .filter(|n| !n.starts_with(['0', '+']))
        .and_then(|n| n.parse().ok())
        .ok_or(INVALID_PARAMS)?;
    if !(1..=RESOURCES).contains(&n) {
        return Err(INVALID_PARAMS);
    }
    Ok(
        json!({ "contents": [{ "uri": uri, "mimeType": "text/plain", "text": format!("Resource {n} of volley serve.") }] }),
    )
}

fn lsp_initialize() -> Value {
    json!({
        "capabilities": {
            // Full text on every change; volley sends none after didOpen.
            "textDocumentSync": 1,
            "hoverProvider": true,
            "completionProvider": { "triggerCharacters": ["."] },
            "documentSymbolProvider": true,
        },
        "serverInfo": server_info(),
    })
}

/// The document's URI, which every `textDocument/*` request must name.
fn document(params: &Value) -> Result<&str, (i64, &'static str)> {
    params
        .pointer("/textDocument/uri")
        .and_then(Value::as_str)
        .ok_or(INVALID_PARAMS)
}

/// The zero-based line and character a positional request points at.
fn position(params: &Value) -> Result<(u64, u64), (i64, &'static str)> {
    let at = |name: &str| {
        params
            .pointer(&format!("/position/{name}"))
            .and_then(Value::as_u64)
    };
    match (at("line"), at("character")) {
        (Some(line), Some(character)) => Ok((line, character)),
        _ => Err(INVALID_PARAMS),
    }
}

fn range(line: u64, from: u64, to: u64) -> Value {
    json!({
        "start": { "line": line, "character": from },
        "end": { "line": line, "character": to },
    })
}

fn hover(params: &Value) -> Result<Value, (i64, &'static str)> {
    let uri = document(params)?;
    let (line, character) = position(params)?;
    Ok(json!({
        "contents": {
            "kind": "markdown",
            "value": format!("`volley-serve`: {uri}, line {line}, character {character}"),
        },
        "range": range(line, character, character + 1),
    }))
}

fn completion(params: &Value) -> Result<Value, (i64, &'static str)> {
    document(params)?;
    position(params)?;
    // CompletionItemKind 3 is Function.
    Ok(json!({
        "isIncomplete": false,
        "items": [
            { "label": "add", "kind": 3, "detail": "add(a, b) -> number" },
            { "label": "echo", "kind": 3, "detail": "echo(message) -> message" },
        ],
    }))
}

fn document_symbols(params: &Value) -> Result<Value, (i64, &'static str)> {
    document(params)?;
    // SymbolKind 12 is Function; the document is not kept, so one symbol
    // at its start stands for its contents.
    Ok(json!([{
        "name": "volley",
        "kind": 12,
        "range": range(0, 0, 6),
        "selectionRange": range(0, 0, 6),
    }]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(method: &str, params: Value) -> Result<Value, (i64, &'static str)> {
        let text = call(method, &params).expect("a stand-in method")?;
        Ok(serde_json::from_str(&text).expect("a JSON result"))
    }

    #[test]
    fn initialize_answers_the_protocol_that_asked() {
        let mcp = answer(
            "initialize",
            json!({"protocolVersion": "2025-03-26", "capabilities": {}}),
        )
        .unwrap();
        assert_eq!(mcp["protocolVersion"], "2025-03-26");
        assert!(mcp["capabilities"]["tools"].is_object());
        let unknown = answer("initialize", json!({"protocolVersion": "1999-01-01"})).unwrap();
        assert_eq!(unknown["protocolVersion"], MCP_LATEST);
        let lsp = answer("initialize", json!({"processId": null, "capabilities": {}})).unwrap();
        assert_eq!(lsp["capabilities"]["hoverProvider"], true);
        assert!(lsp.get("protocolVersion").is_none());
    }

    #[test]
    fn tools_are_listed_and_called() {
        let listed = answer("tools/list", Value::Null).unwrap();
        assert_eq!(listed["tools"][0]["name"], "add");
        assert_eq!(listed["tools"][1]["name"], "echo");
        let echo = json!({"name": "echo", "arguments": {"message": "hi ${x}"}});
        assert_eq!(
            answer("tools/call", echo).unwrap(),
            json!({"content": [{"type": "text", "text": "Echo: hi ${x}"}]})
        );
        let add = json!({"name": "add", "arguments": {"a": 2, "b": 3}});
        assert_eq!(
            answer("tools/call", add).unwrap()["content"][0]["text"],
            "The sum of 2 and 3 is 5."
        );
        for bad in [
            json!({"name": "nope", "arguments": {}}),
            json!({"name": "echo", "arguments": {"message": 1}}),
            json!({"name": "add", "arguments": {"a": 1}}),
            json!({"arguments": {}}),
        ] {
            assert_eq!(answer("tools/call", bad), Err(INVALID_PARAMS));
        }
    }

    #[test]
    fn resources_are_listed_and_read() {
        let listed = answer("resources/list", Value::Null).unwrap();
        let resources = listed["resources"].as_array().unwrap();
        assert_eq!(resources.len(), 3);
        for resource in resources {
            let uri = resource["uri"].as_str().unwrap();
            assert_eq!(resource["mimeType"], "text/plain");
            let read = answer("resources/read", json!({ "uri": uri })).unwrap();
            assert_eq!(read["contents"][0]["uri"], uri);
            assert_eq!(read["contents"][0]["mimeType"], "text/plain");
            assert!(!read["contents"][0]["text"].as_str().unwrap().is_empty());
        }
        assert_eq!(resources[0]["uri"], "volley://resources/1");
        assert_eq!(resources[0]["name"], "resource-1");
        for bad in [
            json!({"uri": "volley://resources/4"}),
            json!({"uri": "volley://resources/0"}),
            json!({"uri": "volley://resources/01"}),
            json!({"uri": "volley://resources/+1"}),
            json!({"uri": "volley://resources/99999999999999999999"}),
            json!({"uri": "file:///etc/passwd"}),
            json!({"uri": 1}),
            json!({}),
        ] {
            assert_eq!(
                answer("resources/read", bad.clone()),
                Err(INVALID_PARAMS),
                "{bad}"
            );
        }
        let mcp = answer("initialize", json!({"protocolVersion": "2025-06-18"})).unwrap();
        assert!(mcp["capabilities"]["resources"].is_object());
    }

    #[test]
    fn language_requests_get_results_of_their_shape() {
        let at = json!({"textDocument": {"uri": "file:///a.py"}, "position": {"line": 2, "character": 5}});
        let hover = answer("textDocument/hover", at.clone()).unwrap();
        assert_eq!(hover["contents"]["kind"], "markdown");
        assert_eq!(hover["range"]["start"], json!({"line": 2, "character": 5}));
        let completion = answer("textDocument/completion", at).unwrap();
        assert!(!completion["items"].as_array().unwrap().is_empty());
        let symbols = answer(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": "file:///a.py"}}),
        );
        assert_eq!(symbols.unwrap()[0]["kind"], 12);
        assert_eq!(answer("shutdown", Value::Null), Ok(Value::Null));
        let opened = json!({"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": ""}});
        assert_eq!(answer("textDocument/didOpen", opened), Ok(Value::Null));
        let closed = json!({"textDocument": {"uri": "file:///a.py"}});
        assert_eq!(answer("textDocument/didClose", closed), Ok(Value::Null));
        for method in [
            "textDocument/hover",
            "textDocument/completion",
            "textDocument/documentSymbol",
        ] {
            assert_eq!(answer(method, json!({})), Err(INVALID_PARAMS), "{method}");
        }
        assert!(call("textDocument/definition", &Value::Null).is_none());
    }
}
