//! `[[flows]]`: journeys of steps, a value captured from one answer
//! feeding the next call. Each step's params and checks are compiled
//! against the variables known where it stands (the flow's `vars`, what
//! earlier steps capture), so a name nothing makes is an error here,
//! before anything is sent.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::calls::{params, row_name, weight};
use super::{duration, RawScenario};
use crate::plan::{Capture, Check, ForEach, Pick, Pointer, Scope, Template, Until, FOR_EACH_LIMIT};
use crate::scenario::error::{Locator, ScenarioError};
use crate::scenario::expect::{expectation, RawCodes, RawExpect};
use crate::scenario::{CallSpec, FlowSpec, StepSpec};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFlow {
    name: Spanned<String>,
    weight: Option<Spanned<i64>>,
    #[serde(default)]
    vars: BTreeMap<String, Spanned<Value>>,
    steps: Option<Spanned<Vec<RawStep>>>,
    /// `"per_connection"` (the default) or `"per_flow"`.
    session: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    method: Spanned<String>,
    name: Option<Spanned<String>>,
    params: Option<Spanned<Value>>,
    #[serde(default)]
    notification: bool,
    expect: Option<Spanned<RawExpect>>,
    capture: Option<Spanned<BTreeMap<String, RawCapture>>>,
    until: Option<Spanned<RawUntil>>,
    for_each: Option<Spanned<String>>,
    for_each_limit: Option<Spanned<i64>>,
    /// Sent even after an earlier step failed (a cleanup).
    #[serde(default)]
    always: bool,
}

/// `tx = "/transactions/*"`, or `tx = { pointer = "...", pick = "all" }`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawCapture {
    Pointer(String),
    Long {
        pointer: String,
        pick: Option<String>,
        optional: Option<bool>,
    },
}

/// `until`: any key of `expect`, and how often and how long to try.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUntil {
    result: Option<String>,
    #[serde(rename = "type")]
    json_type: Option<String>,
    pointer: Option<String>,
    regex: Option<String>,
    equals: Option<Value>,
    error: Option<RawCodes>,
    every: Option<Spanned<String>>,
    within: Option<Spanned<String>>,
}

/// How often an `until` tries again unless told.
const UNTIL_EVERY: Duration = Duration::from_secs(1);

impl RawScenario {
    pub(super) fn flows(&self, at: &Locator, scope: &Scope) -> Result<Vec<FlowSpec>, ScenarioError> {
        let Some(flows) = &self.flows else {
            return Ok(Vec::new());
        };
        let refuse = |what: &str| {
            at.error(
                Some(flows.span()),
                Some("flows"),
                format!("[[flows]] cannot go with {what}: a flow is an arrival of its own"),
            )
        };
        if self.replay.is_some() {
            return Err(refuse("`replay`, whose file gives every request"));
        }
        if self.batch.is_some() {
            return Err(refuse("[batch], which makes every request a batch of calls"));
        }
        let mut specs: Vec<FlowSpec> = Vec::new();
        for (i, flow) in flows.get_ref().iter().enumerate() {
            let spec = flow.validate(at, i, scope)?;
            if specs.iter().any(|s| s.name == spec.name) {
                return Err(at.error(
                    Some(flow.name.span()),
                    Some(&format!("flows[{i}].name")),
                    format!(
                        "two flows are named `{}`: each flow's row needs its own name",
                        spec.name
                    ),
                ));
            }
            specs.push(spec);
        }
        Ok(specs)
    }
}

impl RawScenario {
    /// Flows draw from the calls' weights and theirs together, in 32 bits:
    /// a sum past u32::MAX is refused at the flow that passes it.
    pub(super) fn check_flow_weights(
        &self,
        at: &Locator,
        calls: &[CallSpec],
        flows: &[FlowSpec],
    ) -> Result<(), ScenarioError> {
        let (Some(raw), false) = (&self.flows, flows.is_empty()) else {
            return Ok(());
        };
        let mut sum = calls.iter().try_fold(0u32, |sum, c| sum.checked_add(c.weight));
        for (index, flow) in flows.iter().enumerate() {
            sum = sum.and_then(|sum| sum.checked_add(flow.weight));
            if sum.is_none() {
                return Err(at.error(
                    Some(raw.span()),
                    Some(&format!("flows[{index}].weight")),
                    format!(
                        "the weights of the calls and flows[0] to flows[{index}] add up to more than {}, the most the mix can draw from; scale them down (only their ratios matter)",
                        u32::MAX
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl RawFlow {
    fn validate(&self, at: &Locator, index: usize, scope: &Scope) -> Result<FlowSpec, ScenarioError> {
        let key = |name: &str| format!("flows[{index}].{name}");
        let name = self.name.get_ref();
        if name.trim().is_empty() {
            return Err(at.error(Some(self.name.span()), Some(&key("name")), "name is empty"));
        }
        let weight = weight(at, self.weight.as_ref(), &key("weight"))?;
        let mut slots: Vec<String> = Vec::new();
        let mut vars = Vec::new();
        for (var, value) in &self.vars {
            let var_key = key(&format!("vars.{var}"));
            check_var_name(var, scope).map_err(|m| at.error(Some(value.span()), Some(&var_key), m))?;
            // A var sees generators and polled values, not other vars:
            // they are made together, at the flow's start.
            let names: Vec<String> = self.vars.keys().cloned().collect();
            let seeing = Scope {
                vars: &names,
                ..*scope
            };
            let template = Template::compile(value.get_ref(), &seeing)
                .map_err(|m| at.error(Some(value.span()), Some(&var_key), m))?;
            if let Some(other) = template.vars_used().first() {
                return Err(at.error(
                    Some(value.span()),
                    Some(&var_key),
                    format!(
                        "`{}` is another of this flow's vars: vars are made together at the flow's start, so one cannot read another (write its expression here instead)",
                        names[*other]
                    ),
                ));
            }
            let template = Template::compile(value.get_ref(), scope)
                .map_err(|m| at.error(Some(value.span()), Some(&var_key), m))?;
            slots.push(var.clone());
            vars.push((slots.len() - 1, Arc::new(template), value.get_ref().to_string()));
        }
        let Some(steps) = self.steps.as_ref().filter(|s| !s.get_ref().is_empty()) else {
            let span = self.steps.as_ref().map_or_else(|| self.name.span(), |s| s.span());
            return Err(at.error(
                Some(span),
                Some(&key("steps")),
                "a flow needs at least one step ([[flows.steps]])",
            ));
        };
        let steps = (steps.get_ref().iter().enumerate())
            .map(|(i, step)| step.validate(at, &key(&format!("steps[{i}]")), scope, &mut slots))
            .collect::<Result<_, _>>()?;
        Ok(FlowSpec {
            name: name.clone(),
            weight,
            slots,
            vars,
            steps,
            own_connection: self.own_connection(at, &key("session"))?,
        })
    }

    /// `session = "per_flow"`: a connection of the flow's own; the default,
    /// `"per_connection"`, the flows and calls of a connection share it.
    fn own_connection(&self, at: &Locator, key: &str) -> Result<bool, ScenarioError> {
        match self.session.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
            None | Some(("per_connection", _)) => Ok(false),
            Some(("per_flow", _)) => Ok(true),
            Some((other, span)) => Err(at.error(
                Some(span),
                Some(key),
                format!("`{other}` is not a session: \"per_flow\" (a connection for each flow) or \"per_connection\" (the default)"),
            )),
        }
    }
}

impl RawStep {
    fn validate(
        &self,
        at: &Locator,
        key: &str,
        scope: &Scope,
        slots: &mut Vec<String>,
    ) -> Result<StepSpec, ScenarioError> {
        let key = |name: &str| format!("{key}.{name}");
        if self.method.get_ref().is_empty() {
            return Err(at.error(Some(self.method.span()), Some(&key("method")), "method is empty"));
        }
        if let Some(name) = &self.name {
            row_name(name.get_ref()).map_err(|why| at.error(Some(name.span()), Some(&key("name")), why))?;
        }
        if self.notification {
            self.check_notification(at, &key)?;
        }
        let known = Scope {
            vars: slots,
            ..*scope
        };
        let (params, template) = params(at, self.params.as_ref(), &key("params"), &known)?;
        let mut uses: Vec<usize> = template.as_ref().map_or_else(Vec::new, |t| t.vars_used());
        let expect = match &self.expect {
            Some(raw) => Some(check(
                at,
                raw.span(),
                raw.get_ref(),
                &key("expect"),
                &known,
                &mut uses,
            )?),
            None => None,
        };
        let until = self.until(at, &key("until"), &known, &mut uses)?;
        let for_each = self.for_each(at, &key, slots)?;
        let mut names: Vec<String> = Vec::new();
        for slot in uses {
            if !names.contains(&slots[slot]) {
                names.push(slots[slot].clone());
            }
        }
        // Captures come last: a step reads only what earlier steps made.
        let captures = self.captures(at, &key("capture"), scope, slots)?;
        Ok(StepSpec {
            method: self.method.get_ref().clone(),
            name: self.name.as_ref().map(|n| n.get_ref().clone()),
            params,
            template,
            notification: self.notification,
            expect,
            captures,
            until,
            for_each,
            always: self.always,
            uses: names,
        })
    }

    fn check_notification(&self, at: &Locator, key: &dyn Fn(&str) -> String) -> Result<(), ScenarioError> {
        let answered: [(&str, Option<Range<usize>>); 3] = [
            ("expect", self.expect.as_ref().map(Spanned::span)),
            ("capture", self.capture.as_ref().map(Spanned::span)),
            ("until", self.until.as_ref().map(Spanned::span)),
        ];
        match answered.into_iter().find(|(_, span)| span.is_some()) {
            Some((name, span)) => Err(at.error(
                span,
                Some(&key(name)),
                format!("a notification gets no answer: `{name}` has nothing to read"),
            )),
            None => Ok(()),
        }
    }

    fn until(
        &self,
        at: &Locator,
        key: &str,
        scope: &Scope,
        uses: &mut Vec<usize>,
    ) -> Result<Option<Until>, ScenarioError> {
        let Some(raw) = &self.until else {
            return Ok(None);
        };
        let u = raw.get_ref();
        let Some(within) = &u.within else {
            return Err(at.error(
                Some(raw.span()),
                Some(key),
                "until needs `within`, the most time to keep trying (e.g. within = \"10s\")",
            ));
        };
        let within = duration(at, within)?;
        let every = u
            .every
            .as_ref()
            .map(|e| duration(at, e))
            .transpose()?
            .unwrap_or(UNTIL_EVERY);
        if every.is_zero() || within.is_zero() || every > within {
            let span = u.every.as_ref().map_or_else(|| raw.span(), |e| e.span());
            return Err(at.error(
                Some(span),
                Some(&format!("{key}.every")),
                format!(
                    "until tries every {} for at most {}: `every` must be above zero and at most `within`",
                    humantime::format_duration(every),
                    humantime::format_duration(within)
                ),
            ));
        }
        let expect = RawExpect {
            result: u.result.clone(),
            json_type: u.json_type.clone(),
            pointer: u.pointer.clone(),
            regex: u.regex.clone(),
            equals: u.equals.clone(),
            error: u.error.clone(),
        };
        let check = check(at, raw.span(), &expect, key, scope, uses)?;
        Ok(Some(Until { check, every, within }))
    }

    fn for_each(
        &self,
        at: &Locator,
        key: &dyn Fn(&str) -> String,
        slots: &[String],
    ) -> Result<Option<ForEach>, ScenarioError> {
        let Some(name) = &self.for_each else {
            if let Some(limit) = &self.for_each_limit {
                return Err(at.error(
                    Some(limit.span()),
                    Some(&key("for_each_limit")),
                    "for_each_limit needs for_each, the captured list to go through",
                ));
            }
            return Ok(None);
        };
        let Some(slot) = slots.iter().position(|s| s == name.get_ref()) else {
            return Err(at.error(
                Some(name.span()),
                Some(&key("for_each")),
                format!(
                    "`{}` is made by no earlier step's `capture` and no `vars` of this flow",
                    name.get_ref()
                ),
            ));
        };
        let limit = match &self.for_each_limit {
            Some(limit) => u32::try_from(*limit.get_ref())
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    at.error(
                        Some(limit.span()),
                        Some(&key("for_each_limit")),
                        format!("for_each_limit must be a whole number from 1 to {}", u32::MAX),
                    )
                })?,
            None => FOR_EACH_LIMIT,
        };
        Ok(Some(ForEach { slot, limit }))
    }

    fn captures(
        &self,
        at: &Locator,
        key: &str,
        scope: &Scope,
        slots: &mut Vec<String>,
    ) -> Result<Vec<Capture>, ScenarioError> {
        let Some(raw) = &self.capture else {
            return Ok(Vec::new());
        };
        let mut captures = Vec::new();
        for (name, capture) in raw.get_ref() {
            let bad = |m: String| at.error(Some(raw.span()), Some(&format!("{key}.{name}")), m);
            check_var_name(name, scope).map_err(bad)?;
            let (text, pick, optional) = match capture {
                RawCapture::Pointer(text) => (text, None, false),
                RawCapture::Long {
                    pointer,
                    pick,
                    optional,
                } => (pointer, pick.as_deref(), optional.unwrap_or(false)),
            };
            let pointer = Pointer::parse(text).map_err(bad)?;
            let pick = match pick {
                Some(text) => Pick::parse(text).ok_or_else(|| {
                    bad(format!(
                        "pick `{text}`: expected \"first\", \"random\" or \"all\""
                    ))
                })?,
                // `*` is any element: one drawn by the run's seed.
                None if pointer.has_any() => Pick::Random,
                None => Pick::First,
            };
            if optional && pick != Pick::All {
                return Err(bad(
                    "optional = true goes with pick = \"all\": nothing found is then an empty list, and a for_each over it sends nothing".into(),
                ));
            }
            let slot = slots.iter().position(|s| s == name).unwrap_or_else(|| {
                slots.push(name.clone());
                slots.len() - 1
            });
            captures.push(Capture {
                name: name.clone(),
                slot,
                pointer,
                pick,
                optional,
            });
        }
        Ok(captures)
    }
}

/// An `expect` (or `until`) whose `equals` may read the flow's variables.
fn check(
    at: &Locator,
    span: Range<usize>,
    raw: &RawExpect,
    key: &str,
    scope: &Scope,
    uses: &mut Vec<usize>,
) -> Result<Check, ScenarioError> {
    if let Some(pointer) = &raw.pointer {
        Pointer::parse(pointer)
            .map_err(|m| at.error(Some(span.clone()), Some(&format!("{key}.pointer")), m))?;
    }
    let expect = expectation(at, &Spanned::new(span.clone(), clone_expect(raw)), key)?;
    let equals = match &raw.equals {
        Some(value) if value.to_string().contains("${") => {
            let template = Template::compile(value, scope)
                .map_err(|m| at.error(Some(span), Some(&format!("{key}.equals")), m))?;
            uses.extend(template.vars_used());
            Some(Arc::new(template))
        }
        _ => None,
    };
    Ok(Check { expect, equals })
}

fn clone_expect(raw: &RawExpect) -> RawExpect {
    RawExpect {
        result: raw.result.clone(),
        json_type: raw.json_type.clone(),
        pointer: raw.pointer.clone(),
        regex: raw.regex.clone(),
        equals: raw.equals.clone(),
        error: raw.error.clone(),
    }
}

/// A variable's name: a word `${...}` can read, not a word the
/// expression language has, and not a polled value's.
fn check_var_name(name: &str, scope: &Scope) -> Result<(), String> {
    let word = name.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_alphanumeric() || c == '_');
    if !word {
        return Err(format!(
            "`{name}` cannot be read as ${{{name}}}: a name is letters, digits and `_`, not starting with a digit"
        ));
    }
    if matches!(name, "true" | "false" | "null") {
        return Err(format!("`{name}` is a JSON literal: choose another name"));
    }
    if scope.polled.index(name).is_some() {
        return Err(format!(
            "`{name}` is a [poll.{name}] already: choose another name"
        ));
    }
    Ok(())
}
