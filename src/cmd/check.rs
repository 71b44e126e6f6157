//! `volley check TARGET`: the endpoint probed case by case against the
//! JSON-RPC 2.0 specification; a table (or JSON) of what held, with the
//! evidence for what did not.

use std::collections::BTreeSet;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use crate::check::{self, Finding};
use crate::cli::CheckArgs;
use crate::transport::{Options, Target};

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
    cases: &'a [Finding],
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
    let options = options(&args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let local = tokio::task::LocalSet::new();
    let (target, answers) = local.block_on(&runtime, async {
        let target = Target::resolve(&args.target, &options).await?;
        target.check_reachable(args.timeout).await?;
        let answers = check::probe(&target, &args.method, args.timeout, args.quiet_for).await;
        anyhow::Ok((target, answers))
    })?;
    let findings: Vec<Finding> = check::CASES
        .iter()
        .zip(&answers)
        .map(|(case, answer)| check::judge(case, &args.method, answer, &expected))
        .collect();
    let report = Report {
        target: &args.target,
        transport: target.transport_name(),
        method: &args.method,
        jsonrpc_1_0: answers[0].as_ref().is_ok_and(check::speaks_version_1),
        passed: !findings.iter().any(|f| f.verdict.fails()),
        cases: &findings,
    };
    crate::output::print(&render(&report, args.json));
    Ok(match report.passed {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(EXIT_FAILED),
    })
}

/// How to reach the target, from the flags.
fn options(args: &CheckArgs) -> anyhow::Result<Options> {
    let headers = args
        .headers
        .iter()
        .map(|h| crate::scenario::parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    let tls = crate::tls::TlsOptions {
        cacert: args.cacert.clone(),
        insecure: args.insecure,
        ..Default::default()
    };
    crate::tls::check_files(&tls).map_err(|(_, m)| anyhow::anyhow!("--cacert: {m}"))?;
    Ok(Options {
        headers,
        max_response: crate::transport::DEFAULT_MAX_RESPONSE_BYTES,
        http2: args.http2,
        tls,
        server_answers: Default::default(),
    })
}

fn render(report: &Report, json: bool) -> String {
    if json {
        let mut out = serde_json::to_string_pretty(report).expect("the findings are plain data");
        out.push('\n');
        return out;
    }
    let mut out = format!(
        "volley check {} ({}) · method {}\n\n",
        report.target, report.transport, report.method
    );
    out.push_str(&check::table(report.cases));
    if report.jsonrpc_1_0 {
        out.push_str(
            "\nThe server answers as JSON-RPC 1.0 (no `jsonrpc` member): the 2.0 cases fail for that. Load-test it with --jsonrpc 1.0.\n",
        );
    }
    out
}
