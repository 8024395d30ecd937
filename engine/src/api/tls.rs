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

/// Whose flags gave the TLS material: the client port's (`--cert-file`, ...) or the peer
/// port's (`--peer-cert-file`, ...). Error texts name the operator's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    /// The client port.
    Client,
    /// The peer port (its gRPC and raft connections).
    Peer,
}

impl Port {
    fn name(self) -> &'static str {
        match self {
            Port::Client => "client",
            Port::Peer => "peer",
        }
    }

    fn flag(self, name: &str) -> String {
        match self {
            Port::Client => format!("--{name}"),
            Port::Peer => format!("--peer-{name}"),
        }
    }
}

/// Why a port's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The certificate file holds no PEM certificate.
    #[error("{} holds no certificate", .0.flag("cert-file"))]
    NoCertificate(Port),
    /// The key file holds no PEM private key.
    #[error("{flag} holds no private key: {err}", flag = .0.flag("key-file"), err = .1)]
    Key(Port, #[source] rustls_pki_types::pem::Error),
    /// rustls refused the material.
    #[error("{port} TLS: {err}", port = .0.name(), err = .1)]
    Rustls(Port, #[source] rustls::Error),
    /// The CA bundle could not build a client verifier.
    #[error("{flag}: {err}", flag = .0.flag("trusted-ca-file"), err = .1)]
    Verifier(Port, #[source] rustls::server::VerifierBuilderError),
}

/// Builds the TLS server configuration of `port` from `tls` (certificate, key, CA, client
/// auth).
///
/// # Errors
/// Missing or unusable PEM material, named by `port`'s flags.
pub fn server_config(tls: &PeerTls, port: Port) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&tls.cert_pem).flatten().collect();
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(port));
    }
    let key = PrivateKeyDer::from_pem_slice(&tls.key_pem).map_err(|e| TlsError::Key(port, e))?;
    let refused = |e| TlsError::Rustls(port, e);
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(refused)?;
    let builder = match &tls.ca_pem {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca).flatten() {
                roots.add(cert).map_err(refused)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if tls.client_cert_auth { verifier } else { verifier.allow_unauthenticated() };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| TlsError::Verifier(port, e))?)
        }
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder.with_single_cert(certs, key).map_err(refused)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_material_is_named_by_the_flags_of_its_port() {
        let empty = PeerTls { cert_pem: Vec::new(), key_pem: Vec::new(), ca_pem: None, client_cert_auth: false };
        let client = server_config(&empty, Port::Client).expect_err("no certificate").to_string();
        let peer = server_config(&empty, Port::Peer).expect_err("no certificate").to_string();
        assert_eq!(client, "--cert-file holds no certificate");
        assert_eq!(peer, "--peer-cert-file holds no certificate");
    }
}
