//! The headers a request carries, in one place for HTTP/1.1, HTTP/2 and
//! the WebSocket handshake: volley's own defaults, each replaced by a
//! user's header of the same name, then the user's others; the headers
//! whose values are made anew for each request (a generated value, a fresh
//! JWT); and the one rule for which headers a user may set.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::jwt::JwtSecret;

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

/// The headers whose values are fixed, in order: volley's defaults for
/// `request` (a user's of the same name, in any case, in its place), then
/// the user's others; none that a `made` header names, since that one is
/// sent instead (after these). Names and values are as given;
/// `check_header` has passed them.
pub(super) fn request_headers<'a>(
    user: &'a [(String, String)],
    made: &[MadeHeader],
    request: Request,
) -> Vec<(&'a str, &'a str)> {
    let is_made = |name: &str| made.iter().any(|m| m.name.eq_ignore_ascii_case(name));
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
    headers.retain(|(name, _)| !is_made(name));
    headers
}

/// A header value made anew for each request: a generated value (`${seq()}`
/// in a header), a fresh JWT. Made on the request's own thread.
pub trait MakeValue: Send + Sync {
    /// Appends this request's value to `out`.
    fn write(&self, out: &mut Vec<u8>);
}

/// A header whose value is made for each request (for each handshake, on a
/// WebSocket). Its value, a secret or not, is never shown: `Debug` gives
/// the name.
#[derive(Clone)]
pub struct MadeHeader {
    pub name: String,
    pub value: Arc<dyn MakeValue>,
}

impl std::fmt::Debug for MadeHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MadeHeader({})", self.name)
    }
}

/// Appends a made header's value to `out`, leaving out any byte a header
/// value may not hold: what is made may come from a data file or a server
/// (a polled value), and a CR or LF would end the header and start another.
pub(super) fn write_value(out: &mut Vec<u8>, header: &MadeHeader) {
    let start = out.len();
    header.value.write(out);
    let mut kept = start;
    for i in start..out.len() {
        let byte = out[i];
        if byte == b'\t' || (byte >= 0x20 && byte != 0x7f) {
            out[kept] = byte;
            kept += 1;
        }
    }
    out.truncate(kept);
}

/// `Authorization: Bearer <JWT>` signed with `secret`, its `iat` the second
/// the request leaves in.
pub fn bearer(secret: Arc<JwtSecret>) -> MadeHeader {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    MadeHeader {
        name: "Authorization".to_string(),
        value: Arc::new(Bearer {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            secret,
        }),
    }
}

/// Makes a token per second per thread: signing costs about a microsecond,
/// so the requests of one second on one engine thread share a token, and a
/// token is never sent in a later second than its `iat`.
struct Bearer {
    /// Tells the secrets of one process apart in the threads' caches.
    id: u64,
    secret: Arc<JwtSecret>,
}

thread_local! {
    /// This thread's last token: whose, its `iat`, and `Bearer <token>`.
    static LAST_TOKEN: RefCell<Option<(u64, u64, String)>> = const { RefCell::new(None) };
}

impl Bearer {
    /// The value for a request sent in second `now`.
    fn write_at(&self, out: &mut Vec<u8>, now: u64) {
        LAST_TOKEN.with_borrow_mut(|last| {
            let fresh = last
                .as_ref()
                .is_some_and(|(id, iat, _)| *id == self.id && *iat == now);
            if !fresh {
                *last = Some((self.id, now, format!("Bearer {}", self.secret.token(now))));
            }
            if let Some((_, _, value)) = last {
                out.extend_from_slice(value.as_bytes());
            }
        });
    }
}

impl MakeValue for Bearer {
    fn write(&self, out: &mut Vec<u8>) {
        self.write_at(out, crate::jwt::unix_now());
    }
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
        let headers = request_headers(&given, &[], Request::Post);
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
        assert_eq!(
            request_headers(&agent, &[], Request::Post)[2],
            ("User-Agent", "me/1")
        );
    }

    #[test]
    fn a_handshake_carries_no_content_headers_of_volleys() {
        let none = request_headers(&[], &[], Request::Upgrade);
        assert_eq!(
            none,
            [("User-Agent", concat!("volley/", env!("CARGO_PKG_VERSION")))]
        );
        let given = user(&[("Content-Type", "x/y")]);
        let names: Vec<&str> = request_headers(&given, &[], Request::Upgrade)
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

    struct Fixed(&'static [u8]);

    impl MakeValue for Fixed {
        fn write(&self, out: &mut Vec<u8>) {
            out.extend_from_slice(self.0);
        }
    }

    #[test]
    fn a_made_header_replaces_a_fixed_one_of_its_name_and_loses_its_control_bytes() {
        let made = [MadeHeader {
            name: "user-agent".into(),
            value: Arc::new(Fixed(b"a\r\nX-Evil: 1\x00\tb")),
        }];
        let given = user(&[("X-Api-Key", "k")]);
        let names: Vec<&str> = request_headers(&given, &made, Request::Post)
            .iter()
            .map(|h| h.0)
            .collect();
        assert_eq!(names, ["Content-Type", "Accept", "X-Api-Key"]);
        let mut out = b"User-Agent: ".to_vec();
        write_value(&mut out, &made[0]);
        assert_eq!(out, b"User-Agent: aX-Evil: 1\tb");
    }

    #[test]
    fn a_token_is_made_once_a_second_per_thread_and_never_reused_in_another() {
        let secret = Arc::new(JwtSecret::parse(&[b'1'; 64]).unwrap());
        let header = bearer(secret.clone());
        let (one, other) = (
            Bearer {
                id: 1000,
                secret: secret.clone(),
            },
            Bearer { id: 1001, secret },
        );
        let value = |bearer: &Bearer, now| {
            let mut out = Vec::new();
            bearer.write_at(&mut out, now);
            String::from_utf8(out).unwrap()
        };
        let first = value(&one, 100);
        assert_eq!(value(&one, 100), first, "reused within its second");
        let later = value(&one, 101);
        assert_ne!(later, first, "a new second, a new token");
        assert_eq!(value(&other, 101), later, "the same secret signs the same token");
        let token = later.strip_prefix("Bearer ").unwrap();
        let check = JwtSecret::parse(&[b'1'; 64]).unwrap();
        assert_eq!(check.check(token, 101), Ok(101));
        assert_eq!(header.name, "Authorization");
        assert_eq!(format!("{header:?}"), "MadeHeader(Authorization)");
    }
}
