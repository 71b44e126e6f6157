//! The JWT an Ethereum Engine API asks for (and many private gateways):
//! HS256 over `{"iat": now}`, keyed by a 32-byte secret kept as hex in a
//! file (geth's and reth's `jwt.hex`). What the client signs and the
//! built-in server checks, in one place.
//!
//! The secret and every token are secrets: nothing here shows either, in a
//! message, a `Debug` or a `Display`.

use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// `{"alg":"HS256","typ":"JWT"}`, base64url without padding: every token's
/// header, the same bytes each time.
const HEADER: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9";

/// How far a token's `iat` may be from the server's clock, either way, in
/// seconds: the Engine API's rule.
pub const IAT_WINDOW: u64 = 60;

/// A token longer than this is refused unread: a real one is about 120 bytes.
const MAX_TOKEN: usize = 4096;

/// The 32 bytes that sign and check tokens.
#[derive(Clone, PartialEq, Eq)]
pub struct JwtSecret([u8; 32]);

impl std::fmt::Debug for JwtSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JwtSecret(<not shown>)")
    }
}

impl JwtSecret {
    /// Reads a secret file: 64 hex digits, an optional `0x` before them,
    /// whitespace around them trimmed. The error names the file and what is
    /// wrong with its text, never the text.
    pub fn read(path: &Path) -> Result<JwtSecret, String> {
        let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        JwtSecret::parse(&text).map_err(|why| format!("{}: {why}", path.display()))
    }

    /// The secret in `text`, by `read`'s rules; the error says what is
    /// wrong without showing any of it.
    pub fn parse(text: &[u8]) -> Result<JwtSecret, String> {
        let text = text.trim_ascii();
        let digits = text
            .strip_prefix(b"0x")
            .or_else(|| text.strip_prefix(b"0X"))
            .unwrap_or(text);
        let expected = "expected 64 hex digits (32 bytes), optionally after 0x";
        if digits.len() != 64 {
            return Err(format!(
                "not a JWT secret: {expected}, found {} characters (not shown)",
                digits.len()
            ));
        }
        let mut key = [0u8; 32];
        for (i, pair) in digits.chunks_exact(2).enumerate() {
            let (Some(high), Some(low)) = (hex_digit(pair[0]), hex_digit(pair[1])) else {
                return Err(format!(
                    "not a JWT secret: {expected}, and it holds something else (not shown)"
                ));
            };
            key[i] = high << 4 | low;
        }
        Ok(JwtSecret(key))
    }

    fn mac(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length")
    }

    /// A token with `iat`: `header.claims.signature`, each base64url
    /// without padding.
    pub fn token(&self, iat: u64) -> String {
        let claims = URL_SAFE_NO_PAD.encode(format!(r#"{{"iat":{iat}}}"#));
        let mut token = format!("{HEADER}.{claims}");
        let mut mac = self.mac();
        mac.update(token.as_bytes());
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(mac.finalize().into_bytes(), &mut token);
        token
    }

    /// Checks a token as an Engine API does: HS256 (the header says so),
    /// a signature made with this secret, an integer `iat` within
    /// [`IAT_WINDOW`] of `now`. Returns its `iat`, or why it is refused (in
    /// words that never quote the token).
    pub fn check(&self, token: &str, now: u64) -> Result<u64, &'static str> {
        if token.len() > MAX_TOKEN {
            return Err("the token is too long");
        }
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not a JWT (three parts separated by dots)");
        };
        let header: serde_json::Value = decode_json(header).ok_or("the header is not base64url JSON")?;
        if header.get("alg").and_then(|a| a.as_str()) != Some("HS256") {
            return Err("the header's alg is not HS256");
        }
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| "the signature is not base64url")?;
        let mut mac = self.mac();
        mac.update(&token.as_bytes()[..header_and_claims_len(token)]);
        mac.verify_slice(&signature)
            .map_err(|_| "the signature does not match the secret")?;
        let claims: serde_json::Value = decode_json(claims).ok_or("the claims are not base64url JSON")?;
        let iat = claims
            .get("iat")
            .and_then(serde_json::Value::as_u64)
            .ok_or("the claims have no integer iat")?;
        if iat.abs_diff(now) > IAT_WINDOW {
            return Err("iat is more than 60 s from the server's clock");
        }
        Ok(iat)
    }
}

/// The signed part of a token: everything before its last dot.
fn header_and_claims_len(token: &str) -> usize {
    token.rfind('.').unwrap_or(0)
}

fn decode_json(part: &str) -> Option<serde_json::Value> {
    let bytes = URL_SAFE_NO_PAD.decode(part).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn hex_digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Seconds since the Unix epoch now: a token's `iat`.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    /// The same token made by Python's `hmac` and `base64` modules, not by
    /// this code: an independent check of the bytes.
    const PYTHON_TOKEN: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpYXQiOjE3MDAwMDAwMDB9.uAxdaUtr1_HpYPtNDLNlQ_sHMiP5eBV-ra8EjL3ScS8";

    #[test]
    fn a_token_is_the_bytes_another_implementation_makes() {
        let secret = JwtSecret::parse(KEY_HEX.as_bytes()).unwrap();
        assert_eq!(secret.token(1_700_000_000), PYTHON_TOKEN);
        assert_eq!(URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#), HEADER);
    }

    #[test]
    fn a_secret_file_is_hex_with_or_without_0x_whitespace_trimmed() {
        let plain = JwtSecret::parse(KEY_HEX.as_bytes()).unwrap();
        for text in [
            format!("0x{KEY_HEX}"),
            format!("  0x{KEY_HEX}\n"),
            format!("{}\r\n", KEY_HEX.to_uppercase()),
        ] {
            assert_eq!(JwtSecret::parse(text.as_bytes()).unwrap(), plain, "{text:?}");
        }
        let short = JwtSecret::parse(&KEY_HEX.as_bytes()[..62]).unwrap_err();
        assert!(short.contains("found 62 characters"), "{short}");
        let odd = format!("{}zz", &KEY_HEX[..62]);
        let error = JwtSecret::parse(odd.as_bytes()).unwrap_err();
        assert!(
            error.contains("holds something else") && !error.contains("zz"),
            "{error}"
        );
        assert!(JwtSecret::parse(b"").is_err());
        assert_eq!(format!("{plain:?}"), "JwtSecret(<not shown>)");
    }

    #[test]
    fn a_missing_file_is_named() {
        let error = JwtSecret::read(Path::new("/nonexistent/jwt.hex")).unwrap_err();
        assert!(error.contains("/nonexistent/jwt.hex"), "{error}");
    }

    #[test]
    fn the_check_takes_a_right_token_and_refuses_the_rest() {
        let secret = JwtSecret::parse(KEY_HEX.as_bytes()).unwrap();
        let now = 1_700_000_000;
        assert_eq!(secret.check(PYTHON_TOKEN, now), Ok(now));
        assert_eq!(secret.check(PYTHON_TOKEN, now + 60), Ok(now));
        assert_eq!(secret.check(PYTHON_TOKEN, now - 60), Ok(now));
        assert!(secret.check(PYTHON_TOKEN, now + 61).is_err());
        assert!(secret.check(PYTHON_TOKEN, now - 61).is_err());
        let other = JwtSecret::parse(&[b'f'; 64]).unwrap();
        assert_eq!(
            other.check(PYTHON_TOKEN, now),
            Err("the signature does not match the secret")
        );
        let mut tampered = PYTHON_TOKEN.to_string();
        tampered.replace_range(40..41, "k");
        assert!(secret.check(&tampered, now).is_err());
        for bad in ["", "a.b", "a.b.c.d", "!!.!!.!!", &"a".repeat(5000)] {
            assert!(secret.check(bad, now).is_err(), "{bad}");
        }
        // alg none, unsigned: refused whatever its signature part says.
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(br#"{"iat":1700000000}"#)
        );
        assert_eq!(secret.check(&none, now), Err("the header's alg is not HS256"));
    }
}
