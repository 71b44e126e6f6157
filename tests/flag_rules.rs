//! Flags against a scenario file, as a new user met them: a flag replaces
//! what it names, a conflict names both, and a one-liner's params are
//! generated as a file's are.

mod common;

use std::path::Path;
use std::time::Duration;

use common::bin::{temp_dir, text};
use rand::SeedableRng;
use volley::plan::Pacing;
use volley::scenario::{Overrides, Scenario, ScenarioError, TargetSpec};

fn flags(file: Option<&str>, set: impl FnOnce(&mut Overrides)) -> Result<Scenario, ScenarioError> {
    let mut overrides = Overrides::default();
    set(&mut overrides);
    let path = file.map(|f| Path::new(env!("CARGO_MANIFEST_DIR")).join(f));
    Scenario::with_flags(path.as_deref(), &overrides)
}

fn flag_error(result: Result<Scenario, ScenarioError>) -> String {
    result.expect_err("the flags are refused").to_string()
}

#[test]
fn duration_against_a_staged_file_is_a_conflict_that_names_both() {
    let error = flag_error(flags(Some("scenarios/ethereum-batch.toml"), |f| {
        f.duration = Some(Duration::from_secs(8))
    }));
    assert!(error.starts_with("--duration"), "{error}");
    assert!(
        error.contains("load.stages") && error.contains("ethereum-batch.toml"),
        "{error}"
    );
    // With the stages replaced, the duration holds.
    let scenario = flags(Some("scenarios/ethereum-batch.toml"), |f| {
        f.duration = Some(Duration::from_secs(8));
        f.rate = Some(50.0);
    })
    .unwrap();
    let plan = scenario.compile().plan;
    assert_eq!(plan.duration, Some(Duration::from_secs(8)));
    assert!(plan.stages.is_empty());
}

#[test]
fn concurrency_replaces_a_staged_rate_instead_of_reading_its_rates_as_concurrency() {
    // The file's 32 connections cannot carry 4 calls: the rule names both.
    let error = flag_error(flags(Some("scenarios/ethereum-batch.toml"), |f| {
        f.concurrency = Some(4)
    }));
    assert!(
        error.contains("--concurrency 4") && error.contains("load.connections = 32"),
        "{error}"
    );
    let scenario = flags(Some("scenarios/ethereum-batch.toml"), |f| {
        f.concurrency = Some(4);
        f.connections = Some(4);
    })
    .unwrap();
    let plan = scenario.compile().plan;
    assert_eq!(plan.pacing, Pacing::Closed);
    assert!(plan.stages.is_empty(), "{:?}", plan.stages);
    assert_eq!(plan.connections * plan.per_connection, 4);
}

#[test]
fn requests_replace_the_files_duration_and_duration_its_requests() {
    let plan = flags(Some("scenarios/demo.toml"), |f| f.requests = Some(2000))
        .unwrap()
        .compile()
        .plan;
    assert_eq!((plan.requests, plan.duration), (Some(2000), None));
    let dir = temp_dir("requests-file");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("n.toml");
    std::fs::write(
        &file,
        "target = \"builtin\"\n[load]\nrequests = 10\n[[calls]]\nmethod = \"m\"\n",
    )
    .unwrap();
    let overrides = Overrides {
        duration: Some(Duration::from_secs(3)),
        ..Overrides::default()
    };
    let plan = Scenario::with_flags(Some(&file), &overrides)
        .unwrap()
        .compile()
        .plan;
    assert_eq!(
        (plan.requests, plan.duration),
        (None, Some(Duration::from_secs(3)))
    );
}

#[test]
fn params_with_a_file_are_checked_and_applied_or_refused_by_name() {
    let error = flag_error(flags(Some("scenarios/demo.toml"), |f| {
        f.params = Some("not json".into())
    }));
    assert!(error.starts_with("--params: not JSON"), "{error}");
    let error = flag_error(flags(Some("scenarios/demo.toml"), |f| {
        f.params = Some("[1]".into())
    }));
    assert!(error.contains("say which with --method"), "{error}");
    let scenario = flags(Some("scenarios/demo.toml"), |f| {
        f.method = Some("add".into());
        f.params = Some("[40, 2]".into());
    })
    .unwrap();
    assert_eq!(scenario.calls.len(), 1);
    assert_eq!(
        first_body(&scenario),
        r#"{"jsonrpc":"2.0","method":"add","params":[40,2],"id":1}"#
    );
}

#[test]
fn a_file_without_a_target_takes_the_target_flag() {
    let dir = temp_dir("no-target");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("t.toml");
    std::fs::write(&file, "[[calls]]\nmethod = \"eth_chainId\"\n").unwrap();
    let error = Scenario::with_flags(Some(&file), &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("a target is needed"), "{error}");
    let overrides = Overrides {
        target: Some("http://127.0.0.1:8545".into()),
        ..Overrides::default()
    };
    let scenario = Scenario::with_flags(Some(&file), &overrides).unwrap();
    assert_eq!(scenario.target, TargetSpec::Url("http://127.0.0.1:8545".into()));
}

#[test]
fn the_target_flag_on_an_lsp_command_is_a_conflict_that_names_both() {
    let error = flag_error(flags(Some("scenarios/lsp-stdio.toml"), |f| {
        f.target = Some("tcp://127.0.0.1:2087".into());
    }));
    assert!(
        error.contains("key `framing`: --target tcp://127.0.0.1:2087 cannot replace this `command`"),
        "{error}"
    );
    // NDJSON is what a TCP target speaks: an MCP command is replaced.
    let scenario = flags(Some("scenarios/mcp-stdio.toml"), |f| {
        f.target = Some("tcp://127.0.0.1:2087".into());
    })
    .unwrap();
    assert_eq!(scenario.target, TargetSpec::Url("tcp://127.0.0.1:2087".into()));
}

#[test]
fn more_connections_than_calls_in_flight_is_a_conflict_that_names_both() {
    let error = flag_error(flags(None, |f| {
        f.target = Some("http://127.0.0.1:1".into());
        f.method = Some("m".into());
        f.concurrency = Some(2);
        f.connections = Some(8);
    }));
    assert!(
        error.contains("--connections 8") && error.contains("--concurrency 2"),
        "{error}"
    );
    let error = flag_error(flags(Some("scenarios/demo.toml"), |f| f.connections = Some(500)));
    assert!(
        error.contains("--connections 500") && error.contains("load.concurrency = 32"),
        "{error}"
    );
}

/// The first request the scenario would send, as bytes.
fn first_body(scenario: &Scenario) -> String {
    let compiled = scenario.compile();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let mut planned = Vec::new();
    let Some(volley::plan::Next::Request { batch }) = compiled.mix.next(0, &mut rng, &mut planned) else {
        panic!("a request, not a flow");
    };
    let mut builder = volley::plan::RequestBuilder::default();
    let body = compiled.mix.write(&mut builder, &planned, batch, 1, &mut rng);
    text(&body)
}

#[test]
fn one_liner_params_generate_values_as_a_file_does() {
    let scenario = flags(None, |f| {
        f.target = Some("builtin".into());
        f.method = Some("add".into());
        f.params = Some(r#"["${int(7, 7)}", "block-${seq(5)}"]"#.into());
    })
    .unwrap();
    assert_eq!(
        first_body(&scenario),
        r#"{"jsonrpc":"2.0","method":"add","params":[7,"block-5"],"id":1}"#
    );
    let error = flag_error(flags(None, |f| {
        f.target = Some("builtin".into());
        f.method = Some("add".into());
        f.params = Some(r#"["${nope()}"]"#.into());
    }));
    assert!(error.starts_with("--params"), "{error}");
}

#[test]
fn an_upper_case_scheme_is_a_scheme() {
    assert_eq!(
        TargetSpec::parse("HTTP://127.0.0.1:8545/rpc"),
        TargetSpec::Url("http://127.0.0.1:8545/rpc".into())
    );
    let scenario = flags(None, |f| {
        f.target = Some("WS://127.0.0.1:1".into());
        f.method = Some("m".into());
    })
    .unwrap();
    assert_eq!(scenario.target, TargetSpec::Url("ws://127.0.0.1:1".into()));
}
