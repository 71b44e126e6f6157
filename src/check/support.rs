//! `--methods`: which methods a target has, each called once.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use super::Prober;
use crate::transport::Target;

/// How a target answered a method of the `--methods` list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "support", content = "detail")]
pub enum Support {
    /// A result: the method is there.
    Answered,
    /// -32601: no such method.
    NotFound,
    /// Another error: the method is there and refused the empty params,
    /// or the server says "not supported" with a code of its own (-32700,
    /// a parse error for the valid JSON sent, says nothing).
    Error(i64),
    /// No right answer: why.
    NoAnswer(String),
}

impl Support {
    fn of(answer: Result<Option<crate::transport::Reply>, String>) -> Support {
        let body = match answer {
            Ok(Some(reply)) => reply.body,
            Ok(None) => return Support::NoAnswer("nothing came back".into()),
            Err(e) => return Support::NoAnswer(e),
        };
        let Ok(value) = serde_json::from_slice::<Value>(&body) else {
            return Support::NoAnswer("the answer is not JSON".into());
        };
        match value["error"]["code"].as_i64() {
            Some(-32601) => Support::NotFound,
            Some(code) => Support::Error(code),
            None if value.get("result").is_some() => Support::Answered,
            None => Support::NoAnswer("neither a result nor an error".into()),
        }
    }

    pub fn shown(&self) -> String {
        match self {
            Support::Answered => "yes".into(),
            Support::NotFound => "no (-32601)".into(),
            // A parse error for the valid JSON sent says nothing of the method.
            Support::Error(-32700) => "error -32700 (on valid JSON)".into(),
            // Refused params, or a server's own "not supported" code: its words.
            Support::Error(code) => format!("error {code}"),
            Support::NoAnswer(why) => format!("? {why}"),
        }
    }
}

/// The methods to ask about: an OpenRPC document's (`{"methods": [{"name":
/// ...}]}`), or one name a line (`#` comments).
pub fn read_methods(path: &Path, text: &str) -> Result<Vec<String>, String> {
    if let Ok(document) = serde_json::from_str::<Value>(text) {
        let methods = document["methods"]
            .as_array()
            .ok_or_else(|| format!("{}: an OpenRPC document with no `methods` array", path.display()))?;
        return methods
            .iter()
            .enumerate()
            .map(|(i, m)| {
                m["name"].as_str().map(String::from).ok_or_else(|| {
                    format!(
                        "{}: methods[{i}] has no `name` (a `$ref` is not followed)",
                        path.display()
                    )
                })
            })
            .collect();
    }
    let names: Vec<String> = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or("").trim().to_string())
        .filter(|name| !name.is_empty())
        .collect();
    if names.is_empty() {
        return Err(format!("{}: no method named", path.display()));
    }
    Ok(names)
}

/// Calls each method once, params `[]`, on one connection (opened again
/// when the server closed it), and says how the target answered.
pub async fn probe_methods(target: &Target, methods: &[String], timeout: Duration) -> Vec<Support> {
    let mut prober = Prober::new(target, timeout);
    let mut support = Vec::new();
    for (i, method) in methods.iter().enumerate() {
        let body = json!({"jsonrpc": "2.0", "method": method, "params": [], "id": 1000 + i});
        support.push(Support::of(
            prober.send(body.to_string().into_bytes(), timeout).await,
        ));
    }
    support
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_come_from_an_openrpc_document_or_a_list() {
        let path = Path::new("m");
        let openrpc =
            r#"{"openrpc": "1.2.6", "methods": [{"name": "eth_chainId"}, {"name": "net_version"}]}"#;
        assert_eq!(
            read_methods(path, openrpc).unwrap(),
            ["eth_chainId", "net_version"]
        );
        assert_eq!(
            read_methods(path, "# list\neth_call  # the one\n\nweb3_sha3\n").unwrap(),
            ["eth_call", "web3_sha3"]
        );
        assert!(read_methods(path, r#"{"methods": [{"$ref": "x"}]}"#)
            .unwrap_err()
            .contains("methods[0] has no `name`"));
        assert!(read_methods(path, "# nothing\n")
            .unwrap_err()
            .contains("no method named"));
    }
}
