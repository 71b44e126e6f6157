//! TLS for the built-in server (`volley serve --tls`), so `https://` and
//! `wss://` are tested against a real server: a certificate from files, or
//! a private CA made at start whose certificate clients pass to `--cacert`.

use std::path::Path;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

pub use crate::tls::read_certificates;
use crate::tls::{provider, ALPN_H2, ALPN_HTTP1};

/// A certificate chain and its key.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl Identity {
    /// Reads a PEM chain and key, naming the file that is wrong.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Identity, String> {
        let chain = read_certificates(cert)?;
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
        Ok(Identity { chain, key })
    }
}

/// A CA of the moment, for loopback servers and their clients.
pub struct LocalCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl LocalCa {
    pub fn new() -> Result<LocalCa, String> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "volley serve local CA");
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(|e| e.to_string())?;
        Ok(LocalCa { issuer })
    }

    /// The CA certificate, for a client's `--cacert` or a server's
    /// `--tls-client-ca`.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `names` (host names or IP addresses) signed by
    /// this CA.
    pub fn issue(&self, names: &[&str]) -> Result<Identity, String> {
        let (cert, key) = self.sign(names)?;
        Ok(Identity {
            chain: vec![cert.der().clone(), self.issuer.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        })
    }

    /// The same as PEM text: the chain, then the key.
    pub fn issue_pem(&self, names: &[&str]) -> Result<(String, String), String> {
        let (cert, key) = self.sign(names)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    fn sign(&self, names: &[&str]) -> Result<(rcgen::Certificate, KeyPair), String> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let params = CertificateParams::new(names).map_err(|e| e.to_string())?;
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let cert = params.signed_by(&key, &self.issuer).map_err(|e| e.to_string())?;
        Ok((cert, key))
    }
}

/// The names a loopback server's certificate is good for.
pub const LOOPBACK_NAMES: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// A server configuration offering HTTP/2 and HTTP/1.1 by ALPN; with
/// `client_ca`, clients must show a certificate it signed.
pub fn server_config(
    identity: Identity,
    client_ca: Option<&[CertificateDer<'static>]>,
) -> Result<Arc<ServerConfig>, String> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(cas) => {
            let mut roots = RootCertStore::empty();
            roots.add_parsable_certificates(cas.iter().cloned());
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| format!("client CA: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(identity.chain, identity.key)
        .map_err(|e| format!("server certificate: {e}"))?;
    config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP1.to_vec()];
    Ok(Arc::new(config))
}
