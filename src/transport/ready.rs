//! What tells a stdio server is ready (`[ready]`): the notification it
//! sends once its work is done, matched as each one comes in.

/// What tells a stdio server is ready (`[ready]`): a notification of
/// `method` (LSP's `$/progress`, `textDocument/publishDiagnostics`) whose
/// `params` hold `value` at `pointer` (any value there, without one;
/// any such notification, without a pointer).
#[derive(Clone, Debug, PartialEq)]
pub struct ReadySignal {
    pub method: String,
    pub pointer: Option<String>,
    pub value: Option<serde_json::Value>,
    /// How long a child about to be shut down is given to send it first
    /// (the call timeout), so that every spawn's ready time is measured.
    pub wait: std::time::Duration,
}

impl ReadySignal {
    /// Whether a notification of `method` with `params` (JSON text) is it.
    pub fn heard(&self, method: &str, params: Option<&str>) -> bool {
        if method != self.method {
            return false;
        }
        let Some(pointer) = &self.pointer else {
            return true;
        };
        let params = params.and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok());
        match (params.as_ref().and_then(|p| p.pointer(pointer)), &self.value) {
            (Some(found), Some(wanted)) => found == wanted,
            (found, None) => found.is_some(),
            (None, Some(_)) => false,
        }
    }
}

/// The signal in words: `$/progress /value/kind = "end"`.
impl std::fmt::Display for ReadySignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.method)?;
        if let Some(pointer) = &self.pointer {
            write!(f, " {pointer}")?;
        }
        if let Some(value) = &self.value {
            write!(f, " = {value}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_is_its_method_and_the_value_its_pointer_reaches() {
        let end = ReadySignal {
            method: "$/progress".into(),
            pointer: Some("/value/kind".into()),
            value: Some("end".into()),
            wait: std::time::Duration::from_secs(1),
        };
        assert!(end.heard("$/progress", Some(r#"{"token":1,"value":{"kind":"end"}}"#)));
        assert!(!end.heard("$/progress", Some(r#"{"token":1,"value":{"kind":"begin"}}"#)));
        assert!(!end.heard("$/progress", Some(r#"{"token":1}"#)));
        assert!(!end.heard("$/progress", None));
        assert!(!end.heard("$/progres", Some(r#"{"value":{"kind":"end"}}"#)));
        assert!(!end.heard("$/progress", Some("not json")));
        let any = ReadySignal {
            value: None,
            ..end.clone()
        };
        assert!(any.heard("$/progress", Some(r#"{"value":{"kind":"report"}}"#)));
        let first = ReadySignal {
            method: "textDocument/publishDiagnostics".into(),
            pointer: None,
            value: None,
            wait: std::time::Duration::from_secs(1),
        };
        assert!(first.heard("textDocument/publishDiagnostics", None));
        assert_eq!(end.to_string(), r#"$/progress /value/kind = "end""#);
        assert_eq!(first.to_string(), "textDocument/publishDiagnostics");
    }
}
