//! TLS for `https://` and `wss://` targets, with rustls and its `ring`
//! provider (the default `aws-lc-rs` needs a C toolchain CI may lack).
//!
//! Roots: the web's (built in, so a bare container works), the system
//! store on request, or a private CA from a file. `--insecure` skips
//! verification and says so in every report.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::TargetError;
use crate::tls::{provider, read_certificates, NetStream, TlsOptions, ALPN_H2};

/// A client side ready to open connections to one host.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
    name: ServerName<'static>,
    /// Whether ALPN must settle on HTTP/2.
    wants_h2: bool,
    /// The scheme without TLS (`http://`, `ws://`), which a server that
    /// answers a handshake in plain text is asked about.
    plain: &'static str,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Builds the client configuration once, before the run: a missing or
    /// unreadable certificate file is an error here, not a run of failures.
    pub fn new(url: &str, host: &str, options: &TlsOptions, alpn: &[u8]) -> Result<Self, TargetError> {
        let bad = |reason: String| TargetError::Tls {
            url: url.to_string(),
            reason,
        };
        let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_string())
            .map_err(|e| bad(format!("`{host}` is not a name TLS can verify: {e}")))?;
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(e.to_string()))?;
        let builder = if options.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider())))
        } else {
            builder.with_root_certificates(roots(options).map_err(bad)?)
        };
        let mut config = match (&options.cert, &options.key) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = read_certificates(cert).map_err(bad)?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| bad(format!("client key {}: {e}", key.display())))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| bad(format!("client certificate: {e}")))?
            }
            _ => return Err(bad("a client certificate needs both --cert and --key".into())),
        };
        config.alpn_protocols = vec![alpn.to_vec()];
        Ok(ClientTls {
            connector: TlsConnector::from(Arc::new(config)),
            name,
            wants_h2: alpn == ALPN_H2,
            plain: plain_scheme(url),
        })
    }

    /// Opens a TCP connection and completes the handshake over it.
    pub async fn connect(&self, addrs: &[SocketAddr]) -> io::Result<NetStream> {
        let stream = TcpStream::connect(addrs).await?;
        stream.set_nodelay(true)?;
        let stream = self
            .connector
            .connect(self.name.clone(), stream)
            .await
            .map_err(
                |e| match e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
                    true => explain(e, self.plain),
                    // Some plain-text servers close on a ClientHello.
                    false if e.kind() == io::ErrorKind::UnexpectedEof => io::Error::new(
                        e.kind(),
                        format!(
                            "TLS handshake failed: the server closed the connection during it ({e}): is it {}?",
                            self.plain
                        ),
                    ),
                    false => io::Error::new(e.kind(), format!("TLS handshake failed: {e}")),
                },
            )?;
        if self.wants_h2 && stream.get_ref().1.alpn_protocol() != Some(ALPN_H2) {
            return Err(io::Error::other(
                "the server did not agree to HTTP/2 by ALPN (it may speak only HTTP/1.1: leave out --http2)",
            ));
        }
        Ok(NetStream::Tls(Box::new(stream.into())))
    }
}

/// The scheme a `https://` or `wss://` URL has without TLS.
fn plain_scheme(url: &str) -> &'static str {
    if url.starts_with("wss://") {
        "ws://"
    } else {
        "http://"
    }
}

/// Waits a moment for the server to object after a TLS handshake: under
/// TLS 1.3 a server that wants a client certificate says so only after the
/// client thinks the handshake is done. Silence, or the server's first
/// bytes (an HTTP/2 preface), mean it did not object.
pub async fn settle(stream: &mut NetStream) -> io::Result<()> {
    use tokio::io::AsyncReadExt;
    if let NetStream::Tls(_) = stream {
        let mut byte = [0u8; 1];
        if let Ok(Err(e)) =
            tokio::time::timeout(std::time::Duration::from_millis(250), stream.read(&mut byte)).await
        {
            return Err(explain(e, "http://"));
        }
    }
    Ok(())
}

/// What a TLS connection agreed on, for reports: `TLSv1_3 ·
/// TLS13_AES_256_GCM_SHA384 · ALPN h2`. `None` without TLS.
pub fn describe(stream: &NetStream) -> Option<String> {
    let NetStream::Tls(stream) = stream else {
        return None;
    };
    let (_, session) = stream.get_ref();
    let mut parts = Vec::new();
    if let Some(version) = session.protocol_version() {
        parts.push(format!("{version:?}"));
    }
    if let Some(suite) = session.negotiated_cipher_suite() {
        parts.push(format!("{:?}", suite.suite()));
    }
    if let Some(alpn) = session.alpn_protocol() {
        parts.push(format!("ALPN {}", String::from_utf8_lossy(alpn)));
    }
    Some(parts.join(" · "))
}

/// Opens a connection to the first of `addrs` that takes it, over TLS when
/// `tls` is given.
pub async fn connect(addrs: &[SocketAddr], tls: Option<&ClientTls>) -> io::Result<NetStream> {
    match tls {
        Some(tls) => tls.connect(addrs).await,
        None => {
            let stream = TcpStream::connect(addrs).await?;
            // Requests are written whole; waiting for more bytes only adds latency.
            stream.set_nodelay(true)?;
            Ok(NetStream::Plain(stream))
        }
    }
}

fn roots(options: &TlsOptions) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match &options.cacert {
        Some(path) => {
            let (added, _) = roots.add_parsable_certificates(read_certificates(path)?);
            if added == 0 {
                return Err(format!("{}: no usable CA certificate in it", path.display()));
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    if options.system_roots {
        let found = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            let why = found.errors.first().map(|e| format!(": {e}")).unwrap_or_default();
            return Err(format!(
                "the system certificate store has no usable certificate{why}"
            ));
        }
    }
    Ok(roots)
}

/// Turns a failed handshake into a sentence that says what to do; `plain`
/// is the scheme to ask about when the server did not speak TLS at all.
pub fn explain(error: io::Error, plain: &str) -> io::Error {
    let advice = match error.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
        // A plain-text server answers a ClientHello in its own protocol
        // (`HTTP/1.1 400 ...`), whose first byte is no TLS record type.
        Some(rustls::Error::InvalidMessage(why)) => format!(
            "the server's answer to the TLS handshake is not TLS ({why:?}): is it {plain}? It may serve plain text only"
        ),
        Some(rustls::Error::InvalidCertificate(why)) => format!(
            "the server's certificate was refused ({why:?}); for a private CA give --cacert FILE, or --insecure to skip verification"
        ),
        Some(rustls::Error::AlertReceived(alert)) => {
            use rustls::AlertDescription::{BadCertificate, CertificateRequired, UnknownCA};
            let hint = if matches!(alert, CertificateRequired | BadCertificate | UnknownCA) {
                "; it wants a client certificate it trusts (--cert FILE --key FILE)"
            } else {
                ""
            };
            format!("the server refused the TLS handshake ({alert:?}){hint}")
        }
        Some(other) => format!("TLS handshake failed: {other}"),
        // Not TLS's doing (a reset, say): as it was.
        None => return error,
    };
    io::Error::new(error.kind(), advice)
}

/// `--insecure`: any certificate passes, though the handshake's signatures
/// are still checked (so the connection is at least consistent).
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_connection_tries_each_address_in_turn() {
        let open = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        // A port that was free a moment ago, and is closed now.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let addrs = [closed, open.local_addr().unwrap()];
        let stream = connect(&addrs, None).await.unwrap();
        let NetStream::Plain(stream) = stream else {
            panic!("no TLS was asked for")
        };
        assert_eq!(stream.peer_addr().unwrap(), addrs[1]);
        assert!(connect(&addrs[..1], None).await.is_err());
    }
}
