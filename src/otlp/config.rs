//! What `--otlp` needs beyond its URL, read the way OpenTelemetry's own
//! exporters read it: the environment variables the OTel specification
//! names. Everything is checked before anything is sent; an error names the
//! flag or variable to change, and never a header's value.

use std::time::Duration;

use crate::redact::Secret;
use crate::scenario::OtlpEndpoint;

/// The base URL when neither `--otlp` nor the `otlp` key gives one.
pub const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The metrics' own URL, used as it is: before the base URL.
pub const METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// `true`: the environment asks for no push (a flag or key still does).
pub const SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
/// `name=value,name=value`, values percent-encoded: sent with every push.
pub const HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// `http/protobuf` (the default) or `http/json`.
pub const PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// Milliseconds between pushes.
pub const INTERVAL: &str = "OTEL_METRIC_EXPORT_INTERVAL";
/// Milliseconds a push may take.
pub const TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// A PEM file of the CA that signed an `https://` collector's certificate.
pub const CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";

/// Between pushes, unless `OTEL_METRIC_EXPORT_INTERVAL` says: a run lasts
/// seconds or minutes, not the specification's default of a minute.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
/// How long one push may take, unless `OTEL_EXPORTER_OTLP_TIMEOUT` says:
/// the last push at the end waits for it at most.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// How the figures are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// Where and how the metrics are pushed.
#[derive(Clone, Debug)]
pub struct Config {
    pub endpoint: OtlpEndpoint,
    /// Sent with every push; their values are secrets.
    pub headers: Vec<(String, Secret)>,
    pub encoding: Encoding,
    pub interval: Duration,
    pub timeout: Duration,
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE`, for an `https://` collector.
    pub certificate: Option<std::path::PathBuf>,
}

impl Config {
    /// The push `--otlp` or the `otlp` key asks for (`given`), else the one
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` does, with the rest of the variables
    /// read through `env`; `None` when nothing asks for one.
    pub fn resolve(
        given: Option<&OtlpEndpoint>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Config>, String> {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let disabled = set(SDK_DISABLED).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let endpoint = match (given, set(METRICS_ENDPOINT), set(ENDPOINT)) {
            (Some(given), ..) => given.clone(),
            (None, ..) if disabled => return Ok(None),
            (None, Some(url), _) => {
                OtlpEndpoint::parse_exact(&url).map_err(|m| format!("${METRICS_ENDPOINT}: {m}"))?
            }
            (None, None, Some(url)) => OtlpEndpoint::parse(&url).map_err(|m| format!("${ENDPOINT}: {m}"))?,
            (None, None, None) => return Ok(None),
        };
        let encoding = match set(PROTOCOL).as_deref().map(str::trim) {
            None | Some("http/protobuf") => Encoding::Protobuf,
            Some("http/json") => Encoding::Json,
            Some(other) => {
                return Err(format!(
                    "${PROTOCOL} is `{other}`: volley pushes over OTLP/HTTP, http/protobuf (the default) or http/json"
                ))
            }
        };
        let headers = set(HEADERS).map_or(Ok(Vec::new()), |text| headers(&text))?;
        Ok(Some(Config {
            endpoint,
            headers,
            encoding,
            interval: millis(set(INTERVAL), INTERVAL, DEFAULT_INTERVAL)?,
            timeout: millis(set(TIMEOUT), TIMEOUT, DEFAULT_TIMEOUT)?,
            certificate: set(CERTIFICATE).map(std::path::PathBuf::from),
        }))
    }
}

/// A variable's milliseconds, at least 1.
fn millis(text: Option<String>, name: &str, default: Duration) -> Result<Duration, String> {
    let Some(text) = text else {
        return Ok(default);
    };
    match text.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms).min(crate::scenario::MAX_DURATION)),
        _ => Err(format!("${name} is `{text}`: milliseconds, e.g. 5000")),
    }
}

/// `OTEL_EXPORTER_OTLP_HEADERS`: a list of `name=value`, comma-separated,
/// each value percent-decoded (the W3C Baggage format the specification
/// names). A mistake is named by its place in the list: its value, or a
/// name written where a value should be, could be a secret.
pub fn headers(text: &str) -> Result<Vec<(String, Secret)>, String> {
    let mut headers = Vec::new();
    for (i, entry) in text.split(',').enumerate() {
        if entry.trim().is_empty() {
            continue;
        }
        let bad = |why: &str| format!("${HEADERS}: entry {} {why}", i + 1);
        let (name, value) = entry.split_once('=').ok_or_else(|| bad("is not name=value"))?;
        let name = name.trim();
        if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(bad("has no header name before its `=`"));
        }
        let value = percent_encoding::percent_decode_str(value.trim())
            .decode_utf8()
            .map_err(|_| bad("is not UTF-8 once percent-decoded"))?;
        if hyper::header::HeaderValue::from_str(&value).is_err() {
            return Err(bad("has a value no HTTP header can carry (a line break?)"));
        }
        headers.push((name.to_string(), Secret::new(value)));
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn the_flag_comes_before_the_environment_and_nothing_asks_for_no_push() {
        assert!(Config::resolve(None, &env(&[])).unwrap().is_none());
        assert!(Config::resolve(None, &env(&[(ENDPOINT, " ")])).unwrap().is_none());
        let from_env = Config::resolve(None, &env(&[(ENDPOINT, "http://127.0.0.1:4318")]))
            .unwrap()
            .unwrap();
        assert_eq!(from_env.endpoint.port, 4318);
        assert_eq!(from_env.interval, DEFAULT_INTERVAL);
        assert_eq!(from_env.encoding, Encoding::Protobuf);
        let given = OtlpEndpoint::parse("http://127.0.0.1:9999").unwrap();
        let both = Config::resolve(Some(&given), &env(&[(ENDPOINT, "http://127.0.0.1:4318")]))
            .unwrap()
            .unwrap();
        assert_eq!(both.endpoint.port, 9999);
    }

    #[test]
    fn each_variable_is_read_as_the_specification_writes_it() {
        let config = Config::resolve(
            None,
            &env(&[
                (ENDPOINT, "https://otlp.example/otlp"),
                (
                    HEADERS,
                    "Authorization=Basic%20dXNlcjpwYXNz , x-scope-orgid=tenant-1,",
                ),
                (PROTOCOL, "http/json"),
                (INTERVAL, "250"),
                (TIMEOUT, "1500"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(config.endpoint.metrics_path(), "/otlp/v1/metrics");
        assert_eq!(config.encoding, Encoding::Json);
        assert_eq!(config.interval, Duration::from_millis(250));
        assert_eq!(config.timeout, Duration::from_millis(1500));
        let headers: Vec<(&str, &str)> = (config.headers.iter())
            .map(|(n, v)| (n.as_str(), v.expose()))
            .collect();
        assert_eq!(
            headers,
            [
                ("Authorization", "Basic dXNlcjpwYXNz"),
                ("x-scope-orgid", "tenant-1")
            ]
        );
        assert!(
            !format!("{config:?}").contains("dXNlcjpwYXNz"),
            "never in a debug print"
        );
    }

    #[test]
    fn the_metrics_own_url_is_used_as_it_is_and_the_sdk_disabled_pushes_nothing() {
        let resolved =
            |pairs: &'static [(&'static str, &'static str)]| Config::resolve(None, &env(pairs)).unwrap();
        let both = resolved(&[
            (ENDPOINT, "http://127.0.0.1:4318"),
            (METRICS_ENDPOINT, "http://127.0.0.1:9090/api/v1/otlp/v1/metrics"),
        ])
        .unwrap();
        assert_eq!(both.endpoint.port, 9090);
        assert_eq!(
            both.endpoint.metrics_path(),
            "/api/v1/otlp/v1/metrics",
            "nothing added"
        );
        assert!(resolved(&[(ENDPOINT, "http://127.0.0.1:4318"), (SDK_DISABLED, "TRUE")]).is_none());
        assert!(resolved(&[(ENDPOINT, "http://127.0.0.1:4318"), (SDK_DISABLED, "false")]).is_some());
        let flag = OtlpEndpoint::parse("http://127.0.0.1:4318").unwrap();
        let given = Config::resolve(Some(&flag), &env(&[(SDK_DISABLED, "true")])).unwrap();
        assert!(given.is_some(), "a flag asks for itself");
    }

    #[test]
    fn a_bad_variable_is_named_and_a_header_value_never_shown() {
        let refused =
            |pairs: &'static [(&'static str, &'static str)]| Config::resolve(None, &env(pairs)).unwrap_err();
        let error = refused(&[(ENDPOINT, "127.0.0.1:4318")]);
        assert!(error.starts_with("$OTEL_EXPORTER_OTLP_ENDPOINT: "), "{error}");
        let error = refused(&[(ENDPOINT, "http://c:4318"), (PROTOCOL, "grpc")]);
        assert!(error.contains("http/protobuf"), "{error}");
        let error = refused(&[(ENDPOINT, "http://c:4318"), (INTERVAL, "5s")]);
        assert!(error.contains("OTEL_METRIC_EXPORT_INTERVAL"), "{error}");
        for text in ["a=1,Bearer-s3cret", "=s3cret", "a=s3cret%0Ab"] {
            let error = headers(text).unwrap_err();
            assert!(error.contains("OTEL_EXPORTER_OTLP_HEADERS: entry"), "{error}");
            assert!(!error.contains("s3cret"), "{error}");
        }
    }
}
