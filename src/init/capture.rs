//! `volley init --from-capture`: a scenario whose mix is what a capture
//! (`volley record`) saw: each method weighted by its calls, its params
//! drawn from a data file of the recorded ones, the batch sizes and the
//! notifications' share as observed, and the recorded rate as the load.
//! The generated file says in its comments where each figure came from.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::value::RawValue;
use serde_json::Value;

/// The scenario's text, and each data file to write beside it (its path
/// relative to the scenario, and its lines).
#[derive(Debug)]
pub struct FromCapture {
    pub scenario: String,
    pub data_files: Vec<(String, String)>,
}

/// What the capture holds, counted.
#[derive(Default)]
struct Observed {
    /// Requests (a batch is one), and their span in seconds.
    requests: u64,
    first_at: Option<f64>,
    last_at: f64,
    /// Per method: its calls, those sent as notifications, and each call's
    /// params (JSON text) when it had some.
    methods: BTreeMap<String, Method>,
    /// Calls per batch request → batches of that size.
    batch_sizes: BTreeMap<u64, u64>,
    calls: u64,
    notifications: u64,
}

#[derive(Default)]
struct Method {
    calls: u64,
    notifications: u64,
    params: Vec<String>,
}

/// Reads a capture and writes the scenario; `data_dir` is where the data
/// files go, relative to the scenario.
pub fn from_capture(capture: &str, target: &str, data_dir: &str) -> Result<FromCapture, String> {
    let mut seen = Observed::default();
    for (n, line) in capture.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        seen.add(line).map_err(|e| format!("line {}: {e}", n + 1))?;
    }
    if seen.requests == 0 {
        return Err("the capture holds no requests".into());
    }
    let mut out = String::new();
    let span = seen.last_at - seen.first_at.unwrap_or(0.0);
    write_head(&mut out, &seen, target, span);
    let mut data_files = Vec::new();
    for (name, method) in &seen.methods {
        let _ = writeln!(out, "\n[[calls]]\nmethod = {}", toml_string(name));
        let _ = writeln!(
            out,
            "weight = {}        # {} of the capture's {} calls ({:.2}%)",
            method.calls,
            method.calls,
            seen.calls,
            method.calls as f64 * 100.0 / seen.calls as f64
        );
        if !method.params.is_empty() {
            let file = format!("{data_dir}/{}.jsonl", file_name(name));
            let _ = writeln!(
                out,
                "params = \"${{file('{file}')}}\"   # the {} recorded params, one a line, drawn at random",
                method.params.len()
            );
            data_files.push((file, method.params.join("\n") + "\n"));
        }
        if seen.batch_sizes.is_empty() && method.notifications == method.calls {
            let _ = writeln!(out, "notification = true   # every one was sent without an id");
        }
    }
    write_batches(&mut out, &seen);
    Ok(FromCapture {
        scenario: out,
        data_files,
    })
}

impl Observed {
    fn add(&mut self, line: &str) -> Result<(), String> {
        #[derive(serde::Deserialize)]
        struct Line<'a> {
            at: f64,
            #[serde(borrow)]
            request: &'a RawValue,
        }
        let line: Line = serde_json::from_str(line).map_err(|e| format!("not a capture's line: {e}"))?;
        if !(line.at.is_finite() && line.at >= 0.0) {
            return Err(format!("`at` {}: seconds from the capture's start", line.at));
        }
        self.requests += 1;
        self.first_at = Some(self.first_at.map_or(line.at, |f| f.min(line.at)));
        self.last_at = self.last_at.max(line.at);
        let request: Value = serde_json::from_str(line.request.get()).map_err(|e| e.to_string())?;
        match request {
            Value::Array(entries) => {
                *self.batch_sizes.entry(entries.len() as u64).or_default() += 1;
                entries.iter().try_for_each(|entry| self.call(entry))
            }
            one => self.call(&one),
        }
    }

    fn call(&mut self, call: &Value) -> Result<(), String> {
        let name = call["method"]
            .as_str()
            .ok_or("a call without a string `method`")?;
        let method = self.methods.entry(name.to_string()).or_default();
        method.calls += 1;
        self.calls += 1;
        if call.get("id").is_none() {
            method.notifications += 1;
            self.notifications += 1;
        }
        if let Some(params) = call.get("params").filter(|p| p.is_array() || p.is_object()) {
            method.params.push(params.to_string());
        }
        Ok(())
    }
}

fn write_head(out: &mut String, seen: &Observed, target: &str, span: f64) {
    let rate = if span > 0.0 {
        seen.requests as f64 / span
    } else {
        seen.requests as f64
    };
    let _ = writeln!(
        out,
        "# Written by `volley init --from-capture` from {} recorded requests ({} calls) over {span:.1} s.\n\
         # The mix, its weights, params, batch sizes and notifications are the capture's; edit freely.\n\
         # To send the capture itself, request by request at its own pace, use instead:\n\
         #   replay = {{ file = \"capture.jsonl\", timing = \"recorded\" }}",
        seen.requests, seen.calls
    );
    let _ = writeln!(out, "name = \"from-capture\"\ntarget = {}", toml_string(target));
    let _ = writeln!(
        out,
        "\n[load]\nrate = {:.2}        # the capture's: {} requests over its {span:.1} s\nduration = \"{}s\"",
        rate,
        seen.requests,
        span.ceil().max(1.0)
    );
}

fn write_batches(out: &mut String, seen: &Observed) {
    if seen.batch_sizes.is_empty() {
        return;
    }
    let batches: u64 = seen.batch_sizes.values().sum();
    let mut sizes = seen.batch_sizes.clone();
    // Requests sent alone count as batches of one: the mix sends every
    // request as a batch once some were.
    let singles = seen.requests - batches;
    if singles > 0 {
        *sizes.entry(1).or_default() += singles;
    }
    let table: Vec<String> = sizes.iter().map(|(size, n)| format!("{size} = {n}")).collect();
    let _ = writeln!(
        out,
        "\n# {batches} of the {} requests were batches; sizes weighted by how often each was sent{}.",
        seen.requests,
        if singles > 0 {
            " (single requests as batches of 1)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "[batch]\nsize = {{ sizes = {{ {} }} }}\nnotifications = {:.4}   # {} of {} calls had no id",
        table.join(", "),
        seen.notifications as f64 / seen.calls as f64,
        seen.notifications,
        seen.calls
    );
}

/// A method name as a file name: letters, digits, `-`, `_` and `.` kept.
fn file_name(method: &str) -> String {
    method
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_weights_params_and_batches_are_the_captures() {
        let capture = [
            r#"{"at":0.0,"conn":1,"request":{"jsonrpc":"2.0","method":"eth_call","params":[{"to":"0x1"},"latest"],"id":1}}"#,
            r#"{"at":0.5,"conn":1,"request":{"jsonrpc":"2.0","method":"eth_call","params":[{"to":"0x2"},"latest"],"id":2}}"#,
            r#"{"at":1.0,"conn":2,"request":[{"jsonrpc":"2.0","method":"eth_blockNumber","id":3},{"jsonrpc":"2.0","method":"log/x","params":["a"]}]}"#,
            r#"{"at":2.0,"conn":2,"request":{"jsonrpc":"2.0","method":"eth_call","params":[{"to":"0x3"},"latest"],"id":4}}"#,
        ]
        .join("\n");
        let made = from_capture(&capture, "http://127.0.0.1:8545", "s-data").unwrap();
        let text = &made.scenario;
        assert!(text.contains("weight = 3 "), "{text}");
        assert!(text.contains("rate = 2.00 "), "4 requests over 2 s: {text}");
        assert!(text.contains("size = { sizes = { 1 = 3, 2 = 1 } }"), "{text}");
        assert!(text.contains("notifications = 0.2000"), "1 of 5 calls: {text}");
        let files: Vec<&str> = made.data_files.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(files, ["s-data/eth_call.jsonl", "s-data/log_x.jsonl"]);
        assert_eq!(made.data_files[0].1.lines().count(), 3);
        assert!(from_capture("{\"at\":-1,\"request\":{}}", "x", "d").is_err());
        assert!(from_capture("", "x", "d").unwrap_err().contains("no requests"));
    }
}
