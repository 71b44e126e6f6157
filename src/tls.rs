//! TLS settings that the client (`https://`, `wss://` targets) and the
//! built-in server (`volley serve --tls`) share: the options a scenario
//! names, the one crypto provider, PEM files, ALPN names, and a stream that
//! is plain TCP or TLS. Each side builds its own config from these.

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::RootCertStore;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// How to trust the server, and how to prove who volley is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Trust this CA (PEM) instead of the built-in web roots.
    pub cacert: Option<PathBuf>,
    /// Also trust the operating system's certificate store.
    pub system_roots: bool,
    /// Accept any certificate. Stated in every report.
    pub insecure: bool,
    /// Client certificate chain (PEM) for mutual TLS.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
}

/// The protocols a connection may offer by ALPN.
pub const ALPN_H2: &[u8] = b"h2";
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// The one provider every config is built with.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads the files `options` name as a run will (PEM certificates, a usable
/// CA, a private key), so a file that is there but unusable is refused
/// before anything is sent; the error names the option (`cacert`, `cert`,
/// `key`).
pub fn check_files(options: &TlsOptions) -> Result<(), (&'static str, String)> {
    if let Some(path) = &options.cacert {
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(read_certificates(path).map_err(|m| ("cacert", m))?);
        if added == 0 {
            return Err((
                "cacert",
                format!("{}: no usable CA certificate in it", path.display()),
            ));
        }
    }
    if let Some(path) = &options.cert {
        read_certificates(path).map_err(|m| ("cert", m))?;
    }
    if let Some(path) = &options.key {
        PrivateKeyDer::from_pem_file(path).map_err(|e| ("key", format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// Every certificate in a PEM file; none is an error.
pub fn read_certificates(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certificates.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certificates)
}

/// A TCP connection, with or without TLS: one type for every transport
/// that may run over either.
pub enum NetStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl AsyncRead for NetStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            NetStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            NetStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for NetStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            NetStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            NetStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            NetStream::Plain(s) => Pin::new(s).poll_flush(cx),
            NetStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            NetStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            NetStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
