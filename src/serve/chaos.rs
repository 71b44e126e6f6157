//! Misbehaving on purpose: `volley serve --chaos`, each fault with a
//! probability (or a schedule), each counted when applied so a test can hold
//! volley's outcome counts against the server's.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::RngExt;
use serde_json::Value;

/// One way of answering wrongly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    WrongId,
    IdType,
    BatchMissing,
    BatchDuplicate,
    BatchExtra,
    ResultAndError,
    WrongVersion,
    MissingVersion,
    /// HTTP 500 with a JSON-RPC error body.
    Http500Body,
    /// HTTP 500 with an empty body.
    Http500,
    Http503Body,
    Http503,
    /// HTTP 200 with an HTML page.
    Html,
    /// The answer cut in half, framed as complete.
    Truncated,
    /// The answer sent a few bytes at a time.
    Trickle,
    /// An answer far larger than any client limit.
    Oversized,
    /// The connection reset halfway through the answer.
    Reset,
    /// No answer at all.
    Hang,
}

impl Fault {
    pub const ALL: [Fault; 18] = [
        Fault::WrongId,
        Fault::IdType,
        Fault::BatchMissing,
        Fault::BatchDuplicate,
        Fault::BatchExtra,
        Fault::ResultAndError,
        Fault::WrongVersion,
        Fault::MissingVersion,
        Fault::Http500Body,
        Fault::Http500,
        Fault::Http503Body,
        Fault::Http503,
        Fault::Html,
        Fault::Truncated,
        Fault::Trickle,
        Fault::Oversized,
        Fault::Reset,
        Fault::Hang,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::WrongId => "wrong-id",
            Fault::IdType => "id-type",
            Fault::BatchMissing => "batch-missing",
            Fault::BatchDuplicate => "batch-duplicate",
            Fault::BatchExtra => "batch-extra",
            Fault::ResultAndError => "result-and-error",
            Fault::WrongVersion => "wrong-version",
            Fault::MissingVersion => "missing-version",
            Fault::Http500Body => "http-500-body",
            Fault::Http500 => "http-500",
            Fault::Http503Body => "http-503-body",
            Fault::Http503 => "http-503",
            Fault::Html => "html",
            Fault::Truncated => "truncated",
            Fault::Trickle => "trickle",
            Fault::Oversized => "oversized",
            Fault::Reset => "reset",
            Fault::Hang => "hang",
        }
    }

    /// Rewrites a JSON-RPC answer for the faults that live in the body;
    /// `None` when the answer has no part the fault could spoil.
    pub fn spoil(self, answer: &[u8]) -> Option<Vec<u8>> {
        let mut value: Value = serde_json::from_slice(answer).ok()?;
        match (self, &mut value) {
            (Fault::WrongId, Value::Object(o)) => {
                let id = o.get("id")?.as_u64()?;
                o.insert("id".into(), Value::from(id.wrapping_add(1_000_000_007)));
            }
            (Fault::IdType, Value::Object(o)) => {
                // The number as text: the same value, the wrong type.
                let id = o.get("id")?.as_u64()?;
                o.insert("id".into(), Value::String(id.to_string()));
            }
            (Fault::ResultAndError, Value::Object(o)) => {
                o.get("result")?;
                o.insert(
                    "error".into(),
                    serde_json::json!({"code": -32603, "message": "and an error"}),
                );
            }
            (Fault::WrongVersion, Value::Object(o)) => {
                o.insert("jsonrpc".into(), Value::String("1.0".into()));
            }
            (Fault::MissingVersion, Value::Object(o)) => {
                o.remove("jsonrpc")?;
            }
            (Fault::BatchMissing, Value::Array(a)) if !a.is_empty() => {
                a.pop();
            }
            (Fault::BatchDuplicate, Value::Array(a)) if !a.is_empty() => {
                let first = a[0].clone();
                a.push(first);
            }
            (Fault::BatchExtra, Value::Array(a)) if !a.is_empty() => {
                a.push(serde_json::json!({"jsonrpc": "2.0", "result": "extra", "id": u64::MAX}));
            }
            _ => return None,
        }
        serde_json::to_vec(&value).ok()
    }
}

/// The faults a server applies, and when.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chaos {
    /// At most one fault per request, tried in this order.
    pub faults: Vec<(Fault, f64)>,
    /// Hold every answer for `.0` at the start of each period `.1`.
    pub stall: Option<(Duration, Duration)>,
    /// Close the listener and every connection for `.0` every `.1`.
    pub outage: Option<(Duration, Duration)>,
}

impl Chaos {
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty() && self.stall.is_none() && self.outage.is_none()
    }

    pub fn pick<R: RngExt>(&self, rng: &mut R) -> Option<Fault> {
        self.faults
            .iter()
            .find(|(_, p)| rng.random_bool(*p))
            .map(|(f, _)| *f)
    }
}

impl FromStr for Chaos {
    type Err = String;

    /// `wrong-id=0.1,hang=0.01,stall=200ms/2s,outage=1s/5s`; a fault
    /// without `=P` applies to every request.
    fn from_str(text: &str) -> Result<Self, String> {
        let mut chaos = Chaos::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            let schedule = |value: &str| -> Result<(Duration, Duration), String> {
                let (length, every) = value
                    .split_once('/')
                    .ok_or_else(|| format!("`{part}`: expected {name}=LENGTH/EVERY, e.g. 200ms/2s"))?;
                let parse = |t: &str| humantime::parse_duration(t).map_err(|e| format!("`{part}`: {e}"));
                let (length, every) = (parse(length)?, parse(every)?);
                if length >= every {
                    return Err(format!("`{part}`: the length must be shorter than the period"));
                }
                Ok((length, every))
            };
            match name {
                "stall" => chaos.stall = Some(schedule(value)?),
                "outage" => chaos.outage = Some(schedule(value)?),
                _ => {
                    let fault = Fault::ALL.iter().find(|f| f.name() == name).ok_or_else(|| {
                        let known: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
                        format!(
                            "unknown fault `{name}`; known: {}, stall, outage",
                            known.join(", ")
                        )
                    })?;
                    let p: f64 = if value.is_empty() {
                        1.0
                    } else {
                        value
                            .parse()
                            .map_err(|_| format!("`{part}`: the probability must be a number"))?
                    };
                    if !(0.0..=1.0).contains(&p) {
                        return Err(format!("`{part}`: the probability must be between 0 and 1"));
                    }
                    chaos.faults.push((*fault, p));
                }
            }
        }
        Ok(chaos)
    }
}

impl fmt::Display for Chaos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self
            .faults
            .iter()
            .map(|(fault, p)| format!("{}={p}", fault.name()))
            .collect();
        let h = |d: &Duration| humantime::format_duration(*d).to_string();
        if let Some((l, e)) = &self.stall {
            parts.push(format!("stall={}/{}", h(l), h(e)));
        }
        if let Some((l, e)) = &self.outage {
            parts.push(format!("outage={}/{}", h(l), h(e)));
        }
        f.write_str(if parts.is_empty() { "none" } else { "" })?;
        f.write_str(&parts.join(","))
    }
}

/// What the server did wrong, fault by fault.
#[derive(Debug, Default)]
pub struct ChaosCounts {
    applied: [AtomicU64; Fault::ALL.len()],
    /// Answers held by a stall.
    pub stalled: AtomicU64,
    pub outages: AtomicU64,
}

impl ChaosCounts {
    pub fn count(&self, fault: Fault) {
        self.applied[fault as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self, fault: Fault) -> u64 {
        self.applied[fault as usize].load(Ordering::Relaxed)
    }

    /// Faults applied at least once, for the server's closing line.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = Fault::ALL
            .iter()
            .filter(|f| self.get(**f) > 0)
            .map(|f| format!("{} {}", f.name(), self.get(*f)))
            .collect();
        for (name, n) in [("stalled", &self.stalled), ("outages", &self.outages)] {
            let n = n.load(Ordering::Relaxed);
            if n > 0 {
                parts.push(format!("{name} {n}"));
            }
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_faults_and_schedules() {
        let chaos: Chaos = "wrong-id=0.1, hang, stall=200ms/2s,outage=1s/5s".parse().unwrap();
        assert_eq!(chaos.faults, vec![(Fault::WrongId, 0.1), (Fault::Hang, 1.0)]);
        assert_eq!(
            chaos.stall,
            Some((Duration::from_millis(200), Duration::from_secs(2)))
        );
        assert_eq!(
            chaos.outage,
            Some((Duration::from_secs(1), Duration::from_secs(5)))
        );
        assert!("nope=0.1"
            .parse::<Chaos>()
            .unwrap_err()
            .contains("unknown fault `nope`"));
        assert!("hang=2".parse::<Chaos>().is_err());
        assert!("stall=2s/1s".parse::<Chaos>().is_err());
    }

    #[test]
    fn body_faults_spoil_the_right_part() {
        let one = br#"{"jsonrpc":"2.0","result":"0x1","id":5}"#;
        let spoiled = |f: Fault| serde_json::from_slice::<Value>(&f.spoil(one).unwrap()).unwrap();
        assert_eq!(spoiled(Fault::WrongId)["id"], 1_000_000_012u64);
        assert_eq!(spoiled(Fault::IdType)["id"], "5");
        assert_eq!(spoiled(Fault::WrongVersion)["jsonrpc"], "1.0");
        assert!(spoiled(Fault::MissingVersion).get("jsonrpc").is_none());
        assert!(spoiled(Fault::ResultAndError).get("error").is_some());
        assert_eq!(Fault::BatchMissing.spoil(one), None);
        let batch = br#"[{"jsonrpc":"2.0","result":1,"id":1},{"jsonrpc":"2.0","result":2,"id":2}]"#;
        let len = |f: Fault| {
            serde_json::from_slice::<Vec<Value>>(&f.spoil(batch).unwrap())
                .unwrap()
                .len()
        };
        assert_eq!(
            (
                len(Fault::BatchMissing),
                len(Fault::BatchDuplicate),
                len(Fault::BatchExtra)
            ),
            (1, 3, 3)
        );
    }
}
