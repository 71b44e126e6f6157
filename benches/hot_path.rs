//! The per-call work of the hot path: building a body (fixed and generated
//! params), judging an answer, recording the outcome.
//! Run with `cargo bench --bench hot_path`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde_json::json;
use volley::plan::{CallTemplate, RequestBuilder};
use volley::rpc::{Entry, Judge, Version};
use volley::scenario::Scenario;
use volley::stats::Outcome;
use volley::stats::Recorder;

fn entry(id: u64) -> Entry {
    Entry {
        method: 0,
        call: 0,
        id: Some(id),
    }
}

fn build(c: &mut Criterion) {
    let fixed = CallTemplate::new(
        Version::V2,
        "eth_getBalance",
        Some(&json!(["0x00000000219ab540356cBB839Cbe05303d7705Fa", "latest"])),
    );
    let scenario = Scenario::parse(
        r#"target = "builtin"
[[calls]]
method = "eth_getBalance"
params = ["${hex(20)}", "${quantity(1000000, 2000000)}"]
"#,
        "bench.toml",
        "bench",
        &|_| None,
    )
    .expect("a valid scenario");
    let generated =
        CallTemplate::generated(Version::V2, "eth_getBalance", scenario.calls[0].template.clone());
    let mut rng = SmallRng::seed_from_u64(1);
    let mut builder = RequestBuilder::default();
    let mut group = c.benchmark_group("build");
    group.throughput(Throughput::Elements(1));
    for (name, template) in [("single_fixed", &fixed), ("single_generated", &generated)] {
        group.bench_function(name, |b| {
            let mut id = 0;
            b.iter(|| {
                builder.begin(false);
                id += 1;
                builder.push(template, entry(id), &mut rng);
                black_box(builder.finish())
            })
        });
    }
    group.throughput(Throughput::Elements(100));
    group.bench_function("batch_100_fixed", |b| {
        let mut id = 0;
        b.iter(|| {
            builder.begin(true);
            for _ in 0..100 {
                id += 1;
                builder.push(&fixed, entry(id), &mut rng);
            }
            black_box(builder.finish())
        })
    });
    group.finish();
}

fn judge(c: &mut Criterion) {
    let template = CallTemplate::new(Version::V2, "eth_blockNumber", None);
    let mut rng = SmallRng::seed_from_u64(1);
    let mut builder = RequestBuilder::default();
    let mut judge = Judge::default();
    let mut group = c.benchmark_group("judge");

    builder.begin(false);
    builder.push(&template, entry(12345), &mut rng);
    let _ = builder.finish();
    let single = br#"{"jsonrpc":"2.0","id":12345,"result":"0x12a05f200"}"#;
    group.throughput(Throughput::Elements(1));
    group.bench_function("single", |b| {
        b.iter(|| {
            judge.judge(
                200,
                black_box(single),
                builder.entries(),
                false,
                &[],
                |_, o, _| assert_eq!(o, Outcome::Ok),
            )
        })
    });

    builder.begin(true);
    for id in 1000..1100 {
        builder.push(&template, entry(id), &mut rng);
    }
    let _ = builder.finish();
    // Answered in a shuffled order, as servers may.
    let mut ids: Vec<u64> = (1000..1100).collect();
    for i in 0..ids.len() {
        ids.swap(i, (i * 37 + 11) % 100);
    }
    let answers: Vec<String> = ids
        .iter()
        .map(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"0x12a05f200"}}"#))
        .collect();
    let batch = format!("[{}]", answers.join(","));
    group.throughput(Throughput::Elements(100));
    group.bench_function("batch_100_shuffled", |b| {
        b.iter(|| {
            judge.judge(
                200,
                black_box(batch.as_bytes()),
                builder.entries(),
                true,
                &[],
                |_, o, _| assert_eq!(o, Outcome::Ok),
            )
        })
    });
    group.finish();
}

fn record(c: &mut Criterion) {
    let mut recorder = Recorder::new(4);
    let mut group = c.benchmark_group("record");
    group.throughput(Throughput::Elements(1));
    group.bench_function("one_call", |b| {
        let mut n = 0u64;
        b.iter(|| {
            n = n.wrapping_add(7919);
            let latency = Duration::from_micros(100 + n % 5000);
            recorder.methods[(n % 4) as usize].record(black_box(Outcome::Ok), latency, latency, 48);
        })
    });
    group.finish();
}

criterion_group!(benches, build, judge, record);
criterion_main!(benches);
