//! What the built-in server asks of a request's headers, and counts of
//! them: an Engine API's JWT (`--jwt-secret`: HS256 with the secret, `iat`
//! within 60 s of the server's clock, else HTTP 401), and the values of one
//! header (`--count-header`), so a test can hold a client's headers to
//! exact counts. On HTTP every request is checked; on a WebSocket, its
//! handshake.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use super::ServerStats;

/// Distinct values kept at most (of `iat`, of the counted header): past
/// it, new ones are not kept and the count says "at least".
const KEPT: usize = 1_000_000;

/// Values seen, each kept once, up to [`KEPT`].
#[derive(Debug, Default)]
pub struct Distinct {
    values: Mutex<HashSet<Box<[u8]>>>,
    /// A value came that the bound left out.
    overflowed: std::sync::atomic::AtomicBool,
}

impl Distinct {
    fn note(&self, value: &[u8]) {
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        if values.len() < KEPT {
            values.insert(value.into());
        } else if !values.contains(value) {
            self.overflowed.store(true, Ordering::Relaxed);
        }
    }

    /// How many distinct values came, and whether that is a floor (the
    /// bound was reached).
    pub fn count(&self) -> (usize, bool) {
        let values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        (values.len(), self.overflowed.load(Ordering::Relaxed))
    }
}

/// Checks the `Authorization` header of a request (or a WebSocket
/// handshake) against the server's secret, if it has one; counts what it
/// found. The refusal says why, never quoting the token.
pub(super) fn check(
    config: &super::ServeConfig,
    stats: &ServerStats,
    authorization: Option<&[u8]>,
) -> Result<(), &'static str> {
    let Some(secret) = &config.jwt_secret else {
        return Ok(());
    };
    let checked = match authorization.and_then(bearer_token) {
        None => Err("no `Authorization: Bearer <JWT>` header"),
        Some(token) => secret.check(token, crate::jwt::unix_now()),
    };
    match checked {
        Ok(iat) => {
            stats.jwt_accepted.fetch_add(1, Ordering::Relaxed);
            stats.jwt_iats.note(iat.to_string().as_bytes());
            Ok(())
        }
        Err(why) => {
            stats.jwt_refused.fetch_add(1, Ordering::Relaxed);
            Err(why)
        }
    }
}

/// The token of `Bearer <token>` (the scheme's name in any case).
fn bearer_token(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Counts the value of the header `--count-header` names, when the server
/// counts one.
pub(super) fn count_header(config: &super::ServeConfig, stats: &ServerStats, value: Option<&[u8]>) {
    if config.count_header.is_none() {
        return;
    }
    if let Some(value) = value {
        stats.header_seen.fetch_add(1, Ordering::Relaxed);
        stats.header_values.note(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_token_is_read_whatever_the_schemes_case() {
        assert_eq!(bearer_token(b"Bearer abc"), Some("abc"));
        assert_eq!(bearer_token(b"bearer  abc "), Some("abc"));
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearer"), None);
        assert_eq!(bearer_token(b"\xff\xfe"), None);
    }

    #[test]
    fn distinct_values_are_kept_once_each() {
        let distinct = Distinct::default();
        for value in [b"a", b"b", b"a"] {
            distinct.note(value);
        }
        assert_eq!(distinct.count(), (2, false));
    }

    #[test]
    fn a_request_without_a_right_token_is_refused_and_counted() {
        let secret = crate::jwt::JwtSecret::parse(&[b'2'; 64]).unwrap();
        let config = super::super::ServeConfig {
            jwt_secret: Some(std::sync::Arc::new(secret.clone())),
            ..Default::default()
        };
        let stats = ServerStats::default();
        let now = crate::jwt::unix_now();
        let good = format!("Bearer {}", secret.token(now));
        let stale = format!("Bearer {}", secret.token(now - 120));
        assert_eq!(check(&config, &stats, Some(good.as_bytes())), Ok(()));
        assert!(check(&config, &stats, Some(stale.as_bytes())).is_err());
        assert!(check(&config, &stats, None).is_err());
        let get = ServerStats::get;
        assert_eq!((get(&stats.jwt_accepted), get(&stats.jwt_refused)), (1, 2));
        assert_eq!(stats.jwt_iats.count(), (1, false));
        let open = super::super::ServeConfig::default();
        assert_eq!(check(&open, &stats, None), Ok(()), "no secret, no check");
    }
}
