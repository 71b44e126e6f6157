//! A run split into shards, each a real `volley run` process against one
//! server, started together by `--start-at`, then `volley merge`: the merged
//! figures are the server's counts, no id is sent twice, the percentiles are
//! those of every shard's histograms added, the rates add up, a threshold
//! broken by the whole (and by no shard) exits 2; and shards that are not
//! one run are refused.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, SystemTime};

use common::bin::{summary_json, temp_dir, text, volley, wait_or_kill};
use serde_json::Value;
use volley::serve::{self, ServeConfig, ServerHandle, ServerStats};
use volley::stats::TOTAL_TAG;

fn server() -> ServerHandle {
    serve::spawn(ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        count_duplicate_ids: true,
        ..ServeConfig::default()
    })
    .unwrap()
}

/// A start a few seconds off, as unix seconds: every shard waits for it.
fn start_at() -> String {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap();
    (now.as_secs() + 3).to_string()
}

fn shard(url: &str, index: u32, count: u32, load: &[&str], start: &str, out: &Path) -> Child {
    volley()
        .args([
            "run",
            "--target",
            url,
            "--method",
            "eth_blockNumber",
            "--no-tui",
            "-q",
        ])
        .args(load)
        .args([
            "--shard",
            &format!("{index}/{count}"),
            "--start-at",
            start,
            "--seed",
            "7",
        ])
        .arg("--out")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs `count` shards at once; their directories and outputs.
fn run_shards(url: &str, count: u32, load: &[&str], root: &Path) -> (Vec<PathBuf>, Vec<Output>) {
    let start = start_at();
    let dirs: Vec<PathBuf> = (0..count).map(|i| root.join(format!("shard-{i}"))).collect();
    let children: Vec<Child> = (0..count)
        .map(|i| shard(url, i, count, load, &start, &dirs[i as usize]))
        .collect();
    let outputs = children
        .into_iter()
        .map(|c| wait_or_kill(c, Duration::from_secs(90)))
        .collect();
    (dirs, outputs)
}

fn merge(dirs: &[PathBuf], out: &Path) -> Output {
    let child = volley()
        .arg("merge")
        .args(dirs)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_or_kill(child, Duration::from_secs(60))
}

fn total(summary: &Value) -> &Value {
    &summary["summary"]["total"]
}

/// Every TOTAL histogram of every shard's latency.hlog, added.
/// A shard's rate and the merged run's are derived alike: calls over the
/// measured seconds. The merged run's seconds span the shards', from the
/// first measured start to the last end, by the clocks in `shard.json`.
fn rates_are_derived_as_one_runs(dirs: &[PathBuf], merged: &Value) {
    let rate_of = |summary: &Value| {
        let (calls, seconds) = (
            total(summary)["calls"].as_f64().unwrap(),
            summary["summary"]["measured_seconds"].as_f64().unwrap(),
        );
        let rate = total(summary)["calls_per_s"].as_f64().unwrap();
        assert!(close(rate, calls / seconds), "{rate} against {calls} / {seconds}");
        seconds
    };
    let mut spans = Vec::new();
    for dir in dirs {
        let seconds = rate_of(&summary_json(dir));
        let record: Value = serde_json::from_slice(&std::fs::read(dir.join("shard.json")).unwrap()).unwrap();
        spans.push((record["clock"]["measure_start"].as_f64().unwrap(), seconds));
    }
    let earliest = spans
        .iter()
        .map(|(start, _)| *start)
        .fold(f64::INFINITY, f64::min);
    let span = spans
        .iter()
        .map(|(start, seconds)| start - earliest + seconds)
        .fold(0.0, f64::max);
    let seconds = rate_of(merged);
    assert!(close(seconds, span), "{seconds} s, the shards' span {span} s");
}

/// Equal but for the last bits a float loses on its way through JSON.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

fn union_of_histograms(dirs: &[PathBuf]) -> hdrhistogram::Histogram<u64> {
    let mut union = volley::stats::new_histogram();
    for dir in dirs {
        let run = volley::results::SavedRun::read(dir).unwrap();
        for (histogram, _, _) in &run.seconds[TOTAL_TAG] {
            union.add(histogram).unwrap();
        }
    }
    union
}

#[test]
fn three_shards_merge_into_the_servers_counts_with_exact_percentiles() {
    let server = server();
    let url = server.url();
    let root = temp_dir("shards-closed");
    // 301 requests: shards of 101, 100 and 100. The whole breaks
    // `calls < 250`, and no shard does; every shard breaks `calls > 250`,
    // and the whole does not: a shard's thresholds are no gate.
    let load = [
        "--concurrency",
        "6",
        "--requests",
        "301",
        "--threshold",
        "calls < 250",
        "--threshold",
        "calls > 250",
    ];
    let (dirs, outputs) = run_shards(&url, 3, &load, &root);
    for (dir, output) in dirs.iter().zip(&outputs) {
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}: {}",
            dir.display(),
            text(&output.stderr)
        );
    }
    let calls: Vec<u64> = dirs
        .iter()
        .map(|d| total(&summary_json(d))["calls"].as_u64().unwrap())
        .collect();
    assert_eq!(
        calls,
        [101, 100, 100],
        "every third request, from each shard's own"
    );
    let merged_dir = root.join("merged");
    let merged = merge(&dirs, &merged_dir);
    assert_eq!(
        merged.status.code(),
        Some(2),
        "the whole breaks the threshold: {}",
        text(&merged.stderr)
    );
    let summary = summary_json(&merged_dir);
    assert_eq!(total(&summary)["calls"], 301);
    assert_eq!(
        total(&summary)["calls"].as_u64(),
        Some(ServerStats::get(&server.stats.calls))
    );
    assert_eq!(
        ServerStats::get(&server.stats.duplicate_ids),
        0,
        "no id sent twice"
    );
    assert_eq!(summary["thresholds"][0]["passed"], false);
    assert_eq!(summary["thresholds"][1]["passed"], true);
    // The shards' note that the whole judges their thresholds is not
    // repeated in the whole, which just did.
    let merged_codes: Vec<&str> = (summary["summary"]["warnings"].as_array().unwrap().iter())
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert_eq!(merged_codes.first(), Some(&"merged"), "{merged_codes:?}");
    assert!(!merged_codes.contains(&"shard_thresholds"), "{merged_codes:?}");
    for dir in &dirs {
        let shard = summary_json(dir);
        assert_eq!(
            shard["thresholds"][1]["passed"], false,
            "judged, shown, not gated"
        );
        assert_eq!(shard["meta"]["seed"], 7);
    }
    // Percentiles of the merged run are those of every shard's histograms added.
    let union = union_of_histograms(&dirs);
    let latency = &total(&summary)["latency"];
    for (key, quantile) in [
        ("p50_ms", 0.5),
        ("p90_ms", 0.9),
        ("p99_ms", 0.99),
        ("p999_ms", 0.999),
    ] {
        let expected = union.value_at_quantile(quantile) as f64 / 1000.0;
        assert_eq!(latency[key].as_f64(), Some(expected), "{key}");
    }
    assert_eq!(latency["max_ms"].as_f64(), Some(union.max() as f64 / 1000.0));
    let merged_log = union_of_histograms(std::slice::from_ref(&merged_dir));
    assert_eq!(merged_log, union, "the merged latency.hlog holds every value");
    rates_are_derived_as_one_runs(&dirs, &summary);
    let per_second: u64 = summary["summary"]["timeseries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(per_second, 301, "every call in one second's row");
    for file in ["summary.csv", "timeseries.csv", "report.html", "latency.hlog"] {
        assert!(merged_dir.join(file).is_file(), "{file}");
    }
    assert!(
        !merged_dir.join("shard.json").exists(),
        "the merged run is no shard"
    );

    refuses_what_is_not_one_run(&url, &dirs, &root);
}

/// Shards of another run, a shard twice, a shard missing: each refused,
/// exit 1, with what is wrong named.
fn refuses_what_is_not_one_run(url: &str, dirs: &[PathBuf], root: &Path) {
    let other = root.join("other");
    let load = ["--concurrency", "6", "--requests", "30"];
    let output = wait_or_kill(
        shard(url, 2, 3, &load, &start_at(), &other),
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let cases: [(Vec<PathBuf>, &str); 3] = [
        (
            vec![dirs[0].clone(), dirs[1].clone(), other],
            "are not shards of one run",
        ),
        (
            vec![dirs[0].clone(), dirs[1].clone(), dirs[1].clone()],
            "shard 1/3 is given twice",
        ),
        (vec![dirs[0].clone(), dirs[2].clone()], "this one is missing: 1/3"),
    ];
    for (i, (given, says)) in cases.iter().enumerate() {
        let out = root.join(format!("refused-{i}"));
        let output = merge(given, &out);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(says), "{says}: {stderr}");
        assert!(!out.join("summary.json").exists(), "nothing written");
    }
    let output = merge(&[root.to_path_buf()], &root.join("refused-plain"));
    assert!(
        text(&output.stderr).contains("no shard.json"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn open_model_shards_keep_the_whole_rate_between_them() {
    let server = server();
    let root = temp_dir("shards-open");
    // A request limit ends each shard once its last call is answered, so
    // the server's count is exact.
    let load = ["--rate", "3000", "--requests", "6000", "--connections", "12"];
    let (dirs, outputs) = run_shards(&server.url(), 3, &load, &root);
    for output in &outputs {
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    }
    let merged_dir = root.join("merged");
    let merged = merge(&dirs, &merged_dir);
    assert_eq!(merged.status.code(), Some(0), "{}", text(&merged.stderr));
    let summary = summary_json(&merged_dir);
    // Each shard is due a third of the rate, request for request the
    // whole run's (the schedule's unit tests hold the times exactly): how
    // close the achieved rate came is the wall clock's, so it is not
    // asserted here; the merged rate is derived as a single run's.
    for dir in &dirs {
        let shard = summary_json(dir);
        assert_eq!(shard["meta"]["load"]["rate"], 1000.0);
        assert_eq!(total(&shard)["calls"], 2000);
    }
    rates_are_derived_as_one_runs(&dirs, &summary);
    let schedule = &summary["summary"]["schedule"];
    assert_eq!(total(&summary)["calls"], 6000);
    assert_eq!(ServerStats::get(&server.stats.calls), 6000);
    assert_eq!(ServerStats::get(&server.stats.duplicate_ids), 0);
    assert_eq!(summary["meta"]["load"]["rate"], 3000.0, "the whole run's rate");
    assert_eq!(summary["meta"]["load"]["connections"], 12);
    assert_eq!(schedule["unsent"], 0, "{schedule}");
}

#[test]
fn a_shard_keeps_the_files_seed_and_takes_the_start_time_only_without_one() {
    use volley::plan::Shard;
    use volley::scenario::{Overrides, Scenario};
    let dir = temp_dir("shards-seed");
    std::fs::create_dir_all(&dir).unwrap();
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let flags = Overrides {
        shard: Some(Shard::new(1, 2).unwrap()),
        start_at: Some(start),
        ..Overrides::default()
    };
    let with_seed = dir.join("seeded.toml");
    std::fs::write(
        &with_seed,
        "target = \"http://127.0.0.1:1\"\nseed = 42\n[[calls]]\nmethod = \"m\"\n",
    )
    .unwrap();
    assert_eq!(
        Scenario::with_flags(Some(&with_seed), &flags).unwrap().seed,
        Some(42)
    );
    let without = dir.join("unseeded.toml");
    std::fs::write(
        &without,
        "target = \"http://127.0.0.1:1\"\n[[calls]]\nmethod = \"m\"\n",
    )
    .unwrap();
    assert_eq!(
        Scenario::with_flags(Some(&without), &flags).unwrap().seed,
        Some(1_800_000_000)
    );
    let no_start = Overrides {
        start_at: None,
        ..flags
    };
    let error = Scenario::with_flags(Some(&without), &no_start)
        .unwrap_err()
        .to_string();
    assert!(error.contains("--seed"), "{error}");
}

/// A copy of result directory `dir` at `to`, its `file` passed through `edit`.
fn edited_copy(dir: &Path, to: &Path, file: &str, edit: impl Fn(String) -> String) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
    let text = std::fs::read_to_string(to.join(file)).unwrap();
    std::fs::write(to.join(file), edit(text)).unwrap();
}

/// `volley ARGS`, which must refuse (exit 1, nothing written) and say
/// each of `says`.
fn refused(args: &[&Path], says: &[&str]) {
    let output = wait_or_kill(
        volley()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(60),
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
    for said in says {
        assert!(stderr.contains(said), "{args:?}: no {said:?} in {stderr}");
    }
}

#[test]
fn a_renamed_field_is_refused_by_compare_merge_and_report_naming_the_file_and_the_field() {
    let (mut server, url) = common::bin::serve(&[]);
    let root = temp_dir("renamed");
    let run = root.join("run");
    let args = [
        "run",
        "--target",
        &url,
        "--method",
        "eth_blockNumber",
        "-n",
        "200",
    ];
    let shard = [
        "--shard",
        "0/2",
        "--seed",
        "7",
        "--threshold",
        "p99 < 10s",
        "--no-tui",
        "-q",
    ];
    let output = common::bin::run_guarded(&[&args[..], &shard[..]].concat(), &run);
    server.kill().unwrap();
    let _ = server.wait();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    // Its warnings are written with their codes.
    let warnings = summary_json(&run)["summary"]["warnings"].clone();
    let codes: Vec<&str> = (warnings.as_array().unwrap().iter())
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"shard_thresholds"), "{warnings}");
    let shown = |dir: &Path, file: &str| dir.join(file).display().to_string();
    let (merge, report, compare) = (Path::new("merge"), Path::new("report"), Path::new("compare"));
    let out = root.join("merged");
    let renamed = root.join("renamed");
    edited_copy(&run, &renamed, "summary.json", |text| {
        text.replace("\"calls_per_s\"", "\"calls_per_sec\"")
    });
    let says = [
        &shown(&renamed, "summary.json")[..],
        "missing field `calls_per_s`",
        "in `summary.methods[0]`",
    ];
    refused(&[compare, &run, &renamed], &says);
    refused(&[compare, &renamed, &run], &says);
    refused(&[report, &renamed], &says);
    refused(&[merge, &renamed, Path::new("--out"), &out], &says);
    let in_shard = root.join("renamed-shard");
    edited_copy(&run, &in_shard, "shard.json", |text| {
        text.replace("\"in_flight_at_end\"", "\"in_flight\"")
    });
    let says = [
        &shown(&in_shard, "shard.json")[..],
        "missing field `in_flight_at_end`",
    ];
    refused(&[merge, &in_shard, Path::new("--out"), &out], &says);
    // A layout this volley does not know is not read, whatever it holds.
    let later = root.join("later");
    edited_copy(&run, &later, "summary.json", |text| {
        text.replacen("\"format\": 1,", "\"format\": 2,", 1)
    });
    let says = [
        &shown(&later, "summary.json")[..],
        "layout 2, and this volley reads layout 1",
    ];
    refused(&[report, &later], &says);
    refused(&[compare, &run, &later], &says);
    // samples.csv, what compare tests, is read by its columns too: a
    // renamed one is refused, never read as a column of empty figures.
    let samples = root.join("renamed-samples");
    edited_copy(&run, &samples, "samples.csv", |text| {
        text.replacen("p99_ms", "slowbad", 1)
    });
    let says = [
        &shown(&samples, "samples.csv")[..],
        "column 7 is `slowbad`, expected `p99_ms`",
    ];
    refused(&[compare, &run, &samples], &says);
    refused(&[compare, &samples, &run], &says);
    assert!(!out.exists(), "no merge was written");
    std::fs::remove_dir_all(&root).unwrap();
}
