//! `volley compare`: a slower server is a regression, a faster one is not,
//! and two runs of one server at one load compare clean.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};

use common::bin::volley;

/// `volley serve` with a fixed hold; returns it and its URL.
fn serve(latency: &str) -> (Child, String) {
    common::bin::serve(&["--latency", latency])
}

fn dir(name: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("volley-compare-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A run of 10 measured seconds: enough seconds a side for the rank test,
/// even when a loaded machine blurs a few of them (7 gave p 0.013 once at
/// a load of 16 on 2 cores).
fn start_run(url: &str, connections: &str, out: &Path) -> Child {
    volley()
        .args([
            "run",
            "--target",
            url,
            "--method",
            "eth_chainId",
            "-c",
            connections,
        ])
        .args(["-d", "10s", "--warmup", "500ms", "--no-tui", "-q", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn compare(baseline: &Path, current: &Path) -> Output {
    volley()
        .arg("compare")
        .arg(baseline)
        .arg(current)
        .output()
        .unwrap()
}

#[test]
fn a_slower_server_regresses_a_faster_one_improves_and_one_server_compares_clean() {
    // Holds far apart, so that no second of the fast server, however busy
    // the machine, is as slow as the slow one's floor: the rank test then
    // sees every second apart, which 10 seconds a side put far below its 1%.
    let (fast_server, fast) = serve("1ms");
    let (slow_server, slow) = serve("20ms");
    let (steady_server, steady) = serve("20ms");
    let dirs = ["fast", "slow", "steady-1", "steady-2", "slow-short"].map(dir);
    let short = volley()
        .args([
            "run",
            "--target",
            &slow,
            "--method",
            "eth_chainId",
            "-c",
            "4",
            "-d",
            "3s",
        ])
        .args(["--no-tui", "-q", "--out"])
        .arg(&dirs[4])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let runs = [
        start_run(&fast, "4", &dirs[0]),
        start_run(&slow, "4", &dirs[1]),
        start_run(&steady, "2", &dirs[2]),
        start_run(&steady, "2", &dirs[3]),
        short,
    ];
    for mut run in runs {
        assert!(run.wait().unwrap().success());
    }
    for mut server in [fast_server, slow_server, steady_server] {
        let _ = server.kill();
        let _ = server.wait();
    }
    let regression = compare(&dirs[0], &dirs[1]);
    let table = String::from_utf8_lossy(&regression.stdout);
    assert_eq!(regression.status.code(), Some(2), "{table}");
    let p50 = table
        .lines()
        .find(|l| l.starts_with("eth_chainId              p50"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(p50.ends_with("REGRESSION"), "{p50}");
    let improvement = compare(&dirs[1], &dirs[0]);
    let table = String::from_utf8_lossy(&improvement.stdout);
    assert_eq!(improvement.status.code(), Some(0), "{table}");
    assert!(
        table.contains("improved") && !table.contains("REGRESSION"),
        "{table}"
    );
    // The overlay page: both runs' spectra on one plot per method.
    let page = dir("overlay.html");
    let output = volley()
        .arg("compare")
        .arg(&dirs[0])
        .arg(&dirs[1])
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(">eth_chainId: latency by percentile</text>"),
        "{html}"
    );
    assert!(html.contains("<title>baseline</title>") && html.contains("<title>current</title>"));
    assert!(html.contains("result: REGRESSION"));
    // A table, its regressions marked.
    assert!(
        html.contains("<tr class=\"fail\"><td>eth_chainId</td><td>p50</td>"),
        "{html}"
    );
    std::fs::remove_file(&page).unwrap();
    // One side too short to tell: a 20x slower server is still only noise,
    // however long the other side ran.
    let short = compare(&dirs[0], &dirs[4]);
    let table = String::from_utf8_lossy(&short.stdout);
    assert_eq!(short.status.code(), Some(0), "{table}");
    assert!(table.contains("note: a run of 3 s is too short"), "{table}");
    assert!(
        !table.contains("REGRESSION") && table.contains("noise"),
        "{table}"
    );
    let same = compare(&dirs[2], &dirs[3]);
    let table = String::from_utf8_lossy(&same.stdout);
    assert_eq!(same.status.code(), Some(0), "{table}");
    assert!(table.contains("result: no regression"), "{table}");
    for dir in &dirs {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn compare_refuses_what_it_cannot_read_by_name() {
    let missing = dir("missing");
    let output = compare(&missing, &missing);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no summary.json"));
    let output = volley()
        .args(["compare", "a", "b", "--max-regression", "p99=10"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "a bad flag could not run, as everywhere"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("give a percentage"));
}

#[test]
fn a_run_of_a_server_that_answered_nothing_cannot_pass_a_comparison() {
    // Accepts and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    std::thread::spawn(move || silent.incoming().flatten().for_each(std::mem::forget));
    let (mut server, url) = serve("1ms");
    let (base, dead) = (dir("alive"), dir("dead"));
    for (target, out) in [(&url, &base), (&silent_url, &dead)] {
        let status = volley()
            .args(["run", "--target", target, "--method", "eth_chainId", "-c", "2"])
            .args(["-d", "1s", "--no-tui", "-q", "--out"])
            .arg(out)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    }
    let _ = server.kill();
    let _ = server.wait();
    let output = compare(&base, &dead);
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{table}");
    assert!(
        table.contains(
            "result: CANNOT COMPARE: the current run's verdict is invalid: the server answered no call"
        ),
        "{table}"
    );
    assert!(
        table.contains("note: a run of 1 s is too short to tell a change from noise"),
        "{table}"
    );
    // The same in the formats CI reads.
    let (junit, step) = (dir("compare-junit.xml"), dir("compare-step.md"));
    let output = volley()
        .arg("compare")
        .arg(&base)
        .arg(&dead)
        .arg("--junit")
        .arg(&junit)
        .env("GITHUB_STEP_SUMMARY", &step)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let failures: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("failure")).collect();
    assert_eq!(failures.len(), 1, "{xml}");
    assert!(failures[0]
        .attribute("message")
        .unwrap()
        .contains("the server answered no call"));
    let cases = doc.descendants().filter(|n| n.has_tag_name("testcase")).count();
    assert_eq!(cases.to_string(), doc.root_element().attribute("tests").unwrap());
    let md = std::fs::read_to_string(&step).unwrap();
    assert!(
        md.contains("| `eth_chainId` | p50 |") && md.contains("**result: CANNOT COMPARE"),
        "{md}"
    );
    for file in [junit, step] {
        std::fs::remove_file(file).unwrap();
    }
    for dir in [base, dead] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}
