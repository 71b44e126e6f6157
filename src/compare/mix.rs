//! Whether two runs sent the same mix: the same methods, each the same
//! share of the calls. A run whose weights changed is another load, not a
//! regression of its methods.

use super::Read;
use crate::results::SavedRun;

/// The methods every run called (and the total); a method only some
/// called is a mix that differs, and the runs are not compared.
pub(super) fn common_methods(base: &[Read], cur: &Read, notes: &mut Vec<String>) -> Vec<String> {
    let names = |run: &SavedRun| -> Vec<String> {
        (run.report.summary.methods.iter())
            .map(|m| m.method.clone())
            .collect()
    };
    let current = names(&cur.run);
    let every_base = |m: &String| base.iter().all(|b| names(&b.run).contains(m));
    let mut methods: Vec<String> = current.iter().filter(|m| every_base(m)).cloned().collect();
    let alone: Vec<&str> = (current.iter().filter(|m| !methods.contains(m)))
        .map(String::as_str)
        .collect();
    if !alone.is_empty() {
        notes.push(format!(
            "the mixes differ: only the current run called {}",
            alone.join(", ")
        ));
    }
    let missing: Vec<String> = (base.iter().flat_map(|b| names(&b.run)))
        .filter(|m| !current.contains(m))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !missing.is_empty() {
        notes.push(format!(
            "the mixes differ: only the baseline called {}",
            missing.join(", ")
        ));
    }
    methods.push(crate::stats::TOTAL_TAG.to_string());
    methods
}

/// How far apart (in standard errors) two runs' shares of one method must
/// be to tell changed weights from the draw: six is past any chance of a
/// run's draw (seeds differ, or a run ends mid-mix), and a share that
/// moved by 3 points or more at once.
const APART_SE: f64 = 6.0;
const APART_POINTS: f64 = 0.03;

/// Each method whose share of the calls differs between a baseline and the
/// current run by more than the draw could make it: the weights changed.
pub(super) fn shares_differ(base: &[Read], cur: &Read) -> Vec<String> {
    let mut differ = Vec::new();
    let current = &cur.run.report.summary;
    for b in base {
        let baseline = &b.run.report.summary;
        for method in &current.methods {
            let Some(was) = baseline.methods.iter().find(|m| m.method == method.method) else {
                continue;
            };
            let (p1, n1) = share(&b.run, &was.method);
            let (p2, n2) = share(&cur.run, &method.method);
            if apart((p1, n1), (p2, n2)) {
                let line = format!(
                    "the mixes differ: {} was {:.1}% of the calls in {} against {:.1}% (the weights changed?)",
                    method.method,
                    p1 * 100.0,
                    b.dir.display(),
                    p2 * 100.0
                );
                differ.push(line);
            }
        }
    }
    differ
}

/// A method's share of a run's calls, and the run's calls.
fn share(run: &SavedRun, method: &str) -> (f64, f64) {
    let methods = &run.report.summary.methods;
    let all: u64 = methods.iter().map(|m| m.calls).sum();
    let mine = methods.iter().find(|m| m.method == method).map_or(0, |m| m.calls);
    (mine as f64 / all.max(1) as f64, all as f64)
}

/// Whether two shares are further apart than the draw makes them (a
/// two-proportion z past `APART_SE`, and `APART_POINTS` or more).
fn apart((p1, n1): (f64, f64), (p2, n2): (f64, f64)) -> bool {
    if n1 < 1.0 || n2 < 1.0 {
        return false;
    }
    let pooled = (p1 * n1 + p2 * n2) / (n1 + n2);
    let se = (pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)).sqrt();
    (p1 - p2).abs() >= APART_POINTS && (se == 0.0 || (p1 - p2).abs() / se > APART_SE)
}

#[cfg(test)]
mod tests {
    use super::apart;

    #[test]
    fn changed_weights_are_told_from_the_draw() {
        // 3:1 against 3:3 over a few thousand calls: far apart.
        assert!(apart((0.25, 3000.0), (0.5, 3000.0)));
        // The same weights drawn with two seeds: 25.0% against 25.9% of
        // 3,000 calls is under a standard error and a half.
        assert!(!apart((0.25, 3000.0), (0.259, 3000.0)));
        // A share far from the other in a few calls is still the draw.
        assert!(!apart((0.25, 20.0), (0.45, 20.0)));
        // Big runs: a tenth of a point is many standard errors, but too
        // small a move to be a changed weight.
        assert!(!apart((0.25, 5e7), (0.251, 5e7)));
        assert!(
            !apart((0.5, 0.0), (0.2, 100.0)),
            "a run with no calls says nothing"
        );
    }
}
