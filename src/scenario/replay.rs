//! Replay files: recorded requests, one request object or batch a line.

use std::path::Path;

use serde_json::value::RawValue;
use toml::Spanned;

use super::error::{Locator, ScenarioError};
use super::raw::RawReplay;
use super::{Replay, ReplayCall, ReplayRequest};
use crate::rpc::wire::Message;

pub(super) fn replay(
    at: &Locator,
    base_dir: &Path,
    raw: &Spanned<RawReplay>,
) -> Result<Replay, ScenarioError> {
    let bad = |message: String| at.error(Some(raw.span()), Some("replay"), message);
    let (file, looping) = match raw.get_ref() {
        RawReplay::File(file) => (file, true),
        RawReplay::Table { file, on_end } => match on_end.as_deref() {
            None | Some("loop") => (file, true),
            Some("stop") => (file, false),
            Some(other) => return Err(bad(format!("on_end `{other}`: expected \"loop\" or \"stop\""))),
        },
    };
    let path = base_dir.join(file);
    let text =
        std::fs::read_to_string(&path).map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
    let mut requests = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let request = replay_line(line).map_err(|m| bad(format!("{}:{}: {m}", path.display(), n + 1)))?;
        requests.push(request);
    }
    if requests.is_empty() {
        return Err(bad(format!("{} holds no requests", path.display())));
    }
    Ok(Replay {
        file: path,
        requests,
        looping,
    })
}

fn replay_line(line: &str) -> Result<ReplayRequest, String> {
    let call = |raw: &RawValue| -> Result<ReplayCall, String> {
        let recorded: Message =
            serde_json::from_str(raw.get()).map_err(|e| format!("not a request object: {e}"))?;
        let method = recorded
            .method
            .and_then(|m| serde_json::from_str::<String>(m.get()).ok())
            .ok_or("a request without a string `method`")?;
        Ok(ReplayCall {
            method,
            params: recorded.params.map(|p| p.to_owned()),
            // A present `id`, even null, makes a call; no `id` a notification.
            notification: recorded.id.is_none(),
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
