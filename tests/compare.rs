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

/// A run of `seconds` with 2 calls in flight: against a server that holds
/// each answer, the pace is the server's, so two runs of one server differ
/// only by the machine's noise. The closed model, so a busy machine has
/// no schedule to miss (an open-model run 1.7% late was invalid and could
/// not be compared, on a busy 2-core machine).
fn start_run(url: &str, seconds: &str, out: &Path) -> Child {
    volley()
        .args(["run", "--target", url, "--method", "eth_chainId"])
        .args(["-c", "2", "--connections", "2", "-d", seconds])
        .args(["--no-tui", "-q", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn compare(baseline: &Path, current: &Path) -> Output {
    compare_all(&[baseline], current, &[])
}

fn compare_all(baselines: &[&Path], current: &Path, flags: &[&str]) -> Output {
    volley()
        .arg("compare")
        .args(baselines)
        .arg(current)
        .args(flags)
        .output()
        .unwrap()
}

/// `volley` with `args`, its results into `out`; it must succeed.
fn run_into(args: &[&str], out: &Path) {
    let output = volley()
        .args(args)
        .args(["--no-tui", "-q", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn row<'t>(table: &'t str, start: &str) -> &'t str {
    table
        .lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no {start:?} in {table}"))
}

#[test]
fn three_second_runs_tell_a_slower_server_from_one_server_run_twice() {
    // Holds far apart, so that no quarter second of the fast server, however
    // busy the machine, is as slow as the slow one's floor; and long enough
    // that one server run twice stays within the default limits on a busy
    // machine (p50 25% + 0.5 ms, p99 50% + 2 ms).
    let (fast_server, fast) = serve("20ms");
    let (slow_server, slow) = serve("100ms");
    let dirs = ["fast-1", "fast-2", "fast-3", "slow", "fast-short", "slow-short"].map(dir);
    // Two at a time, so that a busy machine leaves each run its CPU.
    for pair in [[(&fast, 0), (&fast, 1)], [(&fast, 2), (&slow, 3)]] {
        let runs = pair.map(|(url, i)| start_run(url, "3s", &dirs[i]));
        for mut run in runs {
            assert!(run.wait().unwrap().success());
        }
    }
    // The short pair in the closed model: no schedule a busy machine could
    // miss in so few requests, so both verdicts stand.
    let short = |url: &str, out: &Path| {
        volley()
            .args([
                "run",
                "--target",
                url,
                "--method",
                "eth_chainId",
                "-c",
                "4",
                "-d",
                "1s",
            ])
            .args(["--no-tui", "-q", "--out"])
            .arg(out)
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    for mut run in [short(&fast, &dirs[4]), short(&slow, &dirs[5])] {
        assert!(run.wait().unwrap().success());
    }
    for mut server in [fast_server, slow_server] {
        let _ = server.kill();
        let _ = server.wait();
    }
    // 12 quarter-second samples a side, wholly apart: p well under 1%.
    let regression = compare(&dirs[0], &dirs[3]);
    let table = String::from_utf8_lossy(&regression.stdout);
    assert_eq!(regression.status.code(), Some(2), "{table}");
    assert!(
        row(&table, "eth_chainId              p50").ends_with("REGRESSION"),
        "{table}"
    );
    assert!(table.contains("result: REGRESSION"), "{table}");
    let improvement = compare(&dirs[3], &dirs[0]);
    let table = String::from_utf8_lossy(&improvement.stdout);
    assert_eq!(improvement.status.code(), Some(0), "{table}");
    assert!(
        table.contains("improved") && !table.contains("REGRESSION"),
        "{table}"
    );
    // One server, run twice: within the limits, whatever the samples say.
    let same = compare(&dirs[0], &dirs[1]);
    let table = String::from_utf8_lossy(&same.stdout);
    assert_eq!(same.status.code(), Some(0), "{table}");
    assert!(table.contains("result: no regression"), "{table}");
    // Two baselines, and a directory of runs as a baseline.
    let two = compare_all(&[&dirs[0], &dirs[1]], &dirs[2], &[]);
    let table = String::from_utf8_lossy(&two.stdout);
    assert_eq!(two.status.code(), Some(0), "{table}");
    assert!(table.contains("note: 2 baseline runs"), "{table}");
    let kept = dir("kept-baselines");
    std::fs::create_dir_all(&kept).unwrap();
    for (i, run) in dirs[..2].iter().enumerate() {
        std::fs::rename(run, kept.join(format!("run-{i}"))).unwrap();
    }
    let from_dir = compare_all(&[&kept], &dirs[3], &[]);
    let table = String::from_utf8_lossy(&from_dir.stdout);
    assert_eq!(from_dir.status.code(), Some(2), "{table}");
    assert!(
        table.contains("note: 2 baseline runs") && table.contains("result: REGRESSION"),
        "{table}"
    );
    // 4 samples a side can never reach p < 1%: past its limit, the change
    // is inconclusive, exit 2 unless allowed, with what would settle it.
    let short = compare(&dirs[4], &dirs[5]);
    let table = String::from_utf8_lossy(&short.stdout);
    assert_eq!(short.status.code(), Some(2), "{table}");
    assert!(
        row(&table, "eth_chainId              p50").ends_with("inconclusive"),
        "{table}"
    );
    assert!(
        table.contains("result: INCONCLUSIVE") && table.contains("runs of at least 2 s each"),
        "{table}"
    );
    let allowed = compare_all(&[&dirs[4]], &dirs[5], &["--allow-inconclusive"]);
    assert_eq!(allowed.status.code(), Some(0));
    // Within every limit, but too short to tell: never passed as `ok`.
    let untested = compare(&dirs[4], &dirs[4]);
    let table = String::from_utf8_lossy(&untested.stdout);
    assert_eq!(untested.status.code(), Some(2), "{table}");
    assert!(
        row(&table, "eth_chainId              p50").ends_with("too short  -"),
        "{table}"
    );
    assert!(
        table.contains("result: INCONCLUSIVE: the runs are too short to judge any change, so none passes"),
        "{table}"
    );
    let allowed = compare_all(&[&dirs[4]], &dirs[4], &["--allow-inconclusive"]);
    assert_eq!(allowed.status.code(), Some(0));
    let junit = dir("untested-junit.xml");
    compare_all(&[&dirs[4]], &dirs[4], &["--junit", junit.to_str().unwrap()]);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testcase name=\"the runs are long enough to judge\" classname=\"volley.compare\">"),
        "{xml}"
    );
    std::fs::remove_file(junit).unwrap();
    // The overlay page: both runs' spectra on one plot per method.
    let page = dir("overlay.html");
    let output = volley()
        .arg("compare")
        .arg(&dirs[2])
        .arg(&dirs[3])
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
    assert!(
        html.contains("<tr class=\"fail\"><td>eth_chainId</td><td>p50</td>"),
        "{html}"
    );
    std::fs::remove_file(&page).unwrap();
    std::fs::remove_dir_all(&kept).unwrap();
    for dir in &dirs[2..] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn a_renamed_or_missing_figure_is_refused_naming_the_file_and_the_field() {
    let (mut server, url) = serve("1ms");
    let run = dir("renamed-source");
    assert!(start_run(&url, "1s", &run).wait().unwrap().success());
    let _ = server.kill();
    let _ = server.wait();
    let renamed = dir("renamed");
    std::fs::create_dir_all(&renamed).unwrap();
    for file in ["summary.json", "latency.hlog", "samples.csv"] {
        std::fs::copy(run.join(file), renamed.join(file)).unwrap();
    }
    let text = std::fs::read_to_string(renamed.join("summary.json")).unwrap();
    std::fs::write(
        renamed.join("summary.json"),
        text.replace("\"calls_per_s\"", "\"calls_per_sec\""),
    )
    .unwrap();
    for (base, cur) in [(&run, &renamed), (&renamed, &run)] {
        let output = compare(base, cur);
        assert_eq!(
            output.status.code(),
            Some(1),
            "an error, never a comparison with zeros"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("{}", renamed.join("summary.json").display()))
                && stderr.contains("missing field `calls_per_s`"),
            "{stderr}"
        );
    }
    std::fs::remove_file(renamed.join("samples.csv")).unwrap();
    std::fs::copy(run.join("summary.json"), renamed.join("summary.json")).unwrap();
    let output = compare(&run, &renamed);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no samples.csv"));
    for d in [run, renamed] {
        std::fs::remove_dir_all(d).unwrap();
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
        // A run whose every call went unanswered fails on its own (exit 2).
        let expected = if out == &dead { 2 } else { 0 };
        assert_eq!(status.code(), Some(expected), "{target}");
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
        table.contains("too short to judge a change (at least 2 s)"),
        "{table}"
    );
    // One of several baselines invalid: named by its directory.
    let output = compare_all(&[&base, &dead], &base, &[]);
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{table}");
    assert!(
        table.contains(&format!(
            "CANNOT COMPARE: baseline {}'s verdict is invalid: ",
            dead.display()
        )),
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
    assert_eq!(
        failures[0].attribute("type"),
        Some("volley"),
        "no regression: {xml}"
    );
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

#[test]
fn runs_of_other_loads_are_not_compared_and_each_key_that_differs_is_named() {
    let (mut server, url) = serve("0ms");
    let [fast, slow] = ["rate-40", "rate-20"].map(dir);
    for (rate, out) in [("40", &fast), ("20", &slow)] {
        let args = [
            "run",
            "--target",
            &url,
            "--method",
            "eth_chainId",
            "--rate",
            rate,
            "-d",
            "1s",
        ];
        run_into(&args, out);
    }
    server.kill().unwrap();
    let output = compare(&fast, &slow);
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{table}");
    let result = table.lines().last().unwrap();
    assert!(
        result.starts_with("result: CANNOT COMPARE: the loads differ in rate: 40 in ")
            && result.ends_with(" against 20"),
        "{table}"
    );
    assert!(
        !table.contains("REGRESSION"),
        "a lower rate is no regression: {table}"
    );
    for dir in [fast, slow] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// The same methods with other weights are another mix, so another load:
/// refused, naming the method whose share moved, never read as one
/// method's rate falling.
#[test]
fn runs_of_other_weights_are_not_compared() {
    let (mut server, url) = serve("0ms");
    let [even, skewed] = ["weights-even", "weights-skewed"].map(dir);
    for (weight, out) in [(1, &even), (3, &skewed)] {
        let scenario = out.with_extension("toml");
        std::fs::write(
            &scenario,
            format!(
                "target = \"{url}\"\nseed = 7\n[load]\nconcurrency = 4\nrequests = 4000\n[[calls]]\nmethod = \"eth_chainId\"\nweight = {weight}\n[[calls]]\nmethod = \"eth_blockNumber\"\n"
            ),
        )
        .unwrap();
        run_into(&["run", scenario.to_str().unwrap()], out);
    }
    server.kill().unwrap();
    let output = compare(&even, &skewed);
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{table}");
    assert!(
        table.contains("CANNOT COMPARE: the mixes differ: eth_chainId was 50.")
            && table.contains(" against 75.")
            && table.contains("% (the weights changed?)"),
        "{table}"
    );
    // The same run against itself: the same mix (a run too short to judge,
    // allowed: the mix is what this asks about).
    let output = compare_all(&[&even], &even, &["--allow-inconclusive"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    for dir in [even, skewed] {
        let _ = std::fs::remove_file(dir.with_extension("toml"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// Notifications have no latency: compare shows no p50 or p99 row for
/// them (a `0.000 ms ... ok` would say it compared something), and still
/// their rate and errors.
#[test]
fn a_method_of_notifications_has_no_latency_rows() {
    let (mut server, url) = serve("0ms");
    let out = dir("notifications");
    let scenario = out.with_extension("toml");
    std::fs::write(
        &scenario,
        format!(
            "target = \"{url}\"\nseed = 7\n[load]\nconcurrency = 2\nrequests = 2000\n[[calls]]\nmethod = \"eth_chainId\"\n[[calls]]\nmethod = \"log\"\nnotification = true\n"
        ),
    )
    .unwrap();
    run_into(&["run", scenario.to_str().unwrap()], &out);
    server.kill().unwrap();
    // Too short to judge, allowed: the rows are what this asks about.
    let output = compare_all(&[&out], &out, &["--allow-inconclusive"]);
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{table}");
    let rows_of = |method: &str| -> Vec<&str> {
        (table.lines())
            .filter(|l| l.split_whitespace().next() == Some(method))
            .map(|l| l.split_whitespace().nth(1).unwrap_or(""))
            .collect()
    };
    assert_eq!(rows_of("log"), ["rps", "error_rate"], "{table}");
    assert_eq!(
        rows_of("eth_chainId"),
        ["p50", "p99", "rps", "error_rate"],
        "{table}"
    );
    let _ = std::fs::remove_file(scenario);
    std::fs::remove_dir_all(out).unwrap();
}
