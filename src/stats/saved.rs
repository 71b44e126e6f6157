//! A recorder written to a file and read back whole: every count and every
//! histogram (HdrHistogram's V2 encoding, in base64), so that the figures of
//! runs made apart (the shards of one run) can be added exactly, as the
//! engine adds its threads' figures, instead of averaged from percentiles.
//!
//! Read back from a file, so from outside: names are checked against the
//! ones volley knows and a histogram that does not decode is an error, never
//! a panic or a guess.

use std::collections::BTreeMap;

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{new_histogram, ErrorExample, MethodStats, OutcomeKind, ProtocolKind, Recorder};

/// One method's counts, by name.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SavedMethod {
    pub latency: String,
    pub service: String,
    pub answer_bytes: String,
    pub outcomes: BTreeMap<String, u64>,
    pub protocol: BTreeMap<String, u64>,
    pub rpc_codes: Vec<(i64, u64)>,
    pub http_statuses: Vec<(u16, u64)>,
    pub examples: Vec<String>,
    pub error_examples: BTreeMap<String, Vec<ErrorExample>>,
}

/// A [`Recorder`] as it is written.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SavedRecorder {
    pub methods: Vec<SavedMethod>,
    pub start_delay: String,
    pub requests: u64,
    pub statuses: Vec<(u16, u64)>,
    pub extra_entries: u64,
    pub batch_latency: String,
    pub batch_sizes: String,
    pub setup_ok: u64,
    pub setup_failed: u64,
    pub setup_error: Option<String>,
    pub unsolicited: u64,
    /// Written by volley 0.2.1 and later: older records read it as 0.
    #[serde(default)]
    pub late_for_connections: u64,
    pub children_exited: u64,
    pub child_exit: Option<String>,
    pub subscriptions: u64,
    pub notifications: u64,
    pub notification_gaps: String,
    pub connect_time: String,
    pub connections_opened: u64,
    pub connections_reopened: u64,
    pub connections_failed: u64,
    pub connect_error: Option<String>,
    /// Absent from a shard of a volley before `reconnect_every`: none.
    #[serde(default)]
    pub connections_recycled: u64,
    /// Each setup call's time; absent from a shard of a volley that did
    /// not time them (then no figure, never zeros).
    #[serde(default)]
    pub setup_time: Option<String>,
    /// Absent from a shard of a volley before they were counted: none.
    #[serde(default)]
    pub backoff_waits: u64,
    #[serde(default)]
    pub backoff_micros: u64,
    /// Each flow's counts; its rows are the last of `methods`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<SavedFlow>,
}

/// A flow's counts as `shard.json` holds them.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SavedFlow {
    /// Per step, the flows that stopped there, by outcome name.
    pub failed_at: Vec<BTreeMap<String, u64>>,
    pub skipped: u64,
    /// Absent from a shard of a volley before `max_flows`: none.
    #[serde(default)]
    pub held: u64,
}

impl SavedFlow {
    fn of(counts: &super::FlowCounts) -> Self {
        SavedFlow {
            failed_at: (counts.failed_at.iter())
                .map(|outcomes| by_name(OutcomeKind::ALL.iter().map(|k| k.name()), outcomes))
                .collect(),
            skipped: counts.skipped,
            held: counts.held,
        }
    }

    fn restore(&self) -> Result<super::FlowCounts, String> {
        let mut counts = super::FlowCounts::new(self.failed_at.len());
        for (step, outcomes) in self.failed_at.iter().enumerate() {
            for (name, n) in outcomes {
                let at = (OutcomeKind::ALL.iter())
                    .position(|k| k.name() == name)
                    .ok_or_else(|| format!("unknown outcome '{name}'"))?;
                counts.failed_at[step][at] = *n;
            }
        }
        counts.skipped = self.skipped;
        counts.held = self.held;
        Ok(counts)
    }
}

impl SavedRecorder {
    pub fn of(recorder: &Recorder) -> Self {
        SavedRecorder {
            methods: recorder.methods.iter().map(save_method).collect(),
            start_delay: encode(&recorder.start_delay),
            requests: recorder.requests,
            statuses: recorder.statuses.clone(),
            extra_entries: recorder.extra_entries,
            batch_latency: encode(&recorder.batch_latency),
            batch_sizes: encode(&recorder.batch_sizes),
            setup_ok: recorder.setup_ok,
            setup_failed: recorder.setup_failed,
            setup_error: recorder.setup_error.clone(),
            unsolicited: recorder.unsolicited,
            late_for_connections: recorder.late_for_connections,
            children_exited: recorder.children_exited,
            child_exit: recorder.child_exit.clone(),
            subscriptions: recorder.subscriptions,
            notifications: recorder.notifications,
            notification_gaps: encode(&recorder.notification_gaps),
            connect_time: encode(&recorder.connects.time),
            connections_opened: recorder.connects.opened,
            connections_reopened: recorder.connects.reopened,
            connections_failed: recorder.connects.failed,
            connect_error: recorder.connects.error.clone(),
            connections_recycled: recorder.connects.recycled,
            setup_time: Some(encode(&recorder.connects.setup_time)),
            backoff_waits: recorder.connects.backoff_waits,
            backoff_micros: recorder.connects.backoff_micros,
            flows: recorder.flows.iter().map(SavedFlow::of).collect(),
        }
    }

    /// The recorder again; an error names what does not read.
    pub fn restore(&self) -> Result<Recorder, String> {
        let mut recorder = Recorder::new(0);
        for (index, method) in self.methods.iter().enumerate() {
            recorder
                .methods
                .push(restore_method(method).map_err(|e| format!("method {index}: {e}"))?);
        }
        recorder.start_delay = decode(&self.start_delay, "start_delay")?;
        recorder.requests = self.requests;
        recorder.statuses.clone_from(&self.statuses);
        recorder.extra_entries = self.extra_entries;
        recorder.batch_latency = decode(&self.batch_latency, "batch_latency")?;
        recorder.batch_sizes = decode(&self.batch_sizes, "batch_sizes")?;
        recorder.setup_ok = self.setup_ok;
        recorder.setup_failed = self.setup_failed;
        recorder.setup_error.clone_from(&self.setup_error);
        recorder.unsolicited = self.unsolicited;
        recorder.late_for_connections = self.late_for_connections;
        recorder.children_exited = self.children_exited;
        recorder.child_exit.clone_from(&self.child_exit);
        recorder.subscriptions = self.subscriptions;
        recorder.notifications = self.notifications;
        recorder.notification_gaps = decode(&self.notification_gaps, "notification_gaps")?;
        recorder.connects = super::Connects {
            time: decode(&self.connect_time, "connect_time")?,
            opened: self.connections_opened,
            reopened: self.connections_reopened,
            failed: self.connections_failed,
            error: self.connect_error.clone(),
            recycled: self.connections_recycled,
            setup_time: match &self.setup_time {
                Some(encoded) => decode(encoded, "setup_time")?,
                None => new_histogram(),
            },
            backoff_waits: self.backoff_waits,
            backoff_micros: self.backoff_micros,
        };
        for (index, flow) in self.flows.iter().enumerate() {
            recorder
                .flows
                .push(flow.restore().map_err(|e| format!("flow {index}: {e}"))?);
        }
        Ok(recorder)
    }
}

fn save_method(stats: &MethodStats) -> SavedMethod {
    SavedMethod {
        latency: encode(&stats.latency),
        service: encode(&stats.service),
        answer_bytes: encode(&stats.answer_bytes),
        outcomes: by_name(OutcomeKind::ALL.iter().map(|k| k.name()), &stats.outcomes),
        protocol: by_name(ProtocolKind::ALL.iter().map(|k| k.name()), &stats.protocol),
        rpc_codes: stats.rpc_codes.clone(),
        http_statuses: stats.http_statuses.clone(),
        examples: stats.examples.clone(),
        error_examples: OutcomeKind::ALL
            .iter()
            .filter(|k| !stats.error_examples[**k as usize].is_empty())
            .map(|k| (k.name().to_string(), stats.error_examples[*k as usize].clone()))
            .collect(),
    }
}

fn restore_method(saved: &SavedMethod) -> Result<MethodStats, String> {
    let mut stats = MethodStats {
        latency: decode(&saved.latency, "latency")?,
        service: decode(&saved.service, "service")?,
        answer_bytes: decode(&saved.answer_bytes, "answer_bytes")?,
        rpc_codes: saved.rpc_codes.clone(),
        http_statuses: saved.http_statuses.clone(),
        examples: saved.examples.clone(),
        ..MethodStats::default()
    };
    let outcome = |name: &str| OutcomeKind::ALL.iter().position(|k| k.name() == name);
    let protocol = |name: &str| ProtocolKind::ALL.iter().position(|k| k.name() == name);
    for (name, &n) in &saved.outcomes {
        stats.outcomes[outcome(name).ok_or_else(|| format!("unknown outcome '{name}'"))?] = n;
    }
    for (name, &n) in &saved.protocol {
        stats.protocol[protocol(name).ok_or_else(|| format!("unknown protocol error '{name}'"))?] = n;
    }
    for (name, examples) in &saved.error_examples {
        let at = outcome(name).ok_or_else(|| format!("unknown outcome '{name}'"))?;
        stats.error_examples[at] = examples.clone();
    }
    Ok(stats)
}

fn by_name<'a>(names: impl Iterator<Item = &'a str>, counts: &[u64]) -> BTreeMap<String, u64> {
    names
        .zip(counts)
        .filter(|(_, n)| **n > 0)
        .map(|(name, n)| (name.to_string(), *n))
        .collect()
}

/// A histogram as base64 of its V2 encoding.
pub fn encode(histogram: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(histogram, &mut bytes)
        .expect("a histogram encodes into memory");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A histogram from base64 of its V2 encoding, recorded again into one of
/// volley's own (its precision, auto-resizing), so any two add up.
pub fn decode(text: &str, what: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("{what}: not base64 ({e})"))?;
    let read: Histogram<u64> = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| format!("{what}: not an HdrHistogram ({e:?})"))?;
    let mut histogram = new_histogram();
    for value in read.iter_recorded() {
        histogram
            .record_n(value.value_iterated_to(), value.count_at_value())
            .map_err(|e| format!("{what}: a value does not fit ({e:?})"))?;
    }
    Ok(histogram)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Cause, Outcome};
    use std::time::Duration;

    #[test]
    fn a_recorder_comes_back_with_every_count_and_value() {
        let ms = Duration::from_millis(1);
        let mut recorder = Recorder::new(2);
        recorder.methods[0].record(Outcome::Ok, ms * 3, ms, 40);
        recorder.methods[0].record(Outcome::RpcError(-32000), ms * 900, ms, 10);
        recorder.methods[1].record(Outcome::Protocol(ProtocolKind::IdMismatch), ms, ms, 5);
        recorder.methods[1].record(Outcome::HttpStatus(503), ms, ms, 0);
        recorder.methods[1].keep_example::<&str>("b", Outcome::Io, Cause::Transport(&"reset"), None, b"");
        recorder.methods[0].add_example(&"a result", b"{}");
        recorder.start_delay.record(1234).unwrap();
        recorder.record_batch(4, ms * 2);
        recorder.record_status(200);
        (recorder.requests, recorder.extra_entries, recorder.unsolicited) = (7, 1, 2);
        (recorder.setup_ok, recorder.setup_failed) = (3, 4);
        recorder.setup_error = Some("refused".into());
        (recorder.subscriptions, recorder.notifications) = (5, 6);
        recorder.notification_gaps.record(77).unwrap();
        recorder.note_child_exit("exit status: 1".into());
        recorder.connects.opened(ms * 2, true);
        recorder.connects.opened(ms, false);
        recorder.connects.failed("refused");
        recorder.connects.recycled = 8;
        recorder.connects.set_up(ms * 5);
        recorder.connects.backed_off(ms * 10);
        let text = serde_json::to_string(&SavedRecorder::of(&recorder)).unwrap();
        let back = serde_json::from_str::<SavedRecorder>(&text)
            .unwrap()
            .restore()
            .unwrap();
        assert_eq!(SavedRecorder::of(&back), SavedRecorder::of(&recorder));
        for (a, b) in back.methods.iter().zip(&recorder.methods) {
            assert_eq!(a.latency, b.latency);
            assert_eq!(a.service, b.service);
            assert_eq!(a.answer_bytes, b.answer_bytes);
            assert_eq!((a.outcomes, a.protocol), (b.outcomes, b.protocol));
            assert_eq!(a.error_examples, b.error_examples);
        }
        assert_eq!(
            back.methods[0].latency.max(),
            back.methods[0].latency.highest_equivalent(900_000)
        );
        assert_eq!((back.start_delay.len(), back.batch_sizes.max()), (1, 4));
        let c = &back.connects;
        assert_eq!((c.opened, c.reopened, c.failed, c.time.len()), (1, 1, 1, 2));
        assert_eq!((c.recycled, c.setup_time.len()), (8, 1));
        assert_eq!(
            (c.backoff_waits, c.backoff_micros),
            (1, 10 * ms.as_micros() as u64)
        );
        assert_eq!(c.error.as_deref(), Some("refused"));
        assert_eq!(
            (back.child_exit.as_deref(), back.children_exited),
            (Some("exit status: 1"), 1)
        );
    }

    #[test]
    fn what_does_not_read_is_an_error_naming_it() {
        let mut saved = SavedRecorder::of(&Recorder::new(1));
        saved.methods[0].latency = "not base64!".into();
        assert!(saved
            .restore()
            .err()
            .unwrap()
            .contains("method 0: latency: not base64"));
        saved.methods[0].latency =
            base64::engine::general_purpose::STANDARD.encode(b"\x1c\x84\x93\x13garbage");
        assert!(saved.restore().err().unwrap().contains("not an HdrHistogram"));
        let mut saved = SavedRecorder::of(&Recorder::new(1));
        saved.methods[0].outcomes.insert("lost".into(), 3);
        assert_eq!(saved.restore().err().unwrap(), "method 0: unknown outcome 'lost'");
    }
}
