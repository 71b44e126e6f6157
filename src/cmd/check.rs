//! `volley check TARGET`: the endpoint probed case by case against the
//! JSON-RPC 2.0 specification; a table (or JSON) of what held, with the
//! evidence for what did not.

use std::collections::BTreeSet;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use crate::check::{self, Finding};
use crate::cli::CheckArgs;
use crate::plan::HeaderText;
use crate::transport::{MadeHeader, Options, Target};

/// Exit status when a MUST failed or an expected failure is stale.
const EXIT_FAILED: u8 = 2;

#[derive(Serialize)]
struct Report<'a> {
    target: &'a str,
    transport: &'static str,
    method: &'a str,
    /// The server answered a plain call as JSON-RPC 1.0 does.
    jsonrpc_1_0: bool,
    passed: bool,
    cases: Vec<Finding>,
}

/// Which methods each target has (`--methods`).
#[derive(Serialize)]
struct SupportMatrix<'a> {
    methods: &'a [String],
    /// Per target, how it answered each method, in the order above.
    targets: Vec<(&'a str, Vec<check::Support>)>,
}

#[derive(Serialize)]
struct Document<'a> {
    passed: bool,
    targets: &'a [Report<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    support: Option<SupportMatrix<'a>>,
}

pub fn command(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let expected = match &args.expected_failures {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            check::read_expected(path, &text).map_err(anyhow::Error::msg)?
        }
        None => BTreeSet::new(),
    };
    let methods = match &args.methods {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            Some(check::read_methods(path, &text).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    let options = options(&args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let local = tokio::task::LocalSet::new();
    let mut reports = Vec::new();
    let mut support = Vec::new();
    // Each target as every output shows it: its keys hidden.
    let shown: Vec<String> = args.target.iter().map(|url| crate::redact::url(url)).collect();
    for (url, shown) in args.target.iter().zip(&shown) {
        let (target, answers, methods) = local.block_on(&runtime, async {
            let target = Target::resolve(url, &options).await?;
            target.check_reachable(args.timeout).await?;
            let answers = check::probe(&target, &args.method, args.timeout, args.quiet_for).await;
            let methods = match &methods {
                Some(methods) => check::probe_methods(&target, methods, args.timeout).await,
                None => Vec::new(),
            };
            anyhow::Ok((target, answers, methods))
        })?;
        let cases: Vec<Finding> = check::CASES
            .iter()
            .zip(&answers)
            .map(|(case, answer)| check::judge(case, &args.method, answer, &expected))
            .collect();
        reports.push(Report {
            target: shown,
            transport: target.transport_name(),
            method: &args.method,
            jsonrpc_1_0: answers[0].as_ref().is_ok_and(check::speaks_version_1),
            passed: !cases.iter().any(|f| f.verdict.fails()),
            cases,
        });
        support.push((shown.as_str(), methods));
    }
    let document = Document {
        passed: reports.iter().all(|r| r.passed),
        targets: &reports,
        support: methods.as_deref().map(|methods| SupportMatrix {
            methods,
            targets: support,
        }),
    };
    crate::output::print(&render(&document, args.json));
    Ok(match document.passed {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(EXIT_FAILED),
    })
}

/// How to reach the target, from the flags.
fn options(args: &CheckArgs) -> anyhow::Result<Options> {
    let (mut headers, mut made_headers) = (Vec::new(), Vec::new());
    for header in &args.connection.headers {
        match crate::scenario::parse_header(header)? {
            (name, HeaderText::Fixed(value)) => headers.push((name, value)),
            (name, HeaderText::Made(value)) => made_headers.push(MadeHeader { name, value }),
        }
    }
    if let Some(path) = &args.connection.jwt_secret {
        let jwt = crate::scenario::JwtFile::read(path).map_err(|m| anyhow::anyhow!("--jwt-secret: {m}"))?;
        made_headers.push(crate::transport::bearer(jwt.secret));
    }
    let tls = crate::tls::TlsOptions {
        cacert: args.connection.cacert.clone(),
        insecure: args.connection.insecure,
        ..Default::default()
    };
    crate::tls::check_files(&tls).map_err(|(_, m)| anyhow::anyhow!("--cacert: {m}"))?;
    Ok(Options {
        headers,
        made_headers,
        max_response: crate::transport::DEFAULT_MAX_RESPONSE_BYTES,
        http2: args.connection.http2,
        pipeline: 1,
        tls,
        server_answers: Default::default(),
        ready: None,
    })
}

fn render(document: &Document, json: bool) -> String {
    if json {
        let mut out = serde_json::to_string_pretty(document).expect("the findings are plain data");
        out.push('\n');
        return out;
    }
    let mut out = String::new();
    for report in document.targets {
        out.push_str(&format!(
            "volley check {} ({}) · method {}\n\n",
            report.target, report.transport, report.method
        ));
        out.push_str(&check::table(&report.cases));
        if report.jsonrpc_1_0 {
            out.push_str(
                "\nThe server answers as JSON-RPC 1.0 (no `jsonrpc` member): the 2.0 cases fail for that. Load-test it with --jsonrpc 1.0.\n",
            );
        }
        out.push('\n');
    }
    if let Some(matrix) = &document.support {
        out.push_str(&support_table(matrix));
    }
    out
}

/// Methods down, targets across: which target has which method.
fn support_table(matrix: &SupportMatrix) -> String {
    let width = matrix.methods.iter().map(String::len).max().unwrap_or(6).max(6);
    let shown: Vec<Vec<String>> = matrix
        .targets
        .iter()
        .map(|(_, a)| a.iter().map(check::Support::shown).collect())
        .collect();
    let cell = |t: usize| {
        let widest = shown[t].iter().map(|s| s.chars().count()).max().unwrap_or(0);
        widest.max(matrix.targets[t].0.chars().count())
    };
    let mut out = format!("{:<width$}", "method");
    for (t, (target, _)) in matrix.targets.iter().enumerate() {
        out.push_str(&format!("  {target:<w$}", w = cell(t)));
    }
    out.push('\n');
    for (i, method) in matrix.methods.iter().enumerate() {
        out.push_str(&format!("{method:<width$}"));
        for (t, cells) in shown.iter().enumerate() {
            out.push_str(&format!("  {:<w$}", cells[i], w = cell(t)));
        }
        out.push('\n');
    }
    out
}
