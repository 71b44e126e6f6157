//! One push: the encoded request posted to the collector over HTTP/1.1
//! (TLS for `https://`), a connection of its own each time (a push every
//! few seconds gains nothing from keeping one, and a collector restarted
//! between two is met afresh). What went wrong is said in a sentence that
//! names the collector as every URL is shown, and never a header's value.

use std::fmt;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::Request;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
use prost::Message;

use super::config::Config;
use crate::transport::tls::{connect, ClientTls};

/// The most of a collector's answer read: a success is a few bytes, an
/// error a short status.
const ANSWER_LIMIT: usize = 64 * 1024;

/// Why a push did not land.
#[derive(Debug)]
pub enum Failure {
    /// No connection: refused, no such host, a TLS handshake that failed.
    Unreachable(String),
    /// Connected, and the exchange broke off.
    Broken(String),
    /// An HTTP status other than 2xx.
    Refused(hyper::StatusCode),
    /// Taken, but some points rejected (OTLP's partial success).
    Rejected { points: i64, message: String },
    /// No answer within the timeout.
    TimedOut(std::time::Duration),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unreachable(why) => write!(f, "cannot be reached ({why})"),
            Failure::Broken(why) => write!(f, "broke off the push ({why})"),
            Failure::Refused(status) => write!(f, "refused the push with HTTP {status}"),
            Failure::Rejected { points, message } => {
                write!(f, "rejected {points} data points")?;
                match message.is_empty() {
                    true => Ok(()),
                    false => write!(f, " ({})", message.chars().take(200).collect::<String>()),
                }
            }
            Failure::TimedOut(limit) => write!(
                f,
                "did not answer within {} ($OTEL_EXPORTER_OTLP_TIMEOUT)",
                humantime::format_duration(*limit)
            ),
        }
    }
}

/// What one push needs, made once: the request's fixed headers and TLS.
pub struct Poster {
    config: Config,
    tls: Option<ClientTls>,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Poster {
    /// Builds the TLS client for an `https://` collector (a CA file that
    /// cannot be read is an error now) and the headers.
    pub fn new(config: Config) -> Result<Poster, String> {
        let tls = match config.endpoint.tls {
            false => None,
            true => {
                let options = crate::tls::TlsOptions {
                    cacert: config.certificate.clone(),
                    ..Default::default()
                };
                let shown = config.endpoint.to_string();
                let tls = ClientTls::new(&shown, config.endpoint.host_name(), &options, b"http/1.1");
                Some(tls.map_err(|e| format!("--otlp: {e}"))?)
            }
        };
        let mut headers = vec![
            (
                HOST,
                value(&format!("{}:{}", config.endpoint.host, config.endpoint.port))?,
            ),
            (
                CONTENT_TYPE,
                HeaderValue::from_static(config.encoding.content_type()),
            ),
            (
                USER_AGENT,
                value(&format!("volley/{}", env!("CARGO_PKG_VERSION")))?,
            ),
        ];
        for (name, secret) in &config.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("header {name}: {e}"))?;
            let mut secret_value = value(secret.expose())?;
            // Kept out of HTTP/2's header tables too, were it ever sent so.
            secret_value.set_sensitive(true);
            headers.push((name, secret_value));
        }
        Ok(Poster { config, tls, headers })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Posts `body`, within the timeout.
    pub async fn post(&self, body: Vec<u8>) -> Result<(), Failure> {
        let limit = self.config.timeout;
        match tokio::time::timeout(limit, self.exchange(body)).await {
            Ok(result) => result,
            Err(_) => Err(Failure::TimedOut(limit)),
        }
    }

    async fn exchange(&self, body: Vec<u8>) -> Result<(), Failure> {
        let endpoint = &self.config.endpoint;
        let unreachable = |e: std::io::Error| Failure::Unreachable(e.to_string());
        let addrs: Vec<_> = tokio::net::lookup_host((endpoint.host_name(), endpoint.port))
            .await
            .map_err(unreachable)?
            .collect();
        let stream = connect(&addrs, self.tls.as_ref()).await.map_err(unreachable)?;
        let broken = |e: hyper::Error| Failure::Broken(e.to_string());
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(broken)?;
        let mut request = Request::post(endpoint.metrics_path())
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Failure::Broken(e.to_string()))?;
        request.headers_mut().extend(self.headers.iter().cloned());
        let exchange = async {
            let response = sender.send_request(request).await.map_err(broken)?;
            let status = response.status();
            let answer = Limited::new(response.into_body(), ANSWER_LIMIT).collect().await;
            Ok::<_, Failure>((status, answer.map(|a| a.to_bytes()).unwrap_or_default()))
        };
        let mut exchange = std::pin::pin!(exchange);
        // The connection is driven beside the exchange; should it end
        // first (a collector that closes after answering), the exchange
        // still has what it read.
        let (status, answer) = tokio::select! {
            done = &mut exchange => done?,
            _ = connection => exchange.await?,
        };
        if !status.is_success() {
            return Err(Failure::Refused(status));
        }
        rejected(self.config.encoding, &answer)
    }
}

fn value(text: &str) -> Result<HeaderValue, String> {
    HeaderValue::from_str(text).map_err(|_| "a header value no HTTP header can carry".to_string())
}

/// A success that says some points were rejected (protobuf answers only:
/// a JSON one is not read).
fn rejected(encoding: super::config::Encoding, answer: &[u8]) -> Result<(), Failure> {
    if encoding != super::config::Encoding::Protobuf || answer.is_empty() {
        return Ok(());
    }
    let Ok(response) = ExportMetricsServiceResponse::decode(answer) else {
        return Ok(());
    };
    match response.partial_success {
        Some(partial) if partial.rejected_data_points > 0 => Err(Failure::Rejected {
            points: partial.rejected_data_points,
            message: partial.error_message,
        }),
        _ => Ok(()),
    }
}
