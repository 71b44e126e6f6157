//! `[server_requests]`: the results volley answers a server's own
//! requests with.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::transport::ServerAnswers;

/// `default = result`, and `"method" = result`.
pub(super) fn server_answers(table: &BTreeMap<String, Value>) -> ServerAnswers {
    let mut answers = ServerAnswers::default();
    for (method, result) in table {
        if method == "default" {
            answers.default = result.to_string();
        } else {
            answers.by_method.push((method.clone(), result.to_string()));
        }
    }
    answers
}
