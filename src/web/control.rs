//! The page's buttons: `POST /control/pause`, `resume`, `raise` and
//! `lower` steer every target running through the feed, as the
//! dashboard's keys do. Off unless `--web-control`; and only a request from
//! the page itself is heard: its `Origin` must be the page's own (a
//! browser sends it on every POST, and no page elsewhere can forge it), so
//! another site open in the same browser cannot steer the run.

use hyper::header::{HeaderValue, ALLOW, HOST, ORIGIN};
use hyper::{HeaderMap, Method, Response, StatusCode};

use crate::endpoint::{self, Body};
use crate::feed::{Feed, Steer};

/// The steering `what` names (`/control/<what>`).
fn steer_named(what: &str) -> Option<Steer> {
    match what {
        "pause" => Some(Steer::Pause),
        "resume" => Some(Steer::Resume),
        "raise" => Some(Steer::Raise),
        "lower" => Some(Steer::Lower),
        _ => None,
    }
}

/// Why a request to steer is refused, if it is.
fn refusal(method: &Method, headers: &HeaderMap, enabled: bool) -> Option<(StatusCode, &'static str)> {
    if method != Method::POST {
        return Some((StatusCode::METHOD_NOT_ALLOWED, "POST only\n"));
    }
    if !enabled {
        return Some((
            StatusCode::FORBIDDEN,
            "the page steers nothing unless volley runs with --web-control\n",
        ));
    }
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let same_origin = match (text(ORIGIN.as_str()), text(HOST.as_str())) {
        (Some(origin), Some(host)) => origin.strip_prefix("http://") == Some(host),
        _ => false,
    };
    // A browser that says where the request comes from must say it came
    // from this very page.
    let fetched_here = text("sec-fetch-site").is_none_or(|site| site == "same-origin");
    if !same_origin || !fetched_here {
        return Some((
            StatusCode::FORBIDDEN,
            "only the page itself steers the run: its Origin must be http:// and its Host\n",
        ));
    }
    None
}

/// Answers `/control/<what>`: steers the runs, or says why not.
pub fn answer(
    what: &str,
    method: &Method,
    headers: &HeaderMap,
    feed: &Feed,
    enabled: bool,
) -> Response<Body> {
    let Some(steer) = steer_named(what) else {
        return endpoint::respond(
            StatusCode::NOT_FOUND,
            "text/plain",
            "see /control/pause, resume, raise or lower\n",
        );
    };
    if let Some((status, why)) = refusal(method, headers, enabled) {
        let mut response = endpoint::respond(status, "text/plain; charset=utf-8", why);
        if status == StatusCode::METHOD_NOT_ALLOWED {
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST"));
        }
        return response;
    }
    feed.steer(steer);
    endpoint::respond(StatusCode::NO_CONTENT, "text/plain", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn only_a_post_from_the_page_itself_steers_and_only_when_let() {
        let host = ("host", "127.0.0.1:9465");
        let page = headers(&[
            host,
            ("origin", "http://127.0.0.1:9465"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert_eq!(refusal(&Method::POST, &page, true), None);
        let status = |method: &Method, h: &HeaderMap, enabled| refusal(method, h, enabled).map(|r| r.0);
        assert_eq!(status(&Method::POST, &page, false), Some(StatusCode::FORBIDDEN));
        assert_eq!(
            status(&Method::GET, &page, true),
            Some(StatusCode::METHOD_NOT_ALLOWED)
        );
        for other in [
            headers(&[host]),
            headers(&[host, ("origin", "http://evil.example")]),
            headers(&[host, ("origin", "http://127.0.0.1:9465.evil.example")]),
            headers(&[host, ("origin", "https://127.0.0.1:9465")]),
            headers(&[host, ("origin", "null")]),
            headers(&[
                host,
                ("origin", "http://127.0.0.1:9465"),
                ("sec-fetch-site", "cross-site"),
            ]),
            headers(&[("origin", "http://127.0.0.1:9465")]),
        ] {
            assert_eq!(
                status(&Method::POST, &other, true),
                Some(StatusCode::FORBIDDEN),
                "{other:?}"
            );
        }
    }
}
