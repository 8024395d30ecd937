//! The HTTPS client side of the aggregator: connections to an extension server (reused through
//! the [`Pool`]), verified with the APIService's `caBundle` (or not at all with
//! `insecureSkipTLSVerify`), presenting the front-proxy client certificate, with the connect
//! and response-header timeouts of [`AggregatorConfig`].

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use ballast_apiserver::body::RequestBody;

use crate::apiservice::ApiService;
use crate::config::AggregatorConfig;
use crate::pool::{BackendKey, Pool};

/// Why an extension server could not be asked; the text is what callers and the
/// `FailedDiscoveryCheck` condition show.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The front-proxy client certificate or key is unusable.
    #[error("front-proxy client certificate: {0}")]
    ClientCertificate(String),
    /// The APIService's `caBundle` holds no usable certificate.
    #[error("spec.caBundle holds no usable certificate")]
    CaBundle,
    /// The TLS client could not be built.
    #[error("TLS client configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// The name to verify is not a valid server name.
    #[error("invalid server name {0:?}")]
    ServerName(String),
    /// Connecting (TCP and TLS) failed.
    #[error("dial tcp {address}: {source}")]
    Connect {
        /// `host:port`.
        address: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// Connecting took longer than the connect timeout.
    #[error("dial tcp {address}: i/o timeout")]
    ConnectTimeout {
        /// `host:port`.
        address: String,
    },
    /// The HTTP exchange failed (a garbled answer, a closed connection).
    #[error("{0}")]
    Http(#[from] hyper::Error),
    /// The server sent no response headers within the response-header timeout.
    #[error("timeout awaiting response headers")]
    ResponseTimeout,
}

/// The front-proxy client identity, parsed once.
#[derive(Debug, Clone, Default)]
pub struct ClientIdentity {
    cert: Option<(Vec<CertificateDer<'static>>, Arc<PrivateKeyDer<'static>>)>,
}

impl ClientIdentity {
    /// Parses the front-proxy certificate and key (PEM); both absent is no identity.
    ///
    /// # Errors
    ///
    /// `ClientCertificate` when either is missing or unparsable.
    pub fn from_pem(cert: Option<&str>, key: Option<&str>) -> Result<ClientIdentity, BackendError> {
        let (cert, key) = match (cert, key) {
            (None, None) => return Ok(ClientIdentity::default()),
            (Some(c), Some(k)) => (c, k),
            _ => return Err(BackendError::ClientCertificate("certificate and key go together".into())),
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| BackendError::ClientCertificate(e.to_string()))?;
        if certs.is_empty() {
            return Err(BackendError::ClientCertificate("no certificate in the PEM".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
            .map_err(|e| BackendError::ClientCertificate(e.to_string()))?;
        Ok(ClientIdentity { cert: Some((certs, Arc::new(key))) })
    }
}

/// The TLS client for `api`'s server.
///
/// # Errors
///
/// `CaBundle` when a non-empty bundle holds no certificate; `Tls` when rustls refuses the
/// configuration.
pub fn tls_config(api: &ApiService, identity: &ClientIdentity) -> Result<Arc<rustls::ClientConfig>, BackendError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder =
        rustls::ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let builder = if api.insecure_skip_tls_verify {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&api.ca_bundle).flatten() {
            // A certificate rustls cannot use as a root is skipped, as Go skips it.
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err(BackendError::CaBundle);
        }
        builder.with_root_certificates(roots)
    };
    let mut config = match &identity.cert {
        Some((certs, key)) => builder.with_client_auth_cert(certs.clone(), key.clone_key())?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Where and how to reach one extension server.
#[derive(Debug, Clone)]
pub struct Target {
    /// Host to connect to (a name or an address).
    pub host: String,
    /// Port.
    pub port: u16,
    /// The name its certificate must carry.
    pub server_name: String,
    /// The TLS client.
    pub tls: Arc<rustls::ClientConfig>,
    /// Which pooled connections may carry its requests.
    pub key: BackendKey,
}

impl Target {
    /// `https://host:port`, as error messages show it.
    pub fn url(&self) -> String {
        if self.host.contains(':') {
            format!("https://[{}]:{}", self.host, self.port)
        } else {
            format!("https://{}:{}", self.host, self.port)
        }
    }
}

/// Sends `req` (origin-form URI, headers as they should arrive) to `target`, on an idle
/// pooled connection when there is one, else on a new one; returns once the response headers
/// are in. The body streams afterwards, and the connection goes back to `pool` when it is over.
///
/// A pooled connection the server closed meanwhile is detected before the request is written
/// (hyper hands the request back), and the request goes on another connection; a request
/// that was written is never sent twice.
///
/// # Errors
///
/// The failing step, bounded by the config's connect and response-header timeouts.
pub async fn send(
    pool: &Arc<Pool>,
    target: &Target,
    mut req: http::Request<RequestBody>,
    config: &AggregatorConfig,
) -> Result<http::Response<Incoming>, BackendError> {
    while let Some(mut sender) = pool.checkout(&target.key) {
        match tokio::time::timeout(config.response_header_timeout, sender.try_send_request(req)).await {
            Err(_) => return Err(BackendError::ResponseTimeout),
            Ok(Ok(resp)) => {
                pool.release(target.key.clone(), sender);
                return Ok(resp);
            }
            Ok(Err(mut failed)) => match failed.take_message() {
                Some(unsent) => req = unsent,
                None => return Err(BackendError::Http(failed.into_error())),
            },
        }
    }
    let mut sender = connect(target, config).await?;
    let resp = tokio::time::timeout(config.response_header_timeout, sender.send_request(req))
        .await
        .map_err(|_| BackendError::ResponseTimeout)?
        .map_err(BackendError::Http)?;
    pool.release(target.key.clone(), sender);
    Ok(resp)
}

/// A new connection to `target` (TCP, TLS, HTTP/1.1), driven by a task of its own until the
/// server or the last sender closes it; upgrades (a 101 answer) hand the stream to the caller.
async fn connect(target: &Target, config: &AggregatorConfig) -> Result<SendRequest<RequestBody>, BackendError> {
    let address = target.url().trim_start_matches("https://").to_string();
    let name = ServerName::try_from(target.server_name.clone())
        .map_err(|_| BackendError::ServerName(target.server_name.clone()))?;
    let connect = async {
        let tcp = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(|source| BackendError::Connect { address: address.clone(), source })?;
        let _ = tcp.set_nodelay(true);
        tokio_rustls::TlsConnector::from(target.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|source| BackendError::Connect { address: address.clone(), source })
    };
    let tls = tokio::time::timeout(config.connect_timeout, connect)
        .await
        .map_err(|_| BackendError::ConnectTimeout { address: address.clone() })??;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "extension server connection ended");
        }
    });
    Ok(sender)
}

/// `insecureSkipTLSVerify`: any certificate is accepted (signatures are still checked, so the
/// connection is at least to the holder of the certificate's key).
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
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
