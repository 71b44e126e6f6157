use super::*;

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(text, "test.toml", "test", &|name| {
        (name == "TOKEN").then(|| "s3cret".to_string())
    })
}

fn located(text: &str) -> Located {
    match parse(text) {
        Err(ScenarioError::Invalid(located)) => located,
        other => panic!("expected a located error, got {other:?}"),
    }
}

const MINIMAL: &str = "target = \"builtin\"\n[[calls]]\nmethod = \"eth_chainId\"\n";

#[test]
fn a_minimal_file_gets_defaults() {
    let scenario = parse(MINIMAL).unwrap();
    assert_eq!(scenario.name, "test");
    assert_eq!(scenario.target, TargetSpec::Builtin);
    assert_eq!(scenario.timeout, DEFAULT_TIMEOUT);
    assert_eq!(scenario.load.pacing, Pacing::Closed);
    assert_eq!(scenario.calls[0].weight, 1);
    assert_eq!(scenario.calls[0].params, None);
}

#[test]
fn every_key_is_read() {
    let text = r#"
name = "full"
target = "http://127.0.0.1:8545/rpc"
timeout = "2s"
seed = 9
[headers]
Authorization = "Bearer ${TOKEN}"
X-Literal = "$${NOT_A_VAR}"
[load]
rate = 250.5
connections = 8
duration = "1m"
requests = 1000
warmup = "500ms"
threads = 2
[[calls]]
method = "eth_getBalance"
weight = 3
params = ["0xab", "latest"]
batch = 4
[[calls]]
method = "log"
params = { level = "info" }
notification = true
"#;
    let s = parse(text).unwrap();
    assert_eq!(s.name, "full");
    assert_eq!(s.target, TargetSpec::Url("http://127.0.0.1:8545/rpc".into()));
    assert_eq!(s.timeout, Duration::from_secs(2));
    assert_eq!(s.seed, Some(9));
    assert_eq!(
        s.headers,
        vec![
            ("Authorization".to_string(), "Bearer s3cret".to_string()),
            ("X-Literal".to_string(), "${NOT_A_VAR}".to_string())
        ]
    );
    assert_eq!(s.load.pacing, Pacing::Open { rate: 250.5 });
    assert_eq!(s.load.connections, Some(8));
    assert_eq!(s.load.duration, Some(Duration::from_secs(60)));
    assert_eq!(s.load.requests, Some(1000));
    assert_eq!(s.load.warmup, Duration::from_millis(500));
    assert_eq!(s.load.threads, Some(2));
    assert_eq!(s.calls[0].batch, Some(crate::plan::BatchSize::Fixed(4)));
    assert_eq!(s.calls[0].params, Some(serde_json::json!(["0xab", "latest"])));
    assert_eq!(s.calls[1].params, Some(serde_json::json!({"level": "info"})));
    assert!(s.calls[1].notification);
}

#[test]
fn an_unknown_key_is_named_with_its_line() {
    let e = located("target = \"builtin\"\n[load]\nconcurency = 4\n[[calls]]\nmethod = \"a\"\n");
    assert_eq!((e.file.as_str(), e.line, e.column), ("test.toml", 3, 1));
    assert_eq!(e.key, "load.concurency");
    assert!(e.message.contains("unknown field `concurency`"), "{}", e.message);
}

#[test]
fn bad_values_name_their_key() {
    let cases = [
        (
            "target = \"builtin\"\n[[calls]]\nmethod = \"a\"\nweight = 0\n",
            4,
            "calls[0].weight",
            "at least 1",
        ),
        (
            "target = \"builtin\"\n[[calls]]\nmethod = \"a\"\n[[calls]]\nmethod = \"b\"\nweight = -2\n",
            6,
            "calls[1].weight",
            "at least 1",
        ),
        (
            "target = \"builtin\"\n[load]\nduration = \"ten\"\n[[calls]]\nmethod = \"a\"\n",
            3,
            "load.duration",
            "not a duration",
        ),
        (
            "target = \"builtin\"\n[load]\nrate = 5\nconcurrency = 2\n[[calls]]\nmethod = \"a\"\n",
            3,
            "load.rate",
            "not both",
        ),
        (
            "target = \"builtin\"\n[load]\nrate = 0\n[[calls]]\nmethod = \"a\"\n",
            3,
            "load.rate",
            "above zero",
        ),
        (
            "target = \"builtin\"\n[[calls]]\nmethod = \"a\"\nparams = 5\n",
            4,
            "calls[0].params",
            "array",
        ),
        (
            "target = \"builtin\"\n[[calls]]\nmethod = \"a\"\nbatch = 0\n",
            4,
            "calls[0].batch",
            "between 1",
        ),
        (
            "target = \"builtin\"\n[headers]\nX-Key = \"${MISSING}\"\n[[calls]]\nmethod = \"a\"\n",
            3,
            "headers.X-Key",
            "`MISSING` is not set",
        ),
        (
            "target = \"builtin\"\n[load]\nconnections = \"many\"\n[[calls]]\nmethod = \"a\"\n",
            3,
            "load.connections",
            "invalid type",
        ),
        (
            "target = \"builtin\"\ncalls = []\n",
            2,
            "calls",
            "at least one call",
        ),
    ];
    for (text, line, key, message) in cases {
        let e = located(text);
        assert_eq!((e.line, e.key.as_str()), (line, key), "{text}");
        assert!(e.message.contains(message), "{text}: {}", e.message);
    }
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let e = Scenario::load(Path::new("/nonexistent/x.toml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot read scenario /nonexistent/x.toml"),
        "{e}"
    );
}

#[test]
fn scenario_language_mistakes_name_their_key() {
    let call = |body: &str| format!("target = \"builtin\"\n[[calls]]\nmethod = \"m\"\n{body}\n");
    let cases = [
        (call("expect = { regex = \"([0-9\" }"), 4, "calls[0].expect", "does not compile"),
        (call("params = [\"${int(9, 1)}\"]"), 4, "calls[0].params", "is empty"),
        (call("params = [\"${file('no-such-file.txt')}\"]"), 4, "calls[0].params", "no-such-file.txt"),
        (call("batch = { min = 5, max = 2 }"), 4, "calls[0].batch", "is empty"),
        (call("batch = \"many\""), 4, "calls[0].batch", "batch size must be a number"),
        (call("expect = { error = -32601, type = \"string\" }"), 4, "calls[0].expect", "not both"),
        (call("expect = { error = true }"), 4, "calls[0].expect", "expect.error must be a code"),
        ("target = \"builtin\"\nreplay = 5\n".to_string(), 2, "replay", "replay must be a file path"),
        (call("notification = true\nexpect = { result = \"any\" }"), 5, "calls[0].expect", "gets no answer"),
        (call("name = \"\""), 4, "calls[0].name", "name is empty"),
        (call("name = \"TOTAL\""), 4, "calls[0].name", "every call together"),
        (call("name = \"flow:x\""), 4, "calls[0].name", "kept for flows"),
        ("target = \"builtin\"\nreplay = \"missing.jsonl\"\n".to_string(), 2, "replay", "cannot read"),
        (
            "target = \"builtin\"\n[load]\nstages = [{ duration = \"1s\", rate = 5 }, { duration = \"1s\", concurrency = 2 }]\n[[calls]]\nmethod = \"m\"\n".to_string(),
            3,
            "load.stages[1]",
            "same model",
        ),
    ];
    for (text, line, key, message) in cases {
        let e = located(&text);
        assert_eq!((e.line, e.key.as_str()), (line, key), "{text}");
        assert!(e.message.contains(message), "{text}: {}", e.message);
    }
}

/// The plan a scenario compiles to, and its warnings.
fn planned(text: &str) -> (crate::plan::LoadPlan, Vec<String>) {
    let compiled = parse(text).unwrap().compile();
    (compiled.plan, compiled.warnings)
}

#[test]
fn connections_and_calls_per_connection_follow_the_transport() {
    let calls = "[[calls]]\nmethod = \"m\"\n";
    // HTTP/1.1: one call a connection.
    let (plan, warnings) = planned(&format!(
        "target = \"http://127.0.0.1:1\"\n[load]\nconcurrency = 8\n{calls}"
    ));
    assert_eq!((plan.connections, plan.per_connection), (8, 1));
    assert!(warnings.is_empty(), "{warnings:?}");
    // A child's stdio is one multiplexed connection, as a socket would be.
    for target in [
        "command = [\"sh\", \"-c\", \"cat\"]",
        "target = \"tcp://127.0.0.1:1\"",
        "target = \"http://127.0.0.1:1\"\nhttp2 = true",
    ] {
        let (plan, _) = planned(&format!("{target}\n[load]\nconcurrency = 8\n{calls}"));
        assert_eq!((plan.connections, plan.per_connection), (1, 8), "{target}");
    }
    // Fewer connections than calls in flight on HTTP/1.1 is said, and only then.
    let (plan, warnings) = planned(&format!(
        "target = \"http://127.0.0.1:1\"\n[load]\nconcurrency = 8\nconnections = 4\n{calls}"
    ));
    assert_eq!(plan.connections, 4);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("4 connections give at most 4 calls in flight, not 8"),
        "{warnings:?}"
    );
    let (_, warnings) = planned(&format!(
        "target = \"http://127.0.0.1:1\"\n[load]\nconcurrency = 8\nconnections = 8\n{calls}"
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    // --max-in-flight is for multiplexed transports: said on HTTP/1.1 alone.
    let (_, warnings) = planned(&format!(
        "target = \"http://127.0.0.1:1\"\n[load]\nconcurrency = 8\nmax_in_flight = 2\n{calls}"
    ));
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("--max-in-flight applies to multiplexed")),
        "{warnings:?}"
    );
    let (plan, warnings) = planned(&format!(
        "target = \"tcp://127.0.0.1:1\"\n[load]\nconcurrency = 8\nmax_in_flight = 2\n{calls}"
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!((plan.connections, plan.per_connection), (4, 2));
    // Without a concurrency, the calls in flight are what the connections carry.
    for (target, load, expected) in [
        ("target = \"tcp://127.0.0.1:1\"", "", (1, 16, 16)),
        (
            "target = \"http://127.0.0.1:1\"",
            "[load]\nconnections = 4\n",
            (4, 1, 4),
        ),
        (
            "target = \"tcp://127.0.0.1:1\"",
            "[load]\nconnections = 2\n",
            (2, 8, 16),
        ),
    ] {
        let (plan, _) = planned(&format!("{target}\n{load}{calls}"));
        let got = (plan.connections, plan.per_connection, plan.initial_concurrency);
        assert_eq!(got, expected, "{target} {load}");
    }
}

#[test]
fn a_calls_name_is_its_row_and_calls_of_one_method_and_no_name_share_one() {
    let text = "target = \"builtin\"\n\
        [[calls]]\nmethod = \"tools/call\"\nname = \"get-sum\"\n\
        [[calls]]\nmethod = \"tools/call\"\nname = \"get-structured\"\n\
        [[calls]]\nmethod = \"ping\"\n[[calls]]\nmethod = \"ping\"\n";
    let mix = parse(text).unwrap().compile().mix;
    assert_eq!(mix.methods, ["get-sum", "get-structured", "ping"]);
    let rows: Vec<u32> = mix.calls.iter().map(|c| c.method).collect();
    assert_eq!(rows, [0, 1, 2, 2]);
}

/// The open model over a multiplexed transport gives each connection the
/// calls in flight its share of `rate × timeout` can need, at most 64, not
/// 64 on every one of thousands.
#[test]
fn open_model_callers_follow_the_rate_and_the_timeout() {
    let per_connection = |load: &str| {
        let text = format!(
            "target = \"ws://127.0.0.1:1\"\ntimeout = \"5s\"\n[load]\n{load}\n[[calls]]\nmethod = \"m\"\n"
        );
        let plan = parse(&text).unwrap().compile().plan;
        (plan.connections, plan.per_connection)
    };
    // 500/s × 5 s = 2,500 in flight at most, over 5,000 connections.
    assert_eq!(per_connection("rate = 500\nconnections = 5000"), (5000, 1));
    assert_eq!(per_connection("rate = 500\nconnections = 100"), (100, 25));
    assert_eq!(per_connection("rate = 20000\nconnections = 4"), (4, 64));
    // Stages: their peak.
    assert_eq!(
        per_connection("connections = 1000\nstages = [{ duration = \"1s\", rate = 100 }, { duration = \"1s\", rate = 2000 }]"),
        (1000, 10)
    );
    assert_eq!(
        per_connection("rate = 500\nconnections = 5000\nmax_in_flight = 8"),
        (5000, 8)
    );
}
