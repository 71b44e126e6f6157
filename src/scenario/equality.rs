//! `[equality]` (and `--check-equal`): which answers of several targets are
//! compared, and the rules that say when two answers are the same.

use serde::Deserialize;
use toml::Spanned;

use super::error::{Locator, ScenarioError};

mod ignore_sets;
pub use ignore_sets::{IgnoreSet, IGNORE_SETS};

/// Comparing the targets' answers to the same requests.
#[derive(Clone, Debug, PartialEq)]
pub struct Equality {
    /// Share of requests compared (0 to 1).
    pub sample: f64,
    /// Read the head block from the first target once, and send it where a
    /// param says `"latest"`, so every target answers about the same block.
    pub pin_block: bool,
    pub rules: Vec<EqualityRule>,
    /// Named sets of pointers whose values are left out (`ignore_sets`).
    pub ignore_sets: Vec<&'static IgnoreSet>,
}

impl Equality {
    /// Compares every answer, by no rule and no set, on `sample` of them.
    pub fn sampled(sample: f64) -> Equality {
        Equality {
            sample,
            pin_block: false,
            rules: Vec::new(),
            ignore_sets: Vec::new(),
        }
    }

    /// The rules answers are compared by: the sets' first, so a rule of
    /// the file's own at the same pointer (the last that matches) wins.
    pub fn all_rules(&self) -> Vec<EqualityRule> {
        let sets = self.ignore_sets.iter().flat_map(|s| s.rules());
        sets.chain(self.rules.iter().cloned()).collect()
    }
}

pub use crate::rpc::same::{glob, pointer_matches, EqualityRule, RuleKind};

/// The share compared when none is given.
pub const DEFAULT_SAMPLE: f64 = 0.01;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEquality {
    sample: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pin_block: bool,
    #[serde(default)]
    rules: Vec<Spanned<RawRule>>,
    #[serde(default)]
    ignore_sets: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    method: Option<String>,
    pointer: Option<String>,
    rule: String,
    tolerance: Option<f64>,
}

/// `1%` or `0.01`: a share from 0 (exclusive) to 1.
pub fn parse_share(text: &str) -> Result<f64, String> {
    let (number, scale) = match text.trim().strip_suffix('%') {
        Some(percent) => (percent, 100.0),
        None => (text.trim(), 1.0),
    };
    let bad = || format!("`{text}` is not a share such as 1% or 0.01");
    let share = number.trim().parse::<f64>().map_err(|_| bad())? / scale;
    match share > 0.0 && share <= 1.0 {
        true => Ok(share),
        false => Err(format!("`{text}` is not a share above 0 and at most 100%")),
    }
}

impl RawEquality {
    pub(super) fn validate(&self, at: &Locator) -> Result<Equality, ScenarioError> {
        let sample = match &self.sample {
            None => DEFAULT_SAMPLE,
            Some(value) => {
                let text = match value.get_ref() {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Float(f) => f.to_string(),
                    toml::Value::Integer(i) => i.to_string(),
                    other => other.to_string(),
                };
                parse_share(&text).map_err(|m| at.error(Some(value.span()), Some("equality.sample"), m))?
            }
        };
        let rules = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, raw)| {
                let key = format!("equality.rules[{i}]");
                raw.get_ref()
                    .validate()
                    .map_err(|m| at.error(Some(raw.span()), Some(&key), m))
            })
            .collect::<Result<_, _>>()?;
        let mut ignore_sets: Vec<&'static IgnoreSet> = Vec::new();
        for (i, name) in self.ignore_sets.iter().enumerate() {
            let key = format!("equality.ignore_sets[{i}]");
            let set =
                IgnoreSet::named(name.get_ref()).map_err(|m| at.error(Some(name.span()), Some(&key), m))?;
            if !ignore_sets.contains(&set) {
                ignore_sets.push(set);
            }
        }
        Ok(Equality {
            sample,
            pin_block: self.pin_block,
            rules,
            ignore_sets,
        })
    }
}

impl RawRule {
    fn validate(&self) -> Result<EqualityRule, String> {
        let kind = match (self.rule.as_str(), self.tolerance) {
            ("ignore", None) => RuleKind::Ignore,
            ("numeric_tolerance", Some(t)) if t.is_finite() && t >= 0.0 => RuleKind::NumericTolerance(t),
            ("numeric_tolerance", _) => return Err("numeric_tolerance needs `tolerance`, a share such as 0.01".into()),
            ("error_code_only", None) => RuleKind::ErrorCodeOnly,
            ("error_presence_only", None) => RuleKind::ErrorPresenceOnly,
            (_, Some(_)) => return Err("`tolerance` goes with rule = \"numeric_tolerance\"".into()),
            (other, None) => {
                return Err(format!(
                    "rule `{other}` is not one of ignore, numeric_tolerance, error_code_only, error_presence_only"
                ))
            }
        };
        let pointer = self.pointer.clone();
        if let Some(p) = &pointer {
            if !p.is_empty() && !p.starts_with('/') {
                return Err(format!("pointer `{p}` is not a JSON pointer: it starts with `/`"));
            }
            if p.split('/').any(|step| step.contains('*') && step != "*") {
                return Err(format!(
                    "pointer `{p}`: `*` stands for a whole step (`/transactions/*/gas`), not part of one"
                ));
            }
            if matches!(kind, RuleKind::ErrorCodeOnly | RuleKind::ErrorPresenceOnly) {
                return Err("the error rules apply to the whole answer: no `pointer`".into());
            }
        }
        Ok(EqualityRule {
            method: self.method.clone().unwrap_or_else(|| "*".into()),
            pointer,
            kind,
        })
    }
}

impl super::Scenario {
    /// Sends `block` wherever a call's params say `"latest"` (`pin_block`),
    /// the params' generators compiled again as the file's were.
    pub fn pin_latest(&mut self, block: &str) -> Result<(), String> {
        fn pin(value: &mut serde_json::Value, block: &str) -> bool {
            match value {
                serde_json::Value::String(s) if s == "latest" => {
                    *s = block.to_string();
                    true
                }
                // Every value visited, no short cut: each "latest" is pinned.
                serde_json::Value::Array(items) => {
                    items.iter_mut().map(|v| pin(v, block)).filter(|p| *p).count() > 0
                }
                serde_json::Value::Object(map) => {
                    map.values_mut().map(|v| pin(v, block)).filter(|p| *p).count() > 0
                }
                _ => false,
            }
        }
        let base_dir = self
            .file
            .as_deref()
            .and_then(std::path::Path::parent)
            .unwrap_or(std::path::Path::new("."))
            .to_path_buf();
        let polled = self.polled.clone();
        for call in &mut self.calls {
            let Some(params) = call.params.as_mut() else {
                continue;
            };
            if pin(params, block) {
                let scope = crate::plan::Scope {
                    base_dir: &base_dir,
                    polled: &polled,
                    vars: &[],
                };
                let template = super::Template::compile(params, &scope)?;
                call.template = Some(std::sync::Arc::new(template));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_match_by_glob_and_pointers_step_by_step() {
        assert!(glob("*", "eth_call") && glob("eth_*", "eth_call") && glob("eth_call", "eth_call"));
        assert!(!glob("eth_*", "net_version") && !glob("eth_call", "eth_calls"));
        assert!(glob("*_get*", "eth_getBalance") && !glob("*_get*", "eth_call"));
        assert!(pointer_matches("/transactions/*/gas", "/transactions/3/gas"));
        assert!(!pointer_matches("/transactions/*/gas", "/transactions/3/gas/x"));
        assert!(!pointer_matches("/timestamp", "/number"));
        assert!(pointer_matches("", ""));
    }

    #[test]
    fn pinning_replaces_every_latest_and_keeps_the_generators() {
        let text = r#"target = "http://127.0.0.1:1"
[[calls]]
method = "eth_getBalance"
params = ["0x${hex(20)}", "latest"]
[[calls]]
method = "eth_call"
params = [{ to = "0x1" }, "latest", { block = "latest", other = "earliest" }]
"#;
        let mut scenario = super::super::Scenario::parse(text, "t.toml", "t", &|_| None).unwrap();
        scenario.pin_latest("0x10").unwrap();
        let params: Vec<String> = scenario
            .calls
            .iter()
            .map(|c| c.params.clone().unwrap().to_string())
            .collect();
        assert_eq!(params[0], r#"["0x${hex(20)}","0x10"]"#);
        assert_eq!(
            params[1],
            r#"[{"to":"0x1"},"0x10",{"block":"0x10","other":"earliest"}]"#
        );
        assert!(
            scenario.calls[0].template.is_some(),
            "the generator is compiled again"
        );
    }

    #[test]
    fn shares_are_percent_or_fractions() {
        assert_eq!(parse_share("1%"), Ok(0.01));
        assert_eq!(parse_share("0.25"), Ok(0.25));
        assert_eq!(parse_share("100%"), Ok(1.0));
        assert!(parse_share("0").is_err() && parse_share("150%").is_err() && parse_share("x").is_err());
    }
}
