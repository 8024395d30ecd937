//! The HTTPS side of conversion webhooks: where a definition's `clientConfig` points (a URL,
//! or a Service resolved as kube's cluster-IP resolver does), and one POST of a JSON body to
//! it, verified with the `caBundle`. Failures read as Go's HTTP client words them
//! (`Post "https://...?timeout=30s": dial tcp ...: connect: connection refused`), since kube
//! puts that text into the request's error.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

use ballast_apiserver::error::ApiError;
use ballast_apiserver::registry::Store;

use crate::definition::{ServiceReference, WebhookClientConfig};

/// How long one webhook call may take, connecting included: kube's fixed conversion webhook
/// timeout, which it also sends as the `timeout` query parameter.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The smallest limit on an answer read from a webhook. A ConversionReview answers with the
/// objects it was sent (one, each bounded by the request size limit of 3 MiB, or the objects
/// of a LIST's page, already held in memory), so an answer may be up to this or twice the
/// review sent, whichever is larger ([`response_limit`]); a larger answer is refused rather
/// than buffered.
pub const RESPONSE_LIMIT: usize = 16 << 20;

/// The limit on the answer to a review of `sent` bytes: converted objects may grow, but not
/// past twice what was sent.
fn response_limit(sent: usize) -> usize {
    RESPONSE_LIMIT.max(sent.saturating_mul(2))
}

/// Where a call goes.
#[derive(Debug)]
struct Target {
    /// The URL as errors show it (`https://name.ns.svc:443/convert?timeout=30s`).
    url: String,
    /// The host and port dialled.
    host: String,
    port: u16,
    /// The name the server's certificate must carry.
    server_name: String,
    /// The origin-form request target (`/convert?timeout=30s`).
    path: String,
}

/// Resolves Services for webhooks from the built-in API's store.
#[derive(Debug, Clone)]
pub struct Services(pub Store);

impl Services {
    /// `host:port` of `service`: an ExternalName Service's name and the reference's port, or
    /// the cluster IP and the matching Service port (kube's cluster-IP resolver).
    async fn resolve(&self, service: &ServiceReference) -> Result<(String, u16), String> {
        let kinds = self.0.kinds().clone();
        let row = kinds
            .kinds()
            .iter()
            .copied()
            .find(|k| k.group.is_empty() && k.resource == "services")
            .ok_or_else(|| "services are not served".to_string())?;
        let svc = match self.0.get(row, &service.namespace, &service.name).await {
            Ok(s) => Value::Object(s),
            Err(ApiError::NotFound { .. }) => return Err(format!("service {:?} not found", service.name)),
            Err(e) => return Err(e.to_string()),
        };
        let spec = &svc["spec"];
        let type_ = spec["type"].as_str().unwrap_or("ClusterIP");
        match type_ {
            "ExternalName" => {
                let host = spec["externalName"].as_str().unwrap_or("").trim_end_matches('.');
                Ok((host.to_string(), service.port))
            }
            "ClusterIP" | "NodePort" | "LoadBalancer" => {
                let ip = spec["clusterIP"].as_str().unwrap_or("");
                if type_ == "ClusterIP" && ip == "None" {
                    return Err("cannot route to service with ClusterIP \"None\"".into());
                }
                let listens = spec["ports"]
                    .as_array()
                    .is_some_and(|ports| ports.iter().any(|p| p["port"].as_u64() == Some(u64::from(service.port))));
                if !listens {
                    return Err(format!("no service port {} found for service {:?}", service.port, service.name));
                }
                Ok((ip.to_string(), service.port))
            }
            other => Err(format!("unsupported service type {other:?}")),
        }
    }
}

fn timeout_query() -> String {
    format!("timeout={}s", TIMEOUT.as_secs())
}

/// The target of a `url` client config.
fn url_target(url: &str) -> Result<Target, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("parse {url:?}: {e}"))?;
    let authority = uri.authority().ok_or_else(|| format!("{url:?}: no host"))?.as_str();
    let host = uri.host().unwrap_or("").trim_matches(['[', ']']).to_string();
    let port = uri.port_u16().unwrap_or(443);
    let shown = format!("https://{authority}{}?{}", uri.path().trim_end_matches('/'), timeout_query());
    let path = if uri.path().is_empty() { "/" } else { uri.path() };
    Ok(Target { url: shown, server_name: host.clone(), host, port, path: format!("{path}?{}", timeout_query()) })
}

/// Sends `body` to the webhook `config` names and returns its answer's status and body.
///
/// # Errors
///
/// Go's text of the failure (`Post "<url>": <cause>`), or the resolution's.
pub async fn post(config: &WebhookClientConfig, services: Option<&Services>, body: Vec<u8>) -> Result<Bytes, String> {
    let target = match (&config.url, &config.service) {
        (Some(url), _) => url_target(url)?,
        (None, Some(svc)) => {
            let path = if svc.path.is_empty() { "/".to_string() } else { svc.path.clone() };
            let path = format!("{path}?{}", timeout_query());
            let server_name = format!("{}.{}.svc", svc.name, svc.namespace);
            let url = format!("https://{server_name}:{}{path}", svc.port);
            let services = services.ok_or_else(|| format!("Post {url:?}: services cannot be resolved"))?;
            let (host, port) = services.resolve(svc).await.map_err(|e| format!("Post {url:?}: {e}"))?;
            Target { url, host, port, server_name, path }
        }
        (None, None) => return Err("no url or service in the webhook client config".into()),
    };
    let url = target.url.clone();
    match tokio::time::timeout(TIMEOUT, exchange(&target, &config.ca_bundle, body)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(format!("Post {url:?}: {e}")),
        Err(_) => Err(format!("Post {url:?}: context deadline exceeded")),
    }
}

/// The TLS client trusting `ca_bundle` (PEM).
fn tls(ca_bundle: &[u8]) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let bundle: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(ca_bundle).flatten().collect();
    let roots = root_store(&bundle);
    let chained = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("tls: {e}"))?;
    let verifier = Arc::new(BundleVerifier { chained, bundle });
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The roots a webhook's certificate may chain to: the `caBundle`'s certificates, or the
/// system's trusted roots when the bundle is empty, as Go's client trusts them then.
fn root_store(bundle: &[CertificateDer<'static>]) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    let trusted = if bundle.is_empty() { system_roots() } else { bundle };
    for cert in trusted {
        // A certificate rustls cannot use as a root is skipped, as Go skips it.
        let _ = roots.add(cert.clone());
    }
    roots
}

/// The system's trusted roots (the platform store, or `SSL_CERT_FILE`/`SSL_CERT_DIR`), read
/// once per process as Go reads them: a machine's roots change with its packages, not per call.
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: std::sync::OnceLock<Vec<CertificateDer<'static>>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            tracing::warn!("reading the system's trusted roots: {e}");
        }
        found.certs
    })
}

/// The server's certificate chains to the `caBundle`, or is itself one of its certificates
/// and names the server: Go accepts a self-signed certificate given as its own bundle (as
/// webhook set-ups made with `openssl req -x509` use), which the chain check alone refuses.
#[derive(Debug)]
struct BundleVerifier {
    chained: Arc<rustls::client::WebPkiServerVerifier>,
    bundle: Vec<CertificateDer<'static>>,
}

impl rustls::client::danger::ServerCertVerifier for BundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self.chained.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Ok(verified) => Ok(verified),
            Err(e) if self.bundle.iter().any(|c| c.as_ref() == end_entity.as_ref()) => {
                let cert = webpki::EndEntityCert::try_from(end_entity).map_err(|_| e.clone())?;
                cert.verify_is_valid_for_subject_name(server_name).map_err(|_| e)?;
                Ok(rustls::client::danger::ServerCertVerified::assertion())
            }
            Err(e) => Err(e),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.chained.supported_verify_schemes()
    }
}

/// Go's words for a failed dial.
fn dial_error(address: &str, e: &std::io::Error) -> String {
    let cause = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        std::io::ErrorKind::ConnectionReset => "read: connection reset by peer".to_string(),
        _ => e.to_string(),
    };
    format!("dial tcp {address}: {cause}")
}

async fn exchange(target: &Target, ca_bundle: &[u8], body: Vec<u8>) -> Result<Bytes, String> {
    let address = if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let tcp = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| dial_error(&address, &e))?;
    let _ = tcp.set_nodelay(true);
    let name = ServerName::try_from(target.server_name.clone())
        .map_err(|_| format!("invalid server name {:?}", target.server_name))?;
    let tls = tokio_rustls::TlsConnector::from(tls(ca_bundle)?)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: failed to verify certificate: {e}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "conversion webhook connection ended");
        }
    });
    let limit = response_limit(body.len());
    let req = http::Request::post(&target.path)
        .header(http::header::HOST, format!("{}:{}", target.server_name, target.port))
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let answer = Limited::new(resp.into_body(), limit)
        .collect()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
        .to_bytes();
    if status.is_success() {
        return Ok(answer);
    }
    // kube's client reads a Status from an error answer, else describes the code.
    let message = serde_json::from_slice::<Value>(&answer)
        .ok()
        .filter(|v| v["kind"] == "Status")
        .and_then(|v| v["message"].as_str().map(String::from));
    Err(match message {
        Some(m) => m,
        None if answer.is_empty() => {
            format!("the server responded with the status code {} but did not return more information", status.as_u16())
        }
        None => format!(
            "an error on the server ({:?}) has prevented the request from succeeding",
            String::from_utf8_lossy(&answer)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_bundle_trusts_the_system_roots() {
        // The machine's roots (ca-certificates) are many; an empty bundle trusts them all.
        let system = rustls_native_certs::load_native_certs().certs.len();
        assert!(system > 0, "no system roots on this machine");
        assert_eq!(root_store(&[]).len(), system);
        assert!(tls(b"").is_ok());
    }
}
