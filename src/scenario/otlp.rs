//! Where `--otlp` (or the `otlp` key) sends the run's metrics: an OTLP/HTTP
//! collector's base URL, checked before anything is sent. Metrics go to its
//! path with `/v1/metrics` added, as OpenTelemetry's exporters do with
//! `OTEL_EXPORTER_OTLP_ENDPOINT`.

/// A collector's base URL, checked.
#[derive(Clone, PartialEq, Eq)]
pub struct OtlpEndpoint {
    /// `https://`: the push goes over TLS, with the web's roots.
    pub tls: bool,
    /// The host as a URL writes it (an IPv6 address in brackets).
    pub host: String,
    /// The URL's port, else its scheme's (80, 443).
    pub port: u16,
    /// The base path, without a trailing `/` (`""` at the root).
    pub base_path: String,
    /// The path is the metrics' own, used as it is
    /// (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`), not a base.
    pub exact: bool,
}

/// What the error says a good one looks like.
const SHAPE: &str = "give the collector's base URL, http://HOST:PORT or https://HOST[:PORT][/PATH] (metrics go to its /v1/metrics; an OpenTelemetry Collector listens on http://127.0.0.1:4318)";

impl OtlpEndpoint {
    /// Reads a base URL; the message says what is wrong, never the
    /// credentials a URL may hold (it shows the URL as `redact::url` does).
    pub fn parse(text: &str) -> Result<OtlpEndpoint, String> {
        let text = text.trim();
        let shown = crate::redact::url(text);
        let bad = |why: &str| format!("`{shown}` {why}: {SHAPE}");
        let (scheme, rest) = text.split_once("://").ok_or_else(|| bad("has no scheme"))?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err(bad("is not an http:// or https:// URL (OTLP/HTTP)")),
        };
        if rest.contains(['?', '#']) {
            return Err(bad("has a query or a fragment, which a base URL cannot carry"));
        }
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.contains('@') {
            return Err(format!(
                "`{shown}` holds credentials, which would show wherever the URL does: put them in OTEL_EXPORTER_OTLP_HEADERS (e.g. authorization=Basic%20...)"
            ));
        }
        let (host, port) = split_port(authority).map_err(|why| bad(&why))?;
        if host.is_empty() || host == "[]" {
            return Err(bad("has no host"));
        }
        Ok(OtlpEndpoint {
            tls,
            host: host.to_string(),
            port: port.unwrap_or(if tls { 443 } else { 80 }),
            base_path: path.trim_end_matches('/').to_string(),
            exact: false,
        })
    }

    /// Reads a URL the metrics are posted to as it is (the specification's
    /// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`): nothing is added to its path.
    pub fn parse_exact(text: &str) -> Result<OtlpEndpoint, String> {
        Ok(OtlpEndpoint {
            exact: true,
            ..OtlpEndpoint::parse(text)?
        })
    }

    /// Where metrics are posted: the base path and `/v1/metrics`.
    pub fn metrics_path(&self) -> String {
        match (self.exact, self.base_path.is_empty()) {
            (true, false) => self.base_path.clone(),
            (true, true) => "/".to_string(),
            (false, _) => format!("{}/v1/metrics", self.base_path),
        }
    }

    /// The metrics URL whole, for the request: never for output.
    pub fn metrics_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}:{}{}", self.host, self.port, self.metrics_path())
    }

    /// The host as a name to look up and to verify a certificate for
    /// (without an IPv6 address's brackets).
    pub fn host_name(&self) -> &str {
        self.host.trim_start_matches('[').trim_end_matches(']')
    }
}

/// `host:port`, `[::1]:4318`, or a host alone.
fn split_port(authority: &str) -> Result<(&str, Option<u16>), String> {
    let port_at = match authority.rfind(']') {
        Some(end) => authority[end..].find(':').map(|i| end + i),
        None => authority.rfind(':'),
    };
    let Some(colon) = port_at else {
        return Ok((authority, None));
    };
    let port = &authority[colon + 1..];
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok((&authority[..colon], Some(port))),
        _ => Err(format!("has `{port}` where its port goes")),
    }
}

/// Shown as every URL is: `redact::url`'s rule.
impl std::fmt::Display for OtlpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::redact::url(&self.metrics_url()))
    }
}

impl std::fmt::Debug for OtlpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OtlpEndpoint({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::OtlpEndpoint;

    #[test]
    fn a_base_url_gets_v1_metrics_and_its_schemes_port() {
        let plain = OtlpEndpoint::parse("http://127.0.0.1:4318").unwrap();
        assert_eq!(plain.metrics_url(), "http://127.0.0.1:4318/v1/metrics");
        assert!(!plain.tls);
        let deep = OtlpEndpoint::parse(" HTTPS://otlp.example/api/otlp/ ").unwrap();
        assert_eq!(deep.metrics_url(), "https://otlp.example:443/api/otlp/v1/metrics");
        assert_eq!(deep.metrics_path(), "/api/otlp/v1/metrics");
        let six = OtlpEndpoint::parse("http://[::1]:4318/").unwrap();
        assert_eq!(
            (six.host.as_str(), six.host_name(), six.port),
            ("[::1]", "::1", 4318)
        );
        assert_eq!(OtlpEndpoint::parse("http://collector").unwrap().port, 80);
    }

    #[test]
    fn a_url_that_is_no_collector_s_is_refused_saying_why() {
        for (text, why) in [
            ("127.0.0.1:4318", "has no scheme"),
            ("localhost", "has no scheme"),
            ("grpc://127.0.0.1:4317", "is not an http"),
            ("http://127.0.0.1:43x8", "where its port goes"),
            ("http://127.0.0.1:0", "where its port goes"),
            ("http://:4318", "has no host"),
            ("http://127.0.0.1:4318/?x=1", "query"),
        ] {
            let error = OtlpEndpoint::parse(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
            assert!(error.contains("/v1/metrics"), "says what to give: {error}");
        }
    }

    #[test]
    fn credentials_in_the_url_are_refused_and_never_shown() {
        let error = OtlpEndpoint::parse("https://user:s3cretpass@otlp.example").unwrap_err();
        assert!(!error.contains("s3cretpass"), "{error}");
        assert!(error.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{error}");
        let shown = OtlpEndpoint::parse("https://otlp.example/0123456789abcdef0123").unwrap();
        assert!(!format!("{shown} {shown:?}").contains("0123456789abcdef0123"));
    }
}
