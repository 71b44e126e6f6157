//! The per-call work of the hot path: building a body (fixed and generated
//! params), judging an answer, reading a large one, recording the outcome.
//! Run with `cargo bench --bench hot_path`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde_json::json;
use volley::plan::{CallTemplate, RequestBuilder};
use volley::rpc::wire::Message;
use volley::rpc::{Entry, Judge, Version};
use volley::scenario::Scenario;
use volley::stats::Recorder;
use volley::stats::{CallDurations, Outcome};

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
    // The part of `one_call` that counts the call for `--otlp`: its bucket
    // found by a binary search, its outcome's entry by a short scan.
    let mut durations = CallDurations::default();
    let outcomes = [Outcome::Ok, Outcome::Ok, Outcome::Ok, Outcome::RpcError(-32000)];
    group.bench_function("call_durations", |b| {
        let mut n = 0u64;
        b.iter(|| {
            n = n.wrapping_add(7919);
            durations.record(black_box(outcomes[(n % 4) as usize]), 100 + n % 5000);
        })
    });
    group.finish();
}

/// An `eth_getBlockByNumber` answer with `count` full transactions, the
/// shape `volley serve`'s `block` method sends (hex strings, 20 members).
fn block_answer(count: usize) -> Vec<u8> {
    let hex = |n: usize, width: usize| format!("0x{:0width$x}", n * 2_654_435_761 % (1 << 60));
    let transactions: Vec<serde_json::Value> = (0..count)
        .map(|i| {
            json!({
                "blockHash": hex(1, 64), "blockNumber": "0xf4240", "from": hex(i, 40), "to": hex(i + 1, 40),
                "gas": "0x5208", "gasPrice": "0x4a817c800", "maxFeePerGas": "0x6fc23ac00",
                "maxPriorityFeePerGas": "0x3b9aca00", "hash": hex(i + 2, 64), "input": hex(i + 3, 136),
                "nonce": "0x0", "transactionIndex": format!("{i:#x}"), "value": "0x0", "type": "0x2",
                "accessList": [], "chainId": "0x539", "v": "0x1", "r": hex(i + 4, 64), "s": hex(i + 5, 64),
                "yParity": "0x1"
            })
        })
        .collect();
    let block = json!({"number": "0xf4240", "hash": hex(1, 64), "transactions": transactions});
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "result": block, "id": 1})).unwrap()
}

/// Reading a large answer's members, every byte checked: the fast reading
/// beside serde_json's, on the same bytes.
fn message(c: &mut Criterion) {
    let answer = block_answer(150);
    let mut group = c.benchmark_group("message");
    group.throughput(Throughput::Bytes(answer.len() as u64));
    group.bench_function("block_150_skim", |b| {
        b.iter(|| Message::parse(black_box(&answer)).unwrap().result.unwrap().len())
    });
    group.bench_function("block_150_serde_json", |b| {
        b.iter(|| {
            Message::parse_with_serde(black_box(&answer))
                .unwrap()
                .result
                .unwrap()
                .len()
        })
    });
    group.finish();
}

criterion_group!(benches, build, judge, message, record);
criterion_main!(benches);
