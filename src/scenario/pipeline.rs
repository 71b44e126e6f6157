//! HTTP/1.1 pipelining (`pipeline`, `--pipeline N`): how deep it may go,
//! and which targets it applies to. One home for both, asked of a file's
//! key and of the flag alike.

use super::{Scenario, TargetSpec};

/// Past this a depth is a typo: a server's socket buffer holds far fewer
/// requests, and wrk and gcannon stop at this or below.
pub const MAX_PIPELINE: u64 = 1024;

/// A pipeline depth from a file or a flag: 1 (no pipelining) to
/// `MAX_PIPELINE`.
pub(super) fn check_depth(depth: i64) -> Result<usize, String> {
    match u64::try_from(depth) {
        Ok(d @ 1..=MAX_PIPELINE) => Ok(d as usize),
        _ => Err(format!(
            "pipeline must be from 1 (no pipelining) to {MAX_PIPELINE} requests in flight on a connection, not {depth}"
        )),
    }
}

impl Scenario {
    /// Why this scenario cannot pipeline, if it cannot: pipelining is
    /// HTTP/1.1's; HTTP/2 and the stream transports already carry many
    /// calls on a connection (`--max-in-flight`).
    pub(super) fn pipeline_refusal(&self) -> Option<String> {
        if self.pipeline <= 1 {
            return None;
        }
        if self.http2 {
            return Some("pipelining is HTTP/1.1's: HTTP/2 carries many calls on a connection already (--max-in-flight)".into());
        }
        let specs = std::iter::once(&self.target).chain(self.targets.iter().map(|t| &t.spec));
        for spec in specs {
            let http = match spec {
                TargetSpec::Builtin => true,
                TargetSpec::Url(url) => matches!(
                    crate::transport::Scheme::of(url),
                    Some(crate::transport::Scheme::Http | crate::transport::Scheme::Https)
                ),
                TargetSpec::Command { .. } => false,
            };
            if !http {
                return Some(format!(
                    "pipelining is HTTP/1.1's, and `{spec}` is not an http:// or https:// target: its transport carries many calls on a connection already (--max-in-flight)"
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_depth_is_from_1_to_the_most() {
        assert_eq!(check_depth(1), Ok(1));
        assert_eq!(check_depth(16), Ok(16));
        assert_eq!(check_depth(MAX_PIPELINE as i64), Ok(MAX_PIPELINE as usize));
        for bad in [0, -1, MAX_PIPELINE as i64 + 1] {
            let error = check_depth(bad).unwrap_err();
            assert!(error.contains(&format!("not {bad}")), "{error}");
        }
    }

    #[test]
    fn only_http_1_1_targets_pipeline() {
        let mut scenario = Scenario::one_liner("http://127.0.0.1:1", "eth_chainId", None);
        scenario.pipeline = 16;
        assert_eq!(scenario.pipeline_refusal(), None);
        scenario.http2 = true;
        assert!(scenario.pipeline_refusal().unwrap().contains("HTTP/2"));
        scenario.http2 = false;
        for url in ["ws://127.0.0.1:1", "tcp://127.0.0.1:1", "unix:///tmp/x"] {
            scenario.target = TargetSpec::parse(url);
            let refusal = scenario.pipeline_refusal().unwrap();
            assert!(refusal.contains(url), "{refusal}");
        }
        scenario.pipeline = 1;
        assert_eq!(scenario.pipeline_refusal(), None, "depth 1 is no pipelining");
    }
}
