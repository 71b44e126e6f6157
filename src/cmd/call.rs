//! `volley call TARGET METHOD [PARAMS]`: one call, its answer printed
//! pretty with the JSON pointers of its result, so a flow's `capture` and an
//! `expect`'s `pointer` are written from what the server really answers.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;

use super::execute::{builtin_server, prepare, RunError};
use crate::cli::CallArgs;
use crate::engine::Answered;
use crate::plan::CallTemplate;
use crate::scenario::{parse_header, JwtFile, Scenario, TargetSpec};
use crate::stats::Outcome;

/// Exit status when the answer came but is not a right one.
const EXIT_NOT_OK: u8 = 2;
/// Pointers listed at most: enough to find a member in a block, few
/// enough to read.
const MOST_POINTERS: usize = 60;
/// Elements of an array listed member by member: the first stands for the
/// others, which `*` names together.
const ELEMENTS_SHOWN: usize = 1;

pub fn command(args: CallArgs) -> anyhow::Result<ExitCode> {
    let params = params(args.params.as_deref())?;
    let scenario = scenario(&args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let answered = runtime.block_on(call(&scenario, &args, params.as_ref()))?;
    print!("{}", render(&args, &answered));
    Ok(match answered.outcome {
        Outcome::Ok => ExitCode::SUCCESS,
        _ => ExitCode::from(EXIT_NOT_OK),
    })
}

/// PARAMS as JSON, which must be an array or an object.
fn params(text: Option<&str>) -> anyhow::Result<Option<Value>> {
    let Some(text) = text else { return Ok(None) };
    let value: Value = serde_json::from_str(text).map_err(|e| anyhow::anyhow!("PARAMS is not JSON: {e}"))?;
    match value {
        Value::Array(_) | Value::Object(_) => Ok(Some(value)),
        _ => anyhow::bail!("PARAMS must be a JSON array (by position) or object (by name)"),
    }
}

/// The scenario the call is made under: the file's (its target replaced
/// unless TARGET is `-`), else one made of TARGET; the flags' headers and
/// TLS settings on top.
fn scenario(args: &CallArgs) -> anyhow::Result<Scenario> {
    let mut scenario = match (&args.scenario, args.target.as_str()) {
        (Some(file), "-") => Scenario::load_targeting(file, None)?,
        (Some(file), target) => Scenario::load_targeting(file, Some(target))?,
        (None, "-") => anyhow::bail!("TARGET `-` names the --scenario's target, and no --scenario is given"),
        (None, target) => Scenario::one_liner(target, &args.method, None),
    };
    let connection = &args.connection;
    for header in &connection.headers {
        let (name, value) = parse_header(header)?;
        scenario.set_header(name, value);
    }
    if let Some(path) = &connection.jwt_secret {
        let jwt = JwtFile::read(path).map_err(|m| anyhow::anyhow!("--jwt-secret: {m}"))?;
        scenario.jwt_secret = Some(jwt);
    }
    scenario
        .check_jwt()
        .map_err(|m| anyhow::anyhow!("--jwt-secret: {m}"))?;
    scenario.http2 |= connection.http2;
    scenario.tls.insecure |= connection.insecure;
    if let Some(cacert) = &connection.cacert {
        scenario.tls.cacert = Some(cacert.clone());
    }
    crate::tls::check_files(&scenario.tls).map_err(|(_, m)| anyhow::anyhow!("--cacert: {m}"))?;
    Ok(scenario)
}

/// Reaches the target (starting the built-in server if it is the one) and
/// makes the call.
async fn call(scenario: &Scenario, args: &CallArgs, params: Option<&Value>) -> anyhow::Result<Answered> {
    let server = builtin_server(scenario)?;
    let url = match (&scenario.target, &server) {
        (TargetSpec::Builtin, Some(server)) => server.url(),
        (target, _) => target.as_given(),
    };
    let (target, _) = prepare(scenario, &url, &[], args.timeout)
        .await
        .map_err(|e: RunError| anyhow::anyhow!(e))?;
    let template = CallTemplate::new(scenario.version, &args.method, params);
    let setup = scenario.compile().setup;
    crate::engine::call_by_hand(&target, &setup, &template, args.notification, args.timeout)
        .await
        .map_err(anyhow::Error::msg)
}

/// What came back: a line of what it was, the answer pretty, then the
/// pointers into its result.
fn render(args: &CallArgs, answered: &Answered) -> String {
    let mut out = format!(
        "{} on {}: {} in {:.3} ms ({} bytes{})\n\n",
        args.method,
        crate::redact::url(&args.target),
        answered.outcome,
        answered.took.as_secs_f64() * 1e3,
        answered.body.len(),
        match answered.status {
            200 => String::new(),
            status => format!(", HTTP {status}"),
        }
    );
    let parsed: Option<Value> = serde_json::from_slice(&answered.body).ok();
    match &parsed {
        Some(value) => {
            let pretty = serde_json::to_string_pretty(value).expect("a JSON value always serializes");
            let _ = writeln!(out, "{pretty}");
        }
        None if answered.body.is_empty() => out.push_str("(no answer body)\n"),
        None => {
            let _ = writeln!(out, "(not JSON) {}", crate::stats::excerpt(&answered.body));
        }
    }
    match parsed.as_ref().and_then(|v| v.get("result")) {
        Some(result) => {
            out.push_str("\npointers into the result (for `capture` and `expect`'s `pointer`):\n");
            out.push_str(&pointer_lines(result));
        }
        None if parsed.is_some() => out.push_str("\nno `result` to point into\n"),
        None => {}
    }
    out
}

/// Each pointer into `result` and what it holds, a line each.
fn pointer_lines(result: &Value) -> String {
    let mut found = Vec::new();
    pointers(result, String::new(), &mut found);
    let width = found.iter().map(|(p, _)| p.len()).max().unwrap_or(0).clamp(2, 40);
    let mut out = String::new();
    for (pointer, what) in found.iter().take(MOST_POINTERS) {
        let shown = if pointer.is_empty() { "\"\"" } else { pointer };
        let _ = writeln!(out, "  {shown:<width$}  {what}");
    }
    if found.len() > MOST_POINTERS {
        let _ = writeln!(out, "  ({} more)", found.len() - MOST_POINTERS);
    }
    out
}

/// The pointers below `at` (RFC 6901: `~` as `~0`, `/` as `~1`), with a
/// short account of each value; an array's first elements one by one, and
/// `*` (a flow's "any element") for all of them.
fn pointers(value: &Value, at: String, found: &mut Vec<(String, String)>) {
    match value {
        Value::Object(members) => {
            found.push((
                at.clone(),
                format!("object, {}", crate::stats::count(members.len() as u64, "member")),
            ));
            for (name, member) in members {
                let escaped = name.replace('~', "~0").replace('/', "~1");
                pointers(member, format!("{at}/{escaped}"), found);
            }
        }
        Value::Array(elements) => {
            found.push((
                at.clone(),
                format!("array, {}", crate::stats::count(elements.len() as u64, "element")),
            ));
            if elements.len() > 1 {
                found.push((
                    format!("{at}/*"),
                    format!("any of the {} elements", elements.len()),
                ));
            }
            for (i, element) in elements.iter().enumerate().take(ELEMENTS_SHOWN) {
                pointers(element, format!("{at}/{i}"), found);
            }
        }
        scalar => {
            let text = scalar.to_string();
            let shown = match text.char_indices().nth(60) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None => text,
            };
            found.push((at, shown));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_name_every_member_escaped_and_any_element_as_a_star() {
        let result = json!({"number": "0x1", "a/b~c": 1, "transactions": ["0xa", "0xb", "0xc", "0xd"]});
        let mut found = Vec::new();
        pointers(&result, String::new(), &mut found);
        let names: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "",
                "/a~1b~0c",
                "/number",
                "/transactions",
                "/transactions/*",
                "/transactions/0"
            ]
        );
        assert_eq!(found[0].1, "object, 3 members");
        assert_eq!(found[2].1, "\"0x1\"");
        assert_eq!(found[3].1, "array, 4 elements");
        assert_eq!(found[4].1, "any of the 4 elements");
        // Each pointer finds what it names (serde_json reads RFC 6901).
        for (pointer, _) in found.iter().filter(|(p, _)| !p.ends_with('*')) {
            assert!(result.pointer(pointer).is_some(), "{pointer}");
        }
    }

    #[test]
    fn params_are_an_array_or_an_object() {
        assert_eq!(params(Some("[1, 2]")).unwrap(), Some(json!([1, 2])));
        assert_eq!(params(Some("{\"a\": 1}")).unwrap(), Some(json!({"a": 1})));
        assert!(params(Some("7")).unwrap_err().to_string().contains("array"));
        assert!(params(Some("[1,")).unwrap_err().to_string().contains("not JSON"));
        assert_eq!(params(None).unwrap(), None);
    }
}
