//! `latency.hlog` read back with the hdrhistogram crate's own reader gives
//! every latency figure of the summary exactly.

mod common;

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

#[test]
fn the_interval_log_rebuilds_every_methods_latency_exactly() {
    let scenario = common::scenario(
        r#"
target = "builtin"
[load]
concurrency = 4
requests = 3000
warmup = "300ms"
[[calls]]
method = "eth_chainId"
weight = 3
[[calls]]
method = "sleep"
params = [1]
[[calls]]
method = "echo"
params = ["x"]
batch = 5
"#,
    );
    let report = common::run(&scenario);
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("volley-hlog-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    volley::report::write_files(&dir, &report).unwrap();
    let log = std::fs::read(dir.join("latency.hlog")).unwrap();
    assert!(
        log.starts_with(b"#[Histogram log format version 1.3]\n"),
        "the version line HdrHistogram's tools look for first"
    );
    // Interval times count from the measured part: the log's base time is
    // its start plus the warmup.
    let text = String::from_utf8_lossy(&log);
    let time = |key: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(key)).unwrap();
        line[key.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let warmup = time("#[BaseTime: ") - time("#[StartTime: ");
    assert!(
        (warmup - 0.3).abs() < 0.002,
        "base time {warmup} s after the start"
    );
    std::fs::remove_dir_all(&dir).unwrap();

    let mut by_tag: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    let mut deserializer = Deserializer::new();
    let mut seconds = 0;
    for entry in IntervalLogIterator::new(&log) {
        let LogEntry::Interval(interval) = entry.expect("a well-formed log") else {
            continue;
        };
        let bytes = STANDARD.decode(interval.encoded_histogram()).unwrap();
        let histogram: Histogram<u64> = deserializer.deserialize(&mut &bytes[..]).unwrap();
        let tag = interval
            .tag()
            .expect("every interval is tagged")
            .as_str()
            .to_string();
        seconds = seconds.max(interval.start_timestamp().as_secs() + 1);
        by_tag
            .entry(tag)
            .or_insert_with(|| Histogram::new(3).unwrap())
            .add(&histogram)
            .unwrap();
    }
    assert!(seconds >= 1);
    let summary = &report.summary;
    let figures = summary.methods.iter().chain([&summary.total]);
    for method in figures {
        let tag = if method.method == "TOTAL" {
            "TOTAL"
        } else {
            method.method.as_str()
        };
        let histogram = &by_tag[tag];
        assert_eq!(histogram.len(), method.calls, "{tag}: every call is in the log");
        let ms = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
        let latency = &method.latency;
        assert_eq!(
            (
                ms(0.5),
                ms(0.9),
                ms(0.99),
                ms(0.999),
                histogram.max() as f64 / 1000.0
            ),
            (
                latency.p50_ms,
                latency.p90_ms,
                latency.p99_ms,
                latency.p999_ms,
                latency.max_ms
            ),
            "{tag}"
        );
    }
    assert_eq!(
        by_tag.len(),
        4,
        "three methods and the total: {:?}",
        by_tag.keys()
    );
}
