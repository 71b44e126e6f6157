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
    /// Requests (a batch is one), those that were batches, and their span
    /// in seconds.
    requests: u64,
    batches: u64,
    first_at: Option<f64>,
    last_at: f64,
    /// Per method, and whether sent as a notification: its calls and
    /// their params.
    entries: BTreeMap<(String, bool), Entry>,
    /// Calls per batch request → batches of that size.
    batch_sizes: BTreeMap<u64, u64>,
    calls: u64,
}

#[derive(Default)]
struct Entry {
    calls: u64,
    /// Each call's params (JSON text), when it had some.
    params: Vec<String>,
    /// Batches it was in, by their size (each batch once).
    batch_sizes: BTreeMap<u64, u64>,
    /// Its calls that came in batches.
    batched: u64,
}

/// Reads a capture and writes the scenario; `data_dir` is where the data
/// files go, relative to the scenario; `source` names the capture.
pub fn from_capture(
    capture: &str,
    source: &str,
    target: &str,
    data_dir: &str,
) -> Result<FromCapture, String> {
    let mut seen = Observed::default();
    for (n, line) in capture.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        seen.add(line).map_err(|e| format!("line {}: {e}", n + 1))?;
    }
    if seen.requests == 0 {
        return Err("the capture holds no requests".into());
    }
    let mut out = String::new();
    write_head(&mut out, &seen, source, target);
    let all_batches = seen.batches == seen.requests;
    let mut data_files = Vec::new();
    for ((name, notification), entry) in &seen.entries {
        let _ = writeln!(out, "\n[[calls]]\nmethod = {}", toml_string(name));
        let weight = write_weight(&mut out, &seen, entry, all_batches);
        if *notification {
            let _ = writeln!(out, "notification = true   # sent without an id");
        }
        if weight == 0 {
            continue;
        }
        if !entry.params.is_empty() {
            let suffix = if *notification { "-notifications" } else { "" };
            let file = format!("{data_dir}/{}{suffix}.jsonl", file_name(name));
            let _ = writeln!(
                out,
                "params = \"${{file('{file}')}}\"   # the {} recorded params, one a line, drawn at random",
                entry.params.len()
            );
            data_files.push((file, entry.params.join("\n") + "\n"));
        }
    }
    if all_batches {
        write_batches(&mut out, &seen);
    }
    Ok(FromCapture {
        scenario: out,
        data_files,
    })
}

/// A call's weight and where it came from: its calls, or (sent as batches
/// of its own, when every one of its calls came in a batch and some
/// requests did not) its batches and their sizes. Returns the weight.
fn write_weight(out: &mut String, seen: &Observed, entry: &Entry, all_batches: bool) -> u64 {
    let share = entry.calls as f64 * 100.0 / seen.calls as f64;
    if all_batches || entry.batched < entry.calls {
        let _ = writeln!(
            out,
            "weight = {}        # {} of the capture's {} calls ({share:.2}%){}",
            entry.calls,
            entry.calls,
            seen.calls,
            if entry.batched > 0 && !all_batches {
                format!("; {} of them came in batches, sent here alone", entry.batched)
            } else {
                String::new()
            }
        );
        return entry.calls;
    }
    let batches: u64 = entry.batch_sizes.values().sum();
    let sizes = size_table(&entry.batch_sizes);
    let _ = writeln!(
        out,
        "weight = {batches}        # its {} calls ({share:.2}% of {}) came in {batches} batches\n\
         batch = {{ sizes = {{ {} }} }}   # sent as batches of its own, sized as those were",
        entry.calls, seen.calls, sizes
    );
    batches
}

/// Batch sizes and how often each was sent, as a TOML table's inside.
fn size_table(sizes: &BTreeMap<u64, u64>) -> String {
    let pairs: Vec<String> = sizes.iter().map(|(size, n)| format!("{size} = {n}")).collect();
    pairs.join(", ")
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
        let request: Value = serde_json::from_str(line.request.get()).map_err(|e| e.to_string())?;
        let calls: Vec<&Value> = match &request {
            Value::Array(entries) => entries.iter().collect(),
            one => vec![one],
        };
        // What cannot be sent again (an empty batch, a string) is left out.
        if calls.is_empty() || calls.iter().any(|c| c["method"].as_str().is_none()) {
            return Ok(());
        }
        self.requests += 1;
        self.first_at = Some(self.first_at.map_or(line.at, |f| f.min(line.at)));
        self.last_at = self.last_at.max(line.at);
        let batch = request.is_array().then_some(calls.len() as u64);
        if let Some(size) = batch {
            self.batches += 1;
            *self.batch_sizes.entry(size).or_default() += 1;
        }
        let mut counted: Vec<(String, bool)> = Vec::new();
        for call in calls {
            let key = (
                call["method"].as_str().unwrap_or_default().to_string(),
                call.get("id").is_none(),
            );
            let entry = self.entries.entry(key.clone()).or_default();
            entry.calls += 1;
            self.calls += 1;
            if let Some(size) = batch {
                entry.batched += 1;
                if !counted.contains(&key) {
                    *entry.batch_sizes.entry(size).or_default() += 1;
                    counted.push(key);
                }
            }
            if let Some(params) = call.get("params").filter(|p| p.is_array() || p.is_object()) {
                entry.params.push(params.to_string());
            }
        }
        Ok(())
    }
}

fn write_head(out: &mut String, seen: &Observed, source: &str, target: &str) {
    let span = seen.last_at - seen.first_at.unwrap_or(0.0);
    let rate = if span > 0.0 {
        seen.requests as f64 / span
    } else {
        seen.requests as f64
    };
    let _ = writeln!(
        out,
        "# Written by `volley init --from-capture` from {source}: {} requests ({} calls, {} batches) over {span:.1} s.\n\
         # The mix, its weights, params, batch sizes and notifications are the capture's; edit freely.\n\
         # To send the capture itself, request by request at its own pace, use instead:\n\
         #   replay = {{ file = {}, timing = \"recorded\" }}",
        seen.requests,
        seen.calls,
        seen.batches,
        toml_string(source)
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

/// Every request was a batch: every request here is one, drawn from the
/// whole mix, sized as they were.
fn write_batches(out: &mut String, seen: &Observed) {
    let table = size_table(&seen.batch_sizes);
    let _ = writeln!(
        out,
        "\n# Every one of the {} requests was a batch: here too, drawn from the whole mix, sized as they were.\n\
         [batch]\nsize = {{ sizes = {{ {} }} }}",
        seen.requests,
        table
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
    fn the_mix_weights_params_and_notifications_are_the_captures() {
        let capture = [
            r#"{"at":0.0,"conn":1,"request":{"jsonrpc":"2.0","method":"eth_call","params":[{"to":"0x1"},"latest"],"id":1}}"#,
            r#"{"at":0.5,"conn":1,"request":{"jsonrpc":"2.0","method":"eth_call","params":[{"to":"0x2"},"latest"],"id":2}}"#,
            r#"{"at":1.0,"conn":2,"request":{"jsonrpc":"2.0","method":"echo","params":["note"]}}"#,
            r#"{"at":1.5,"conn":2,"request":{"jsonrpc":"2.0","method":"echo","params":[7],"id":5}}"#,
            r#"{"at":1.7,"conn":2,"request":[]}"#,
            r#"{"at":1.8,"conn":2,"request":"a string"}"#,
            r#"{"at":2.0,"conn":2,"request":{"jsonrpc":"2.0","method":"eth_call","params":[{"to":"0x3"},"latest"],"id":4}}"#,
        ]
        .join("\n");
        let made = from_capture(&capture, "cap.jsonl", "http://127.0.0.1:8545", "s-data").unwrap();
        let text = &made.scenario;
        assert!(text.contains("weight = 3 "), "{text}");
        assert!(
            text.contains("rate = 2.50 "),
            "5 requests over 2 s (the empty batch and the string left out): {text}"
        );
        assert!(text.contains("notification = true"), "{text}");
        assert!(!text.contains("[batch]") && !text.contains("batch ="), "{text}");
        assert!(text.contains("replay = { file = \"cap.jsonl\""), "{text}");
        let files: Vec<&str> = made.data_files.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            files,
            [
                "s-data/echo.jsonl",
                "s-data/echo-notifications.jsonl",
                "s-data/eth_call.jsonl"
            ]
        );
        assert_eq!(
            made.data_files[1].1, "[\"note\"]\n",
            "a notification's params apart"
        );
        assert_eq!(made.data_files[2].1.lines().count(), 3);
        assert!(from_capture("{\"at\":-1,\"request\":{}}", "c", "x", "d").is_err());
        assert!(from_capture("", "c", "x", "d")
            .unwrap_err()
            .contains("no requests"));
    }

    #[test]
    fn batches_stay_batches_and_singles_stay_single() {
        let one = |method: &str, id: u64| format!(r#"{{"jsonrpc":"2.0","method":"{method}","id":{id}}}"#);
        let lines = [
            format!(r#"{{"at":0.0,"request":{}}}"#, one("a", 1)),
            format!(r#"{{"at":1.0,"request":[{},{}]}}"#, one("b", 2), one("b", 3)),
            format!(
                r#"{{"at":2.0,"request":[{},{},{}]}}"#,
                one("b", 4),
                one("b", 5),
                one("b", 6)
            ),
        ];
        let made = from_capture(&lines.join("\n"), "c", "x", "d").unwrap();
        let text = &made.scenario;
        assert!(text.contains("method = \"a\"\nweight = 1 "), "{text}");
        assert!(
            text.contains("weight = 2 ") && text.contains("batch = { sizes = { 2 = 1, 3 = 1 } }"),
            "{text}"
        );
        assert!(!text.contains("[batch]"), "the single stays single: {text}");
        let all = from_capture(&lines[1..].join("\n"), "c", "x", "d").unwrap();
        assert!(
            all.scenario
                .contains("[batch]\nsize = { sizes = { 2 = 1, 3 = 1 } }"),
            "{}",
            all.scenario
        );
        assert!(all.scenario.contains("weight = 5 "), "{}", all.scenario);
    }
}
