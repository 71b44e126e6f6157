//! How a target's URL is shown: the one rule every output follows (the
//! table, every file, the live views, directory names, progress lines,
//! warnings and errors). Requests still go to the whole URL; only what a
//! person or a file sees is cut.
//!
//! RPC providers carry keys in three places: the user information
//! (`https://alice:pass@host`), the path (`https://mainnet.infura.io/v3/KEY`,
//! `https://NAME.quiknode.pro/TOKEN/`) and the query (`?apikey=KEY`). Each
//! goes; the scheme, host, port and the rest of the path stay, so two runs
//! are still told apart.
//!
//! A value that is a secret whole (a header's from
//! `OTEL_EXPORTER_OTLP_HEADERS`) is held as a [`Secret`], which no print
//! shows.

/// What stands where a secret was.
pub const HIDDEN: &str = "…";

/// A path segment this long or longer, made only of the characters of
/// hex, base58 or base64url and holding a digit, reads as a key.
const KEY_LENGTH: usize = 16;

/// Known providers that keep a key in a path segment of any length: the
/// host's suffix, and the segment (counted from 0) that holds it, unless
/// a version segment (`v2`, `v3`) comes first: then the one after it
/// (`/v3/KEY`, `/ws/v3/KEY`, `/nft/v3/KEY`).
const KEY_SEGMENTS: &[(&str, usize)] = &[
    ("infura.io", 1),      // /v3/KEY, /ws/v3/KEY
    ("alchemy.com", 1),    // /v2/KEY, /nft/v3/KEY
    ("alchemyapi.io", 1),  // /v2/KEY
    ("quiknode.pro", 0),   // /TOKEN/
    ("ankr.com", 1),       // /eth/KEY
    ("chainstack.com", 0), // NAME.core.chainstack.com/KEY
    ("p2pify.com", 0),     // Chainstack's older hosts: /KEY
    ("blastapi.io", 0),    // /KEY
    ("getblock.io", 0),    // /KEY/...
    ("drpc.org", 1),       // /ogrpc?network=...&dkey=KEY, or /eth/KEY
];

/// A value never shown: its `Display` and `Debug` both write `…`, so no
/// error, log or debug print of what holds it can leak it. Only `expose`
/// hands it over, to where it is sent.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value whole: for the request it goes in, never for output.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(HIDDEN)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({HIDDEN})")
    }
}

/// `v1`, `v2`, `v3`...: a version, after which providers put the key.
fn is_version(segment: &str) -> bool {
    segment.len() >= 2 && segment.starts_with('v') && segment[1..].bytes().all(|b| b.is_ascii_digit())
}

/// `url` as every output shows it: user information, query values, the
/// fragment and path segments that look like keys replaced by `…`. A URL
/// written without its scheme (`node.example/v3/KEY`, a mistake) is read
/// the same way, so an error that quotes it hides the key too.
pub fn url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((before, _)) => (before, Some(HIDDEN)),
        None => (rest, None),
    };
    let (before_query, query) = match before_fragment.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (before_fragment, None),
    };
    let authority_end = before_query.find('/').unwrap_or(before_query.len());
    let (authority, path) = before_query.split_at(authority_end);
    let host = host_of(authority);
    let mut shown = scheme.map_or_else(String::new, |scheme| format!("{scheme}://"));
    if host.len() < authority.len() {
        shown.push_str(HIDDEN);
        shown.push('@');
    }
    shown.push_str(host);
    shown.push_str(&shown_path(host, path));
    if let Some(query) = query {
        shown.push('?');
        shown.push_str(&shown_query(query));
    }
    if let Some(fragment) = fragment {
        shown.push('#');
        shown.push_str(fragment);
    }
    shown
}

/// The host and port of a URL's authority, without its user information:
/// what names a target (`127.0.0.1:8545`, `mainnet.infura.io`).
pub fn host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    host_of(authority)
}

fn host_of(authority: &str) -> &str {
    authority.rsplit_once('@').map_or(authority, |(_, host)| host)
}

fn shown_path(host: &str, path: &str) -> String {
    // The host's name without its port, to match providers.
    let name = match host.find(']') {
        Some(end) => &host[..=end],
        None => host.split(':').next().unwrap_or(host),
    }
    .to_ascii_lowercase();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let provider_segment = KEY_SEGMENTS
        .iter()
        .find(|(suffix, _)| name == *suffix || name.ends_with(&format!(".{suffix}")))
        .map(|(_, segment)| match segments.iter().position(|s| is_version(s)) {
            Some(version) => version + 1,
            None => *segment,
        });
    let mut index = 0;
    path.split('/')
        .map(|segment| {
            if segment.is_empty() {
                return segment;
            }
            let at = index;
            index += 1;
            if provider_segment == Some(at) || looks_like_key(segment) {
                HIDDEN
            } else {
                segment
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A long token of hex, base58 or base64url characters that holds a digit:
/// words (`mainnet`, `ethereum-archive`) stay.
fn looks_like_key(segment: &str) -> bool {
    let token = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '%';
    segment.chars().count() >= KEY_LENGTH
        && segment.chars().all(token)
        && segment.chars().any(|c| c.is_ascii_digit())
}

/// Every value replaced, every key kept: `apikey=…&network=…`.
fn shown_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) => format!("{key}={HIDDEN}"),
            None if pair.is_empty() => String::new(),
            // A bare word may be a key itself (`?KEY`).
            None => HIDDEN.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::{host, url, Secret};

    #[test]
    fn a_secret_never_shows_in_any_print() {
        let secret = Secret::new("Bearer s3cret-token");
        let printed = format!("{secret} {secret:?} {:?}", vec![("authorization", &secret)]);
        assert!(!printed.contains("s3cret"), "{printed}");
        assert_eq!(secret.expose(), "Bearer s3cret-token");
    }

    #[test]
    fn user_information_is_never_shown() {
        assert_eq!(url("http://127.0.0.1:8545"), "http://127.0.0.1:8545");
        assert_eq!(
            url("https://alice:s3cret@node.example/rpc"),
            "https://…@node.example/rpc"
        );
        assert_eq!(url("https://s3cret@node.example"), "https://…@node.example");
        assert_eq!(url("wss://a:b@[::1]:8546/ws"), "wss://…@[::1]:8546/ws");
    }

    #[test]
    fn query_values_and_fragments_are_never_shown() {
        assert_eq!(
            url("https://node.example/rpc?apikey=QUERYKEY789&network=main"),
            "https://node.example/rpc?apikey=…&network=…"
        );
        assert_eq!(url("https://node.example/?SECRET"), "https://node.example/?…");
        assert_eq!(
            url("https://node.example/rpc#token=x"),
            "https://node.example/rpc#…"
        );
    }

    #[test]
    fn path_segments_that_look_like_keys_are_never_shown() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            url(&format!("http://127.0.0.1:9/v3/{hex}")),
            "http://127.0.0.1:9/v3/…"
        );
        // base58 and base64url tokens, and a UUID.
        assert_eq!(url("http://h/x/3yZe7d8Q2fA1bC9kLmNpQ"), "http://h/x/…");
        assert_eq!(url("http://h/a_B-c1d2E3f4G5h6I7/rpc"), "http://h/…/rpc");
        assert_eq!(url("http://h/123e4567-e89b-12d3-a456-426614174000"), "http://h/…");
        // Words and short segments stay, and so does the trailing slash.
        assert_eq!(
            url("http://h/ethereum-mainnet-archive/"),
            "http://h/ethereum-mainnet-archive/"
        );
        assert_eq!(url("http://h/v1/rpc/2"), "http://h/v1/rpc/2");
    }

    #[test]
    fn known_providers_keys_are_found_after_their_version_or_at_their_place() {
        for (given, shown) in [
            (
                "wss://mainnet.infura.io/ws/v3/abc12",
                "wss://mainnet.infura.io/ws/v3/…",
            ),
            (
                "https://eth-mainnet.g.alchemy.com/nft/v3/KEY",
                "https://eth-mainnet.g.alchemy.com/nft/v3/…",
            ),
            (
                "https://ethereum-mainnet.core.chainstack.com/shortk3y",
                "https://ethereum-mainnet.core.chainstack.com/…",
            ),
            ("https://rpc.ankr.com/eth/abc", "https://rpc.ankr.com/eth/…"),
        ] {
            assert_eq!(url(given), shown);
        }
    }

    #[test]
    fn known_providers_keep_their_keys_where_they_put_them() {
        assert_eq!(
            url("https://mainnet.infura.io/v3/shortkey"),
            "https://mainnet.infura.io/v3/…"
        );
        assert_eq!(
            url("https://eth-mainnet.g.alchemy.com/v2/abc"),
            "https://eth-mainnet.g.alchemy.com/v2/…"
        );
        assert_eq!(
            url("https://name.quiknode.pro/tok/"),
            "https://name.quiknode.pro/…/"
        );
        assert_eq!(url("https://rpc.ankr.com/eth/k"), "https://rpc.ankr.com/eth/…");
        assert_eq!(
            url("https://NAME.QUIKNODE.PRO:443/tok"),
            "https://NAME.QUIKNODE.PRO:443/…"
        );
        // A host that only ends in the same letters is not the provider.
        assert_eq!(
            url("https://notinfura.io/v3/short"),
            "https://notinfura.io/v3/short"
        );
    }

    #[test]
    fn what_is_not_a_url_is_shown_as_written() {
        assert_eq!(url("builtin"), "builtin");
        assert_eq!(url("unix:///tmp/node.sock"), "unix:///tmp/node.sock");
    }

    #[test]
    fn a_url_without_its_scheme_hides_its_keys_too() {
        assert_eq!(url("mainnet.infura.io/v3/k"), "mainnet.infura.io/v3/…");
        assert_eq!(url("u:p@127.0.0.1:8545?key=1"), "…@127.0.0.1:8545?key=…");
    }

    #[test]
    fn a_host_names_a_target_without_its_user_information() {
        assert_eq!(host("http://alice:pw@127.0.0.1:8545/v3/k?x=1"), "127.0.0.1:8545");
        assert_eq!(host("https://mainnet.infura.io/v3/k"), "mainnet.infura.io");
    }
}
