//! `summary.json`: every figure, plus what was run, where and when.

use super::RunReport;

pub fn summary(report: &RunReport) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(report).expect("the report is plain data");
    out.push(b'\n');
    out
}
