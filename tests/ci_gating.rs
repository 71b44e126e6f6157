//! What CI gates on: the run's verdict on itself.

mod common;

use common::bin::{serve, volley};

use serde_json::Value;

#[test]
fn a_generator_that_cannot_keep_its_rate_is_an_invalid_run_and_fails_ci() {
    let (mut server, url) = serve(&["--latency", "10ms"]);
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("volley-verdict-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    // Two connections carry at most 200 calls/s of a 10 ms server: 50,000/s
    // cannot be kept, by far.
    let output = volley()
        .args([
            "run",
            "--target",
            &url,
            "--method",
            "eth_chainId",
            "--rate",
            "50000",
        ])
        .args([
            "--connections",
            "2",
            "-d",
            "1s",
            "--no-tui",
            "-q",
            "--require-valid",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let verdict = &json["summary"]["verdict"];
    assert_eq!(verdict["valid"], false, "{verdict}");
    let reasons = verdict["reasons"].to_string();
    assert!(reasons.contains("requests due were never sent"), "{reasons}");
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("verdict: invalid: "), "{table}");
    std::fs::remove_dir_all(&out).unwrap();
}
