//! `[[calls]]`: the mix, each call's method, weight, params, batch and
//! expectation.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::batch::{batch_size, RawBatchSize};
use super::RawScenario;
use crate::plan::{Scope, Template};
use crate::scenario::error::{Locator, ScenarioError};
use crate::scenario::expect::{expectation, RawExpect};
use crate::scenario::{CallSpec, Replay};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCall {
    method: Spanned<String>,
    /// The call's row, threshold and compare key (default: its method).
    name: Option<Spanned<String>>,
    weight: Option<Spanned<i64>>,
    params: Option<Spanned<Value>>,
    batch: Option<Spanned<RawBatchSize>>,
    #[serde(default)]
    notification: bool,
    expect: Option<Spanned<RawExpect>>,
}

impl RawScenario {
    /// The `[[calls]]`: needed unless a `replay` file gives the requests or
    /// the scenario has flows.
    pub(super) fn calls(
        &self,
        at: &Locator,
        replay: Option<&Replay>,
        scope: &Scope,
    ) -> Result<Vec<CallSpec>, ScenarioError> {
        if self.calls.is_none() && self.flows.as_ref().is_some_and(|f| !f.get_ref().is_empty()) {
            return Ok(Vec::new());
        }
        let calls = match (&self.calls, replay) {
            (Some(calls), Some(_)) => {
                return Err(at.error(
                    Some(calls.span()),
                    Some("calls"),
                    "give either [[calls]] or `replay`, not both",
                ))
            }
            (None, None) => {
                return Err(at.error(
                    None,
                    Some("calls"),
                    "at least one [[calls]] (or [[flows]], or a `replay` file) is needed",
                ))
            }
            (None, Some(_)) => Vec::new(),
            (Some(calls), None) if calls.get_ref().is_empty() => {
                return Err(at.error(Some(calls.span()), Some("calls"), "at least one call is needed"))
            }
            (Some(calls), None) => {
                let specs: Vec<CallSpec> = calls
                    .get_ref()
                    .iter()
                    .enumerate()
                    .map(|(i, c)| c.validate(at, i, scope))
                    .collect::<Result<_, _>>()?;
                check_weight_sum(at, calls.get_ref(), &specs)?;
                specs
            }
        };
        Ok(calls)
    }
}

impl RawCall {
    fn validate(&self, at: &Locator, index: usize, scope: &Scope) -> Result<CallSpec, ScenarioError> {
        let key = |name: &str| format!("calls[{index}].{name}");
        if self.method.get_ref().is_empty() {
            return Err(at.error(Some(self.method.span()), Some(&key("method")), "method is empty"));
        }
        if let Some(name) = &self.name {
            row_name(name.get_ref()).map_err(|why| at.error(Some(name.span()), Some(&key("name")), why))?;
        }
        let weight = weight(at, self.weight.as_ref(), &key("weight"))?;
        let batch = self
            .batch
            .as_ref()
            .map(|b| batch_size(at, b, &key("batch")))
            .transpose()?;
        let (params, template) = params(at, self.params.as_ref(), &key("params"), scope)?;
        let expect = self
            .expect
            .as_ref()
            .map(|e| expectation(at, e, &key("expect")))
            .transpose()?;
        if expect.is_some() && self.notification {
            let span = self.expect.as_ref().map(|e| e.span());
            return Err(at.error(
                span,
                Some(&key("expect")),
                "a notification gets no answer to check",
            ));
        }
        Ok(CallSpec {
            method: self.method.get_ref().clone(),
            name: self.name.as_ref().map(|n| n.get_ref().clone()),
            weight,
            params,
            template,
            batch,
            notification: self.notification,
            expect,
        })
    }
}

/// A call's or a step's `params`, as written and compiled: an array or a
/// table, or a JSON-lines file of whole params.
pub(super) type Params = (Option<Value>, Option<Arc<Template>>);

pub(super) fn params(
    at: &Locator,
    params: Option<&Spanned<Value>>,
    key: &str,
    scope: &Scope,
) -> Result<Params, ScenarioError> {
    match params {
        Some(p) if p.get_ref().is_array() || p.get_ref().is_object() || whole_params_file(p.get_ref()) => {
            let template =
                Template::compile(p.get_ref(), scope).map_err(|m| at.error(Some(p.span()), Some(key), m))?;
            Ok((Some(p.get_ref().clone()), Some(Arc::new(template))))
        }
        Some(p) => Err(at.error(
            Some(p.span()),
            Some(key),
            "params must be an array (by position) or a table (by name)",
        )),
        None => Ok((None, None)),
    }
}

/// A call's or a flow's `weight`: 1 unless given.
pub(super) fn weight(at: &Locator, weight: Option<&Spanned<i64>>, key: &str) -> Result<u32, ScenarioError> {
    let Some(w) = weight else {
        return Ok(1);
    };
    match u32::try_from(*w.get_ref()) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(at.error(
            Some(w.span()),
            Some(key),
            format!(
                "weight must be a whole number of at least 1 (and at most {})",
                u32::MAX
            ),
        )),
    }
}

/// Whether `name` may name a row of the report: not empty, not the total's
/// row, and not a flow's (`flow:` names a journey's row).
pub(super) fn row_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("name is empty".into());
    }
    if name == crate::stats::TOTAL_TAG {
        return Err(format!(
            "`{name}` is the row of every call together: choose another name"
        ));
    }
    if name.starts_with("flow:") {
        return Err(format!(
            "`{name}`: names starting with `flow:` are kept for flows"
        ));
    }
    Ok(())
}

/// The mix draws from its weights' sum in 32 bits: a sum past u32::MAX is
/// refused, naming the call whose weight passes it, instead of wrapping
/// (which starved some calls of their share while `validate` showed
/// shares adding up to more than 100%).
fn check_weight_sum(at: &Locator, raw: &[RawCall], calls: &[CallSpec]) -> Result<(), ScenarioError> {
    let mut sum: u32 = 0;
    for (index, (raw, call)) in raw.iter().zip(calls).enumerate() {
        sum = sum.checked_add(call.weight).ok_or_else(|| {
            let span = raw.weight.as_ref().map_or_else(|| raw.method.span(), |w| w.span());
            at.error(
                Some(span),
                Some(&format!("calls[{index}].weight")),
                format!(
                    "the weights of calls[0] to calls[{index}] add up to more than {}, the most the mix can draw from; scale them down (only their ratios matter)",
                    u32::MAX
                ),
            )
        })?;
    }
    Ok(())
}

/// `params = "${file('eth_call.jsonl')}"`: each call's whole params, an
/// array or object a line of a JSON-lines file (as `volley init
/// --from-capture` writes them).
fn whole_params_file(value: &Value) -> bool {
    value.as_str().is_some_and(|text| {
        let text = text.trim();
        text.starts_with("${file(")
            && text.ends_with(")}")
            && (text.contains(".jsonl") || text.contains(".ndjson"))
            && text.matches("${").count() == 1
    })
}
