//! TLS on the client port (etcd's `--cert-file`, `--key-file`, `--trusted-ca-file`,
//! `--client-cert-auth` with `https://` listen URLs, and `unixs://` for TLS over a Unix
//! socket), with rustls: TLS 1.2 and 1.3, ALPN `h2`
//! for gRPC and `http/1.1` for the HTTP endpoints. Handshakes run on their own tasks, so a
//! slow or silent client never holds up the accept loop; the decrypted stream is what the
//! authority fix and the gRPC server read.

use std::sync::Arc;
use std::time::Duration;

use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;

use super::accept::{each_connection, Listener};

use crate::cluster::PeerTls;

/// How long a client has to finish its TLS handshake. 10 s covers a handshake over a slow
/// link many times over and bounds what a client that connects and says nothing holds.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the client port's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The certificate file holds no PEM certificate.
    #[error("--cert-file holds no certificate")]
    NoCertificate,
    /// The key file holds no PEM private key.
    #[error("--key-file holds no private key: {0}")]
    Key(#[source] rustls_pki_types::pem::Error),
    /// rustls refused the material.
    #[error("client TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// The CA bundle could not build a client verifier.
    #[error("--trusted-ca-file: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// Builds the client port's TLS configuration from `tls` (certificate, key, CA, client auth;
/// the same material the peer port takes).
///
/// # Errors
/// Missing or unusable PEM material.
pub fn server_config(tls: &PeerTls) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&tls.cert_pem).flatten().collect();
    if certs.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(&tls.key_pem).map_err(TlsError::Key)?;
    let builder =
        rustls::ServerConfig::builder_with_provider(Arc::clone(&provider)).with_safe_default_protocol_versions()?;
    let builder = match &tls.ca_pem {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca).flatten() {
                roots.add(cert)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if tls.client_cert_auth { verifier } else { verifier.allow_unauthenticated() };
            builder.with_client_cert_verifier(verifier.build()?)
        }
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder.with_single_cert(certs, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Accepts connections from `listener`, completes their handshakes on tasks of their own
/// and yields the ones that succeed; a failed handshake (a certificate the CA did not sign,
/// none where one is required, a timeout) closes that connection only.
pub fn incoming<L: Listener>(
    listener: L,
    cfg: Arc<rustls::ServerConfig>,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<TlsStream<L::Io>>> {
    // A handful of finished handshakes waiting for the server to take them.
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
    let closed = tx.clone();
    tokio::spawn(each_connection(listener, async move { closed.closed().await }, move |tcp, peer| {
        let (acceptor, tx) = (acceptor.clone(), tx.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    let _ = tx.send(Ok(tls)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "client TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "client TLS handshake timed out"),
            }
        });
    }));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
