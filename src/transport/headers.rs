//! The headers a request carries, in one place for HTTP/1.1, HTTP/2 and
//! the WebSocket handshake: volley's own defaults, each replaced by a
//! user's header of the same name, then the user's others; and the one
//! rule for which headers a user may set.

/// What volley sends unless the user names the header: a strict server
/// refuses a request with two `Content-Type`s, so a user's replaces it.
const DEFAULTS: [(&str, &str); 3] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
    ("User-Agent", concat!("volley/", env!("CARGO_PKG_VERSION"))),
];

/// Headers volley must write itself, from the target and each body (and
/// the WebSocket upgrade's own); a user's would break every request.
const OWNED: [&str; 7] = [
    "content-length",
    "transfer-encoding",
    "host",
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
];

/// Which request the headers are for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Request {
    /// A POST carrying a JSON-RPC body (HTTP/1.1 or HTTP/2).
    Post,
    /// A WebSocket handshake: no body, so no content headers of volley's.
    Upgrade,
}

/// The headers to send, in order: volley's defaults for `request` (a
/// user's of the same name, in any case, in its place), then the user's
/// others. Names and values are as given; `check_header` has passed them.
pub(super) fn request_headers(user: &[(String, String)], request: Request) -> Vec<(&str, &str)> {
    let defaults = DEFAULTS
        .iter()
        .filter(|(name, _)| request == Request::Post || *name == "User-Agent");
    let mut headers: Vec<(&str, &str)> = defaults
        .map(|(name, value)| {
            user.iter()
                .find(|(own, _)| own.eq_ignore_ascii_case(name))
                .map_or((*name, *value), |(own, value)| (own.as_str(), value.as_str()))
        })
        .collect();
    for (name, value) in user {
        if !headers.iter().any(|(sent, _)| sent.eq_ignore_ascii_case(name)) {
            headers.push((name, value));
        }
    }
    headers
}

/// A header volley can send: a valid name (an RFC 9110 token) that is not
/// one volley writes itself, and a value without control characters.
///
/// The one rule for headers, from a file, a flag or a caller of the
/// transport; its message names the header, never its value.
pub fn check_header(name: &str, value: &str) -> Result<(), String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(format!(
            "`{name}` is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only, no spaces)"
        ));
    }
    if OWNED.iter().any(|own| name.eq_ignore_ascii_case(own)) {
        return Err(format!(
            "`{name}` is set by volley itself (from the target and each body); a second one would break every request"
        ));
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(format!(
            "the value of `{name}` holds a control character (not shown)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_users_header_replaces_volleys_own_of_that_name_in_any_case() {
        let given = user(&[("content-type", "application/json-rpc"), ("X-Api-Key", "k")]);
        let headers = request_headers(&given, Request::Post);
        let version = concat!("volley/", env!("CARGO_PKG_VERSION"));
        assert_eq!(
            headers,
            [
                ("content-type", "application/json-rpc"),
                ("Accept", "application/json, text/event-stream"),
                ("User-Agent", version),
                ("X-Api-Key", "k"),
            ]
        );
        let agent = user(&[("User-Agent", "me/1")]);
        assert_eq!(request_headers(&agent, Request::Post)[2], ("User-Agent", "me/1"));
    }

    #[test]
    fn a_handshake_carries_no_content_headers_of_volleys() {
        let none = request_headers(&[], Request::Upgrade);
        assert_eq!(
            none,
            [("User-Agent", concat!("volley/", env!("CARGO_PKG_VERSION")))]
        );
        let given = user(&[("Content-Type", "x/y")]);
        let names: Vec<&str> = request_headers(&given, Request::Upgrade)
            .iter()
            .map(|h| h.0)
            .collect();
        assert_eq!(names, ["User-Agent", "Content-Type"]);
    }

    #[test]
    fn headers_volley_must_write_are_refused_by_name() {
        for name in [
            "Host",
            "content-length",
            "Transfer-Encoding",
            "Connection",
            "Upgrade",
            "Sec-WebSocket-Key",
        ] {
            let error = check_header(name, "x").unwrap_err();
            assert!(error.contains("set by volley itself"), "{name}: {error}");
        }
        for name in ["Content-Type", "Accept", "User-Agent", "Authorization"] {
            assert_eq!(check_header(name, "x"), Ok(()), "{name}");
        }
    }
}
