//! `volley check`: an endpoint probed against the JSON-RPC 2.0
//! specification, one case per rule, each with its evidence (the request
//! sent, the answer received). A failed MUST fails the check; a failed
//! SHOULD warns. Known failures can be listed in a file, as conformance
//! suites do: listed and failing passes, listed and passing is a stale entry.

mod cases;
mod support;

pub use cases::{Case, CASES};
pub use support::{probe_methods, read_methods, Support};

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use crate::transport::{Connection, Reply, Target};

/// How binding a case's rule is, in the specification's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Must,
    Should,
}

/// What a probe brought back: the HTTP status where there is one, and the
/// body (empty: nothing came).
#[derive(Clone, Debug, Default)]
pub struct Answer {
    pub status: Option<u16>,
    pub body: Vec<u8>,
}

/// What became of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Conformance {
    Pass,
    /// A MUST broken, and not listed as expected.
    Fail,
    /// A SHOULD broken, not listed as expected.
    Warn,
    /// Broken, and listed as expected to be.
    ExpectedFailure,
    /// Listed as expected to fail, but passed: the list is out of date.
    Stale,
}

impl Conformance {
    pub fn name(self) -> &'static str {
        match self {
            Conformance::Pass => "pass",
            Conformance::Fail => "FAIL",
            Conformance::Warn => "warn",
            Conformance::ExpectedFailure => "expected failure",
            Conformance::Stale => "STALE (listed, passes)",
        }
    }

    /// Fails the check (exit 2).
    pub fn fails(self) -> bool {
        matches!(self, Conformance::Fail | Conformance::Stale)
    }
}

/// A case's outcome and its evidence.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub case: &'static str,
    pub level: Level,
    pub rule: &'static str,
    pub verdict: Conformance,
    /// Why the rule was broken.
    pub reason: Option<String>,
    /// The request sent and the answer received, cut to a readable size.
    pub sent: String,
    pub received: String,
}

/// Judges each case's answer (or the transport's failure) into a finding.
pub fn judge(
    case: &Case,
    method: &str,
    answer: &Result<Answer, String>,
    expected: &BTreeSet<String>,
) -> Finding {
    let broken = match answer {
        Ok(answer) => (case.judge)(answer).err(),
        Err(failure) => Some(failure.clone()),
    };
    let listed = expected.contains(case.name);
    let verdict = match (broken.is_some(), listed, case.level) {
        (false, false, _) => Conformance::Pass,
        (false, true, _) => Conformance::Stale,
        (true, true, _) => Conformance::ExpectedFailure,
        (true, false, Level::Must) => Conformance::Fail,
        (true, false, Level::Should) => Conformance::Warn,
    };
    Finding {
        case: case.name,
        level: case.level,
        rule: case.rule,
        verdict,
        reason: broken,
        sent: crate::stats::excerpt(&(case.request)(method)),
        received: match answer {
            Ok(Answer { status, body }) if body.is_empty() => {
                status.map_or("nothing".into(), |s| format!("HTTP {s}, empty body"))
            }
            Ok(Answer {
                status: Some(s),
                body,
            }) => format!("HTTP {s}: {}", crate::stats::excerpt(body)),
            Ok(Answer { status: None, body }) => crate::stats::excerpt(body),
            Err(_) => "the transport failed".into(),
        },
    }
}

/// Sends every case's request to `target`, one at a time on one
/// connection (opened again when the server closed it), and returns what
/// came back for each, or why nothing could. An answer is awaited up to
/// `timeout`; where nothing must come, a stream is listened to for `quiet`.
pub async fn probe(
    target: &Target,
    method: &str,
    timeout: Duration,
    quiet: Duration,
) -> Vec<Result<Answer, String>> {
    let mut prober = Prober::new(target, timeout);
    let mut answers = Vec::new();
    for case in CASES {
        let within = if case.silent { quiet } else { timeout };
        let answer = prober.send((case.request)(method), within).await;
        answers.push(answer.map(|reply| match reply {
            Some(reply) if matches!(target, Target::Http(_)) => Answer {
                status: Some(reply.status),
                body: reply.body.to_vec(),
            },
            Some(reply) => Answer {
                status: None,
                body: reply.body.to_vec(),
            },
            None => Answer::default(),
        }));
    }
    answers
}

/// One connection to a target for a series of probes, opened again when
/// the server closed it (as servers may after an invalid request).
struct Prober<'a> {
    target: &'a Target,
    timeout: Duration,
    connection: Option<Connection>,
}

impl<'a> Prober<'a> {
    fn new(target: &'a Target, timeout: Duration) -> Self {
        Prober {
            target,
            timeout,
            connection: None,
        }
    }

    /// Sends `body` as it is and returns what came back within `within`.
    async fn send(&mut self, body: Vec<u8>, within: Duration) -> Result<Option<Reply>, String> {
        let mut connection = match self.connection.take() {
            Some(c) if !c.is_closed() => c,
            _ => Connection::open(self.target, self.timeout)
                .await
                .map_err(|e| e.to_string())?,
        };
        let probed = connection.probe(body.into(), within).await;
        self.connection = Some(connection);
        probed.map_err(|e| e.to_string())
    }
}

/// Whether the answer to a plain call looks like JSON-RPC 1.0's: no
/// `jsonrpc` member, the id echoed, `result` or `error` there.
pub fn speaks_version_1(answer: &Answer) -> bool {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(&answer.body) else {
        return false;
    };
    !object.contains_key("jsonrpc")
        && object.get("id") == Some(&json!(7))
        && (object.contains_key("result") || object.contains_key("error"))
}

/// The case names listed in an expected-failures file: one a line, `#`
/// comments and blank lines skipped. An unknown name is an error naming
/// its line, so a typo cannot hide a failure.
pub fn read_expected(path: &Path, text: &str) -> Result<BTreeSet<String>, String> {
    let known: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    let mut listed = BTreeSet::new();
    for (index, line) in text.lines().enumerate() {
        let name = line.split('#').next().unwrap_or("").trim();
        if name.is_empty() {
            continue;
        }
        if !known.contains(&name) {
            return Err(format!(
                "{}:{}: `{name}` is not a case of volley check (cases: {})",
                path.display(),
                index + 1,
                known.join(", ")
            ));
        }
        listed.insert(name.to_string());
    }
    Ok(listed)
}

/// The findings as a table, each broken rule followed by its evidence.
pub fn table(findings: &[Finding]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:<26} {:<7} verdict", "case", "level");
    for f in findings {
        let level = match f.level {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
        };
        let _ = writeln!(out, "{:<26} {:<7} {}", f.case, level, f.verdict.name());
        if f.verdict != Conformance::Pass {
            let _ = writeln!(out, "    rule:     {}", f.rule);
            if let Some(reason) = &f.reason {
                let _ = writeln!(out, "    why:      {reason}");
            }
            let _ = writeln!(out, "    sent:     {}", f.sent);
            let _ = writeln!(out, "    received: {}", f.received);
        }
    }
    let count = |v: Conformance| findings.iter().filter(|f| f.verdict == v).count();
    let _ = writeln!(
        out,
        "\n{} passed, {} failed, {} warnings, {} expected failures, {} stale",
        count(Conformance::Pass),
        count(Conformance::Fail),
        count(Conformance::Warn),
        count(Conformance::ExpectedFailure),
        count(Conformance::Stale)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::cases::tests::{answer, case};
    use super::*;

    #[test]
    fn listed_failures_pass_and_listed_passes_are_stale() {
        let expected = BTreeSet::from(["notification".to_string(), "number_id".to_string()]);
        let right = Ok(answer(r#"{"jsonrpc":"2.0","result":1,"id":7}"#));
        let wrong = Ok(answer(r#"{"jsonrpc":"2.0","result":1,"id":8}"#));
        let verdict = |name: &str, a: &Result<Answer, String>, e: &BTreeSet<String>| {
            judge(case(name), "m", a, e).verdict
        };
        assert_eq!(verdict("number_id", &right, &BTreeSet::new()), Conformance::Pass);
        assert_eq!(verdict("number_id", &wrong, &BTreeSet::new()), Conformance::Fail);
        assert_eq!(
            verdict("number_id", &wrong, &expected),
            Conformance::ExpectedFailure
        );
        assert_eq!(verdict("number_id", &right, &expected), Conformance::Stale);
        assert_eq!(
            verdict("large_payload", &wrong, &BTreeSet::new()),
            Conformance::Warn
        );
        assert_eq!(
            verdict("large_payload", &Err("reset".into()), &BTreeSet::new()),
            Conformance::Warn
        );
        assert!(Conformance::Stale.fails() && Conformance::Fail.fails());
        assert!(!Conformance::Warn.fails() && !Conformance::ExpectedFailure.fails());
    }

    #[test]
    fn an_expected_failures_file_names_known_cases_only() {
        let path = Path::new("known.txt");
        let listed = read_expected(path, "# known\nnotification  # answers them\n\nempty_batch\n").unwrap();
        assert_eq!(
            listed,
            BTreeSet::from(["notification".into(), "empty_batch".into()])
        );
        let error = read_expected(path, "notification\nnotifications\n").unwrap_err();
        assert!(
            error.starts_with("known.txt:2: `notifications` is not a case"),
            "{error}"
        );
    }

    #[test]
    fn a_1_0_answer_is_recognised() {
        assert!(speaks_version_1(&answer(r#"{"result":1,"error":null,"id":7}"#)));
        assert!(!speaks_version_1(&answer(
            r#"{"jsonrpc":"2.0","result":1,"id":7}"#
        )));
        assert!(!speaks_version_1(&answer(r#"{"result":1,"id":8}"#)));
    }
}
