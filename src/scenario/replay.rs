//! Replay files: recorded requests, one request object or batch a line.

use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;
use toml::Spanned;

use super::error::{Locator, ScenarioError};
use super::{Replay, ReplayCall, ReplayRequest};
use crate::rpc::wire::Message;

/// The fastest a capture is replayed: beyond it, times round to nothing.
const MAX_SPEED: f64 = 1000.0;

/// `replay`, as written: a file's path, or a table. Its name appears in
/// serde's message for a value that matches neither, which `raw::SHAPES`
/// replaces.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawReplay {
    File(String),
    Table(RawReplayTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReplayTable {
    file: String,
    on_end: Option<String>,
    /// "recorded": each request leaves at its captured time.
    timing: Option<String>,
    /// With recorded timing: this many times as fast.
    speed: Option<f64>,
    /// "recorded": each answer must equal the captured one.
    expect: Option<String>,
    /// "recorded": each captured connection's requests on a connection of
    /// their own, in their order.
    connections: Option<String>,
}

pub(super) fn replay(
    at: &Locator,
    base_dir: &Path,
    raw: &Spanned<RawReplay>,
) -> Result<Replay, ScenarioError> {
    let bad = |message: String| at.error(Some(raw.span()), Some("replay"), message);
    let (file, settings) = match raw.get_ref() {
        RawReplay::File(file) => (file, None),
        RawReplay::Table(table) => (&table.file, Some(table)),
    };
    let Settings {
        timing,
        grouped,
        expect,
        speed,
        looping,
    } = settings
        .map_or(Ok(Settings::default()), Settings::of)
        .map_err(bad)?;
    let path = base_dir.join(file);
    let text =
        std::fs::read_to_string(&path).map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let line = read_line(line).map_err(|m| bad(format!("{}:{}: {m}", path.display(), n + 1)))?;
        if grouped && line.conn.is_none() {
            return Err(bad(format!(
                "{}:{}: connections = \"recorded\" needs a `conn` on every line, as `volley record` writes",
                path.display(),
                n + 1,
            )));
        }
        if timing && line.at.is_none() {
            return Err(bad(format!(
                "{}:{}: timing = \"recorded\" needs an `at` on every line, as `volley record` writes",
                path.display(),
                n + 1,
            )));
        }
        lines.push(line);
    }
    if lines.is_empty() {
        return Err(bad(format!("{} holds no requests", path.display())));
    }
    // Notifications, and calls the capture saw no answer to, have none to
    // match: they are judged as any call is. A capture without any answer
    // was made without --answers.
    if expect && lines.iter().all(|l| l.answer.is_none()) {
        return Err(bad(format!(
            "{}: expect = \"recorded\" needs the recorded answers, and the capture has none: record with `volley record --answers`",
            path.display()
        )));
    }
    // A capture's lines are written as answers come: in time order again.
    lines.sort_by(|a, b| a.at.unwrap_or(0.0).total_cmp(&b.at.unwrap_or(0.0)));
    let first = lines[0].at.unwrap_or(0.0);
    Ok(Replay {
        file: path,
        times: timing.then(|| {
            lines
                .iter()
                .map(|l| (l.at.unwrap_or(0.0) - first) / speed)
                .collect()
        }),
        answers: expect.then(|| lines.iter_mut().map(|l| l.answer.take()).collect()),
        conns: grouped.then(|| lines.iter().map(|l| l.conn.unwrap_or(0)).collect()),
        requests: lines.into_iter().map(|l| l.request).collect(),
        looping,
        rules: Vec::new(),
    })
}

/// How a replay is sent, from its table's keys.
struct Settings {
    timing: bool,
    grouped: bool,
    expect: bool,
    speed: f64,
    looping: bool,
}

impl Default for Settings {
    /// `replay = "file"`: at the load's pace, over and over.
    fn default() -> Self {
        Settings {
            timing: false,
            grouped: false,
            expect: false,
            speed: 1.0,
            looping: true,
        }
    }
}

impl Settings {
    fn of(table: &RawReplayTable) -> Result<Settings, String> {
        let recorded = |value: &Option<String>, key: &str| match value.as_deref() {
            None => Ok(false),
            Some("recorded") => Ok(true),
            Some(other) => Err(format!("{key} `{other}`: the one choice is \"recorded\"")),
        };
        let timing = recorded(&table.timing, "timing")?;
        if table.speed.is_some() && !timing {
            return Err("speed applies to timing = \"recorded\": add it, or drop speed".into());
        }
        let speed = table.speed.unwrap_or(1.0);
        if !(speed.is_finite() && speed > 0.0 && speed <= MAX_SPEED) {
            return Err(format!(
                "speed {speed}: a number above 0 and at most {MAX_SPEED} (2.0 is twice as fast)"
            ));
        }
        // A recorded pace ends with the capture: once through, unless asked.
        let looping = match table.on_end.as_deref() {
            None => !timing,
            Some("loop") if timing => {
                return Err(
                    "on_end = \"loop\" with timing = \"recorded\": a capture's times run once; drop one"
                        .into(),
                )
            }
            Some("loop") => true,
            Some("stop") => false,
            Some(other) => return Err(format!("on_end `{other}`: expected \"loop\" or \"stop\"")),
        };
        Ok(Settings {
            timing,
            grouped: recorded(&table.connections, "connections")?,
            expect: recorded(&table.expect, "expect")?,
            speed,
            looping,
        })
    }
}

/// One line of a replay file: a request (object or batch), or a capture's
/// line (`volley record`) holding one with its time and answer.
struct Line {
    request: ReplayRequest,
    at: Option<f64>,
    conn: Option<u64>,
    answer: Option<Box<RawValue>>,
}

fn read_line(line: &str) -> Result<Line, String> {
    #[derive(serde::Deserialize)]
    struct Captured<'a> {
        at: f64,
        conn: Option<u64>,
        #[serde(borrow)]
        request: &'a RawValue,
        answer: Option<Box<RawValue>>,
    }
    let line = line.trim();
    // A request object has a `method`; a capture's line a `request`.
    let keys: Option<std::collections::BTreeMap<String, &RawValue>> = line
        .starts_with('{')
        .then(|| serde_json::from_str(line).ok())
        .flatten();
    if keys.is_some_and(|k| k.contains_key("request")) {
        let captured: Captured =
            serde_json::from_str(line).map_err(|e| format!("not a request, nor a capture's line: {e}"))?;
        if !(captured.at.is_finite() && captured.at >= 0.0) {
            return Err(format!("`at` {}: seconds from the capture's start", captured.at));
        }
        return Ok(Line {
            request: replay_line(captured.request.get())?,
            at: Some(captured.at),
            conn: captured.conn,
            answer: captured.answer,
        });
    }
    Ok(Line {
        request: replay_line(line)?,
        at: None,
        conn: None,
        answer: None,
    })
}

fn replay_line(line: &str) -> Result<ReplayRequest, String> {
    let call = |raw: &RawValue| -> Result<ReplayCall, String> {
        let recorded = Message::parse(raw.get().as_bytes()).ok_or("not a request object")?;
        let method = recorded
            .method
            .and_then(|m| serde_json::from_str::<String>(m).ok())
            .ok_or("a request without a string `method`")?;
        Ok(ReplayCall {
            method,
            params: recorded
                .params
                .map(|p| RawValue::from_string(p.to_owned()))
                .transpose()
                .map_err(|e| e.to_string())?,
            // A present `id`, even null, makes a call; no `id` a notification.
            notification: recorded.id.is_none(),
            recorded_id: recorded.id.map(str::to_string),
        })
    };
    let line = line.trim();
    if line.starts_with('[') {
        let entries: Vec<&RawValue> = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        if entries.is_empty() {
            return Err("an empty batch".into());
        }
        Ok(ReplayRequest {
            batch: true,
            calls: entries.into_iter().map(call).collect::<Result<_, _>>()?,
        })
    } else {
        let raw: &RawValue = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        Ok(ReplayRequest {
            batch: false,
            calls: vec![call(raw)?],
        })
    }
}
