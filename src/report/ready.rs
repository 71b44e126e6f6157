//! A stdio server's readiness in words, for the table: how many children
//! were spawned, how fast each answered and was ready, its memory then.

use crate::stats::{ReadySummary, Spread};

/// `ready ($/progress /value/kind = "end"): 6 spawns · first answer p50
/// 12.1 ms (4.0 to 20.2) · ready p50 105.3 ms (90.1 to 130.0) · resident
/// at ready p50 45.2 MB, at the end p50 50.1 MB`.
pub fn ready_line(ready: &ReadySummary) -> String {
    let signal = ready.signal.as_deref().unwrap_or("its first answer");
    let ms = |what: &str, s: &Option<Spread>| match s {
        Some(s) => format!("{what} p50 {:.1} ms ({:.1} to {:.1})", s.p50, s.min, s.max),
        None => format!("{what}: none"),
    };
    let mb = |s: &Option<Spread>| s.map_or("-".to_string(), |s| format!("p50 {:.1} MB", s.p50 / 1e6));
    let mut line = format!(
        "ready ({signal}): {} · {} · {} · resident at ready {}, at the end {}",
        crate::stats::count(ready.spawns, "spawn"),
        ms("first answer", &ready.first_answer_ms),
        ms("ready", &ready.ready_ms),
        mb(&ready.rss_at_ready_bytes),
        mb(&ready.rss_at_end_bytes),
    );
    if ready.never_ready > 0 {
        line.push_str(&format!(" · {} never ready", ready.never_ready));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::ChildReady;

    #[test]
    fn the_line_says_the_signal_the_spread_and_the_children_never_ready() {
        let child = |first: f64, ready: Option<f64>| ChildReady {
            pid: 7,
            calls: 10,
            first_answer_ms: Some(first),
            ready_ms: ready,
            rss_at_ready_bytes: ready.map(|_| 45_200_000),
            rss_at_end_bytes: Some(50_100_000),
        };
        let summary = ReadySummary::of(
            Some("$/progress /value/kind = \"end\"".into()),
            vec![
                child(4.0, Some(90.1)),
                child(12.1, Some(105.3)),
                child(20.2, None),
            ],
        );
        assert_eq!(
            ready_line(&summary),
            "ready ($/progress /value/kind = \"end\"): 3 spawns · first answer p50 12.1 ms (4.0 to 20.2) · ready p50 90.1 ms (90.1 to 105.3) · resident at ready p50 45.2 MB, at the end p50 50.1 MB · 1 never ready"
        );
        let plain = ReadySummary::of(None, vec![child(3.0, Some(3.0))]);
        assert!(
            ready_line(&plain).starts_with("ready (its first answer): 1 spawn ·"),
            "{}",
            ready_line(&plain)
        );
    }
}
