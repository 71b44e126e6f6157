//! What is refused before anything is sent, as a new user met it:
//! `validate` agreeing with `run`, impossible flag values, an empty
//! method, a missing file, and `run --help` stating the flag rule.

mod common;

use common::bin::{temp_dir, text, volley};

/// `validate` reads a file as `run` does: what one refuses, so does the other.
fn validate_and_run(name: &str, body: &str, expect: &str) {
    let dir = temp_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, body).unwrap();
    for command in ["validate", "run"] {
        let mut volley = volley();
        volley.arg(command).arg(&file);
        if command == "run" {
            volley.arg("--no-tui");
        }
        let output = volley.output().unwrap();
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{command} {name}: {stderr}");
        assert!(stderr.contains(expect), "{command} {name}: {stderr}");
    }
}

#[test]
fn validate_refuses_what_run_would_fail_on() {
    let calls = "[[calls]]\nmethod = \"m\"\n";
    validate_and_run(
        "header-space",
        &format!("target = \"http://127.0.0.1:1\"\n[headers]\n\"X Bad\" = \"v\"\n{calls}"),
        "key `headers.X Bad`: `X Bad` is not a valid header name",
    );
    validate_and_run(
        "missing-cacert",
        &format!("target = \"https://127.0.0.1:1\"\n[tls]\ncacert = \"nowhere.pem\"\n{calls}"),
        ":3:10: key `tls.cacert`: ",
    );
    // Readable, but no certificate: run would refuse it, so validate does.
    validate_and_run(
        "not-pem",
        &format!("target = \"https://127.0.0.1:1\"\n[tls]\ncacert = \"not-pem.toml\"\n{calls}"),
        "not-pem.toml: no PEM certificate in it",
    );
    validate_and_run(
        "no-key",
        &format!("target = \"https://127.0.0.1:1\"\n[tls]\ncert = \"no-key.toml\"\n{calls}"),
        "key `tls.cert`",
    );
    validate_and_run(
        "no-such-command",
        &format!("command = [\"volley-no-such-program\", \"--stdio\"]\n{calls}"),
        "`volley-no-such-program` is not installed",
    );
    validate_and_run(
        "content-length",
        &format!("target = \"http://127.0.0.1:1\"\n[headers]\nContent-Length = \"5\"\n{calls}"),
        "is set by volley itself",
    );
}

#[test]
fn flags_with_impossible_values_are_refused_by_name() {
    let cases: [(&[&str], &str); 9] = [
        (&["-d", "1ns"], "--duration: duration must be at least 1ms"),
        (
            &["--cacert", "Cargo.toml"],
            "--cacert: Cargo.toml: no PEM certificate in it",
        ),
        (
            &["--rate", "NaN"],
            "--rate: rate must be a finite number of requests per second, not NaN",
        ),
        (&["--rate", "0"], "--rate: rate must be above zero"),
        (
            &["--rate", "1e12"],
            "--rate: rate 1000000000000 is more than one machine can send",
        ),
        (&["--timeout", "1ns"], "--timeout: timeout must be at least 1ms"),
        (
            &["-H", "Content-Length: 5"],
            "--header: `Content-Length` is set by volley itself",
        ),
        (
            &["-H", "NoColonHere"],
            "--header: a header is not 'Name: value' (no colon)",
        ),
        (
            &["-c", "2", "--connections", "8"],
            "--connections 8 is more than the calls in flight (--concurrency 2)",
        ),
    ];
    for (args, expect) in cases {
        let output = volley()
            .args(["run", "--target", "builtin", "--method", "m", "--no-tui"])
            .args(args)
            .output()
            .unwrap();
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("NoColonHere") && !stderr.contains("redacted"),
            "{stderr}"
        );
    }
}

#[test]
fn an_empty_method_is_refused_by_name() {
    let output = volley()
        .args(["run", "--target", "builtin", "--method", " ", "--no-tui"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("--method: a method name is needed"), "{stderr}");
}

#[test]
fn a_missing_file_says_its_os_error_once() {
    let output = volley()
        .args(["run", "/nonexistent/volley.toml"])
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");
}

#[test]
fn run_help_states_the_flag_rule_and_the_defaults() {
    let output = volley().args(["run", "--help"]).output().unwrap();
    let help = text(&output.stdout);
    assert!(
        help.contains("A flag replaces what it names in the file."),
        "{help}"
    );
    for default in [
        "or 16)",
        "default 10s",
        "default 0s",
        "the rate times the timeout over the connections, at most 64",
    ] {
        assert!(help.contains(default), "{default} missing from:\n{help}");
    }
}
