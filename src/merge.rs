//! `volley merge`: the shards of one run added up into the run one machine
//! would have reported. Counts are summed and histograms added (never
//! percentiles averaged), each second's figures lined up by the wall clock,
//! the summary derived from the sums as a single run's is (`stats::derive`:
//! calls over the span the shards ran), and the thresholds and the verdict
//! judged again on the whole. Shards of different runs, a shard given twice and a missing one
//! are refused before anything is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::Value;

use crate::report::shard::{ShardRecord, FORMAT};
use crate::report::{LoadMeta, RunMeta, RunReport};
use crate::results::SavedRun;
use crate::stats::{
    self, ClientCpu, LatencyLog, LatencySummary, Recorder, RunSummary, Sample, SecondRow, Warning,
    WarningCode,
};

/// One shard's result directory, read.
pub struct ShardRun {
    pub dir: PathBuf,
    pub record: ShardRecord,
    pub total: Recorder,
    pub stages: Vec<Recorder>,
    pub results: SavedRun,
}

impl ShardRun {
    pub fn read(dir: &Path) -> anyhow::Result<ShardRun> {
        let shown = dir.display();
        if !dir.is_dir() {
            anyhow::bail!("{shown}: no such directory");
        }
        let text = std::fs::read(dir.join("shard.json")).map_err(|_| {
            anyhow::anyhow!(
                "{shown}: no shard.json: not the result of a shard (a run with --shard or --shards)"
            )
        })?;
        let document: Value = serde_json::from_slice(&text)
            .map_err(|e| anyhow::anyhow!("{shown}/shard.json is not JSON: {e}"))?;
        crate::results::check_layout(&dir.join("shard.json"), &document, FORMAT)?;
        let record: ShardRecord = crate::results::from_json(&dir.join("shard.json"), &text)?;
        let restore = |saved: &stats::SavedRecorder| {
            let recorder = saved
                .restore()
                .map_err(|e| anyhow::anyhow!("{shown}/shard.json: {e}"))?;
            if recorder.methods.len() != record.methods.len() {
                anyhow::bail!(
                    "{shown}/shard.json: counts for {} methods, {} named",
                    recorder.methods.len(),
                    record.methods.len()
                );
            }
            Ok(recorder)
        };
        let total = restore(&record.total)?;
        let stages = record
            .stages
            .iter()
            .map(restore)
            .collect::<anyhow::Result<Vec<_>>>()?;
        if stages.len() != record.stage_bounds.len() {
            anyhow::bail!(
                "{shown}/shard.json: {} stages counted, {} bounded",
                stages.len(),
                record.stage_bounds.len()
            );
        }
        let results = SavedRun::read(dir)?;
        Ok(ShardRun {
            dir: dir.to_path_buf(),
            record,
            total,
            stages,
            results,
        })
    }

    fn name(&self) -> String {
        format!(
            "shard {}/{} ({})",
            self.record.index,
            self.record.count,
            self.dir.display()
        )
    }
}

/// Refuses shards that are not one whole run: made by another volley, of
/// another run (scenario, load, seed), split another way, given twice, or
/// short of some.
pub fn check(shards: &[ShardRun]) -> anyhow::Result<()> {
    let Some(first) = shards.first() else {
        anyhow::bail!("give the result directories of every shard of one run");
    };
    for shard in &shards[1..] {
        let (a, b) = (&first.record, &shard.record);
        if a.volley != b.volley {
            anyhow::bail!(
                "{} was run by volley {}, {} by volley {}: merge shards of one version",
                first.name(),
                a.volley,
                shard.name(),
                b.volley
            );
        }
        if a.run != b.run {
            let keys: std::collections::BTreeSet<&String> = a.run.keys().chain(b.run.keys()).collect();
            let differ: Vec<String> = (keys.into_iter())
                .filter(|k| a.run.get(*k) != b.run.get(*k))
                .map(|k| {
                    let shown = |v: Option<&String>| v.map_or("(none)", |v| v.as_str()).to_string();
                    format!("  {k}: {} against {}", shown(a.run.get(k)), shown(b.run.get(k)))
                })
                .collect();
            anyhow::bail!(
                "{} and {} are not shards of one run; they differ in\n{}",
                first.name(),
                shard.name(),
                differ.join("\n")
            );
        }
        if a.count != b.count {
            anyhow::bail!(
                "{} and {} split the run differently (into {} and {}): their shares overlap",
                first.name(),
                shard.name(),
                a.count,
                b.count
            );
        }
    }
    let count = first.record.count;
    let mut seen: BTreeMap<u32, &ShardRun> = BTreeMap::new();
    for shard in shards {
        if let Some(earlier) = seen.insert(shard.record.index, shard) {
            anyhow::bail!(
                "shard {}/{count} is given twice: {} and {}",
                shard.record.index,
                earlier.dir.display(),
                shard.dir.display()
            );
        }
    }
    let missing: Vec<String> = (0..count)
        .filter(|i| !seen.contains_key(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "the run has {count} shards and {} missing: {} (give every shard's result directory)",
            if missing.len() == 1 {
                "this one is"
            } else {
                "these are"
            },
            missing.join(", ")
        );
    }
    Ok(())
}

/// The merged run's report, with its thresholds judged on the merged figures.
pub fn merge(shards: &[ShardRun]) -> anyhow::Result<RunReport> {
    check(shards)?;
    let first = &shards[0].record;
    let summary = summarize(shards);
    let thresholds = first
        .thresholds
        .iter()
        .map(|text| crate::thresholds::parse(text).map_err(|e| anyhow::anyhow!("threshold '{text}': {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let results = crate::thresholds::evaluate_all(&thresholds, &summary);
    Ok(RunReport {
        format: crate::report::FORMAT,
        meta: meta(shards),
        summary,
        thresholds: results,
        captured: Vec::new(),
        race: None,
        shard: None,
    })
}

/// Shards whose measured parts began more than [`TOGETHER`] apart did not
/// put their load on the server at once: their summed rate was never
/// reached. Said, and the verdict is invalid.
fn apart(shards: &[ShardRun]) -> Option<String> {
    let starts = shards.iter().map(|s| s.record.clock.measure_start);
    let (first, last) = starts.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), t| {
        (a.min(t), b.max(t))
    });
    (last - first > TOGETHER).then(|| {
        format!(
            "the shards did not run together: their measured parts began up to {:.1} s apart (more than {TOGETHER} s), so the load summed here never reached the server at once; start them with one --start-at",
            last - first
        )
    })
}

/// How far apart shards may start and still count as one run, in seconds.
const TOGETHER: f64 = 1.0;

/// Seconds each shard's measured part began after the earliest one's, so
/// that second `n` of every shard is one wall-clock second.
fn offsets(shards: &[ShardRun]) -> Vec<u32> {
    let earliest = shards
        .iter()
        .map(|s| s.record.clock.measure_start)
        .fold(f64::INFINITY, f64::min);
    shards
        .iter()
        .map(|s| {
            (s.record.clock.measure_start - earliest)
                .round()
                .clamp(0.0, 86_400.0) as u32
        })
        .collect()
}

/// The merged run's summary, its verdict and warnings whole: derived as a
/// single run's is, from the shards' recorders added up.
fn summarize(shards: &[ShardRun]) -> RunSummary {
    let first = &shards[0].record;
    let (total, stage_totals) = added_up(shards);
    let offsets = offsets(shards);
    let seconds = span(shards);
    let (due, unsent) = shards
        .iter()
        .fold((0, 0), |(d, u), s| (d + s.record.due, u + s.record.unsent));
    let had = |of: fn(&RunSummary) -> bool| shards.iter().any(|s| of(&s.results.report.summary));
    let of_each = |of: fn(&RunSummary) -> u64| shards.iter().map(|s| of(&s.results.report.summary)).sum();
    let recorded = stats::Recorded {
        methods: &first.methods,
        total,
        stages: stage_totals,
        stage_bounds: &first.stage_bounds,
    };
    let ending = stats::Ending {
        seconds,
        wall: seconds,
        // Shards run on their own clocks: the longest pause of any.
        paused: (shards.iter())
            .map(|s| s.results.report.summary.paused_seconds)
            .fold(0.0, f64::max),
        schedule: first.open.then_some(stats::Due { due, unsent }),
        rate: first.rate,
        planned_connections: (shards.iter())
            .map(|s| s.results.report.meta.load.connections as u64)
            .sum(),
        subscribed: had(|s| s.subscriptions.is_some()),
        set_up: had(|s| s.setup.is_some()),
        flows_in_flight: flows_in_flight(shards),
        // The shards' plans are not kept whole: how many callers each had
        // is not known here, so only the late requests' own cause counts.
        callers: None,
        callers_busy_at_end: of_each(|s| s.callers_busy_at_end),
        in_flight_at_end: shards.iter().map(|s| s.record.in_flight_at_end).sum(),
        panicked: shards.iter().map(|s| s.record.panicked_connections).sum(),
        cpu: client_cpu(shards),
        partial: shards.iter().any(|s| s.record.partial),
    };
    let mut summary = RunSummary::derive(recorded, ending);
    if let Some(apart) = apart(shards) {
        summary.verdict.valid = false;
        summary.verdict.reasons.push(apart);
    }
    let (timeseries, latency_log) = seconds_lined_up(shards, &offsets);
    summary.timeseries = timeseries;
    summary.latency_log = latency_log;
    summary.samples = samples_lined_up(shards, &offsets);
    summary.warnings = warnings(shards);
    stats::weigh_answers(&mut summary);
    summary
}

/// The merged run's measured seconds: from the first shard's measured
/// start to the last one's end, by the wall clock.
fn span(shards: &[ShardRun]) -> f64 {
    let earliest = (shards.iter())
        .map(|s| s.record.clock.measure_start)
        .fold(f64::INFINITY, f64::min);
    (shards.iter())
        .map(|s| (s.record.clock.measure_start - earliest).max(0.0) + s.record.measured_seconds)
        .fold(0.0, f64::max)
}

/// Each flow's still going at the shards' ends, added up by name, in the
/// first shard's order.
fn flows_in_flight(shards: &[ShardRun]) -> Vec<u64> {
    let first = &shards[0].results.report.summary.flows;
    (first.iter())
        .map(|flow| {
            (shards.iter())
                .flat_map(|s| &s.results.report.summary.flows)
                .filter(|f| f.flow == flow.flow)
                .map(|f| f.in_flight_at_end)
                .sum()
        })
        .collect()
}

/// What a reader of the merged run must know: that it was merged, each
/// shard's late start, and each shard's own warnings, said of it.
fn warnings(shards: &[ShardRun]) -> Vec<Warning> {
    let mut warnings = vec![Warning::new(
        WarningCode::Merged,
        format!(
            "merged from {} shards of one run: counts summed, histograms added, seconds lined up by the wall clock",
            shards.len()
        ),
    )];
    for shard in shards {
        let name = format!("{}/{}", shard.record.index, shard.record.count);
        if let Some(late) = shard.record.clock.late_s.filter(|l| *l > 0.0) {
            warnings.push(Warning::new(
                WarningCode::LateStart,
                format!("shard {name} started {late:.3} s after --start-at"),
            ));
        }
        // A shard's note that the whole judges its thresholds is done with
        // once the whole is here.
        let own =
            (shard.results.report.summary.warnings.iter()).filter(|w| w.code != WarningCode::ShardThresholds);
        warnings.extend(own.map(|w| w.of_shard(&name)));
    }
    warnings
}

/// Every shard's recorders added: the whole run's, and each stage's.
fn added_up(shards: &[ShardRun]) -> (Recorder, Vec<Recorder>) {
    let first = &shards[0].record;
    let mut total = Recorder::new(first.methods.len());
    let mut stages = vec![Recorder::new(first.methods.len()); first.stage_bounds.len()];
    for shard in shards {
        total.merge(&shard.total);
        for (into, stage) in stages.iter_mut().zip(&shard.stages) {
            into.merge(stage);
        }
    }
    (total, stages)
}

/// The shards' CPU together; its busy share the busiest shard's: one
/// saturated client taints the whole.
fn client_cpu(shards: &[ShardRun]) -> ClientCpu {
    ClientCpu {
        seconds: shards.iter().map(|s| s.record.cpu.seconds).sum(),
        threads: shards.iter().map(|s| s.record.cpu.threads).sum(),
        busy_share: shards.iter().map(|s| s.record.cpu.busy_share).fold(0.0, f64::max),
    }
}

/// Each wall-clock second's row and histograms, every shard's added.
fn seconds_lined_up(shards: &[ShardRun], offsets: &[u32]) -> (Vec<SecondRow>, LatencyLog) {
    // (tag, second) → the histogram and the longest length.
    let mut histograms: BTreeMap<(u32, String), (Histogram<u64>, f64)> = BTreeMap::new();
    let mut rows: BTreeMap<u32, SecondRow> = BTreeMap::new();
    for (shard, offset) in shards.iter().zip(offsets) {
        for (tag, seconds) in &shard.results.seconds {
            for (histogram, length, start) in seconds {
                let second = (start.round().clamp(0.0, 1e9) as u32).saturating_add(*offset);
                let (into, longest) = histograms
                    .entry((second, tag.clone()))
                    .or_insert_with(|| (stats::new_histogram(), 0.0));
                // Volley's own histograms add; one that does not is left out.
                if into.add(histogram).is_ok() {
                    *longest = f64::max(*longest, *length);
                }
            }
        }
        for row in &shard.results.report.summary.timeseries {
            add_row(&mut rows, row, *offset);
        }
    }
    let mut log = LatencyLog::default();
    for ((second, tag), (histogram, length)) in &histograms {
        let length = Duration::from_secs_f64(length.clamp(0.0, 1.0));
        log.push(*second, length, tag.clone(), histogram);
        if tag == stats::TOTAL_TAG {
            if let Some(row) = rows.get_mut(second) {
                let latency = LatencySummary::from_micros(histogram);
                (row.p50_ms, row.p99_ms, row.max_ms) = (latency.p50_ms, latency.p99_ms, latency.max_ms);
            }
        }
    }
    log.intervals.sort_by_key(|i| i.second);
    (rows.into_values().collect(), log)
}

/// Each wall-clock quarter second's samples, every shard's added: calls
/// and errors exactly; p50 and p99 as the shards' own, weighted by their
/// calls (a sample keeps no histogram to add). A shard without samples
/// adds none.
fn samples_lined_up(shards: &[ShardRun], offsets: &[u32]) -> Vec<Sample> {
    // (tick, method) → the sample so far, and the calls behind its quantiles.
    let mut lined: BTreeMap<(u32, String), (Sample, u64)> = BTreeMap::new();
    for (shard, offset) in shards.iter().zip(offsets) {
        let shift = offset.saturating_mul(stats::SAMPLES_PER_SECOND);
        for sample in shard.results.samples.iter().flatten() {
            let tick = sample.tick.saturating_add(shift);
            let (into, weighed) = lined.entry((tick, sample.method.clone())).or_insert_with(|| {
                (
                    Sample {
                        tick,
                        calls: 0,
                        errors: 0,
                        p50_ms: None,
                        p99_ms: None,
                        ..sample.clone()
                    },
                    0,
                )
            });
            into.length_s = into.length_s.max(sample.length_s);
            into.calls = into.calls.saturating_add(sample.calls);
            into.errors = into.errors.saturating_add(sample.errors);
            if let (Some(p50), Some(p99)) = (sample.p50_ms, sample.p99_ms) {
                let (w, n) = (*weighed as f64, sample.calls.max(1) as f64);
                let mean =
                    |so_far: Option<f64>, value: f64| Some((so_far.unwrap_or(0.0) * w + value * n) / (w + n));
                into.p50_ms = mean(into.p50_ms, p50);
                into.p99_ms = mean(into.p99_ms, p99);
                *weighed += sample.calls.max(1);
            }
        }
    }
    lined.into_values().map(|(sample, _)| sample).collect()
}

/// Adds one shard's row of `timeseries` (from its summary.json) into the
/// row of its wall-clock second.
fn add_row(rows: &mut BTreeMap<u32, SecondRow>, row: &SecondRow, offset: u32) {
    let second = row.second.saturating_add(offset);
    let into = rows.entry(second).or_insert_with(|| SecondRow {
        second,
        calls: 0,
        ok: 0,
        errors: 0,
        rps: 0.0,
        p50_ms: 0.0,
        p99_ms: 0.0,
        max_ms: 0.0,
        error_outcomes: BTreeMap::new(),
        flows: 0,
        flow_errors: 0,
        server_cpu_cores: None,
        server_rss_bytes: None,
    });
    into.calls = into.calls.saturating_add(row.calls);
    into.ok = into.ok.saturating_add(row.ok);
    into.errors = into.errors.saturating_add(row.errors);
    into.flows = into.flows.saturating_add(row.flows);
    into.flow_errors = into.flow_errors.saturating_add(row.flow_errors);
    into.rps += row.rps;
    for (name, n) in &row.error_outcomes {
        let count = into.error_outcomes.entry(name).or_insert(0);
        *count = count.saturating_add(*n);
    }
}

/// What was run: the first shard's, with the load summed over the shards,
/// the earliest start and the latest end.
fn meta(shards: &[ShardRun]) -> RunMeta {
    let metas: Vec<&RunMeta> = shards.iter().map(|s| &s.results.report.meta).collect();
    let sum = |of: fn(&LoadMeta) -> Option<u64>| metas.iter().filter_map(|m| of(&m.load)).sum::<u64>();
    let (first, load) = (&shards[0].record, &metas[0].load);
    RunMeta {
        tool: "volley".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        scenario: first.scenario.clone(),
        scenario_file: metas[0].scenario_file.clone(),
        target: metas[0].target.clone(),
        transport: metas[0].transport.clone(),
        jsonrpc: metas[0].jsonrpc.clone(),
        tls: metas[0].tls.clone(),
        load: LoadMeta {
            model: if first.open { "open" } else { "closed" },
            rate: first.rate,
            concurrency: load
                .concurrency
                .map(|_| sum(|l| l.concurrency.map(|c| c as u64)) as usize),
            connections: sum(|l| Some(l.connections as u64)) as usize,
            duration_s: load.duration_s,
            requests: load.requests.map(|_| sum(|l| l.requests)),
            warmup_s: load.warmup_s,
            timeout_s: load.timeout_s,
            grace_s: load.grace_s,
            threads: sum(|l| Some(l.threads as u64)) as usize,
            stages: first.stage_bounds.len(),
            shard: None,
            recorded_pace: load.recorded_pace,
            pipeline: load.pipeline,
        },
        seed: first.seed,
        started_at: metas
            .iter()
            .map(|m| m.started_at.clone())
            .min()
            .unwrap_or_default(),
        ended_at: metas.iter().map(|m| m.ended_at.clone()).max().unwrap_or_default(),
        header_names: metas[0].header_names.clone(),
    }
}
