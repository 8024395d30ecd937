//! The API client: TLS with the admin kubeconfig's client certificate, HTTP/2 connections,
//! each carrying many concurrent requests (streams), as client-go multiplexes.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// Where the server is and who we are, from a kubeconfig.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// `host:port`.
    pub(crate) addr: String,
    tls: Arc<rustls::ClientConfig>,
}

fn data(value: &serde_yaml_ng::Value, key: &str) -> anyhow::Result<Vec<u8>> {
    let text = value[key].as_str().with_context(|| format!("kubeconfig has no {key}"))?;
    Ok(base64::engine::general_purpose::STANDARD.decode(text.trim())?)
}

impl Target {
    /// Reads the first cluster and user of a kubeconfig with embedded certificate data, as
    /// `ballast frontend` and `ballast serve` write it.
    pub(crate) fn from_kubeconfig(path: &str) -> anyhow::Result<Target> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text)?;
        let cluster = &doc["clusters"][0]["cluster"];
        let user = &doc["users"][0]["user"];
        let server = cluster["server"].as_str().context("kubeconfig has no server")?;
        let addr = server.strip_prefix("https://").context("server is not https")?.trim_end_matches('/').to_string();
        let ca = data(cluster, "certificate-authority-data")?;
        let cert = data(user, "client-certificate-data")?;
        let key = data(user, "client-key-data")?;
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&ca) {
            roots.add(c?)?;
        }
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert).collect::<Result<_, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(&key)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)?;
        tls.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Target { addr, tls: Arc::new(tls) })
    }

    /// Opens one HTTP/2 connection.
    pub(crate) async fn connect(&self) -> anyhow::Result<Conn> {
        let tcp = tokio::net::TcpStream::connect(&self.addr).await?;
        tcp.set_nodelay(true)?;
        let name = ServerName::try_from("localhost")?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone()).connect(name, tcp).await?;
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            bail!("the server did not agree to HTTP/2");
        }
        // Flow-control windows of client-go's transport (Go's http2: 4 MiB per stream, 1 GiB
        // per connection), so a large LIST is not paced by window updates kubectl never waits
        // for.
        let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(4 << 20)
            .initial_connection_window_size(1 << 30)
            .handshake(TokioIo::new(tls))
            .await?;
        tokio::spawn(conn);
        Ok(Conn { send })
    }

    /// Opens `n` connections.
    pub(crate) async fn connect_many(&self, n: usize) -> anyhow::Result<Vec<Conn>> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n.max(1) {
            out.push(self.connect().await?);
        }
        Ok(out)
    }
}

/// One HTTP/2 connection; clones share it.
#[derive(Clone, Debug)]
pub(crate) struct Conn {
    send: SendRequest<Full<Bytes>>,
}

/// A whole answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Bytes,
}

impl Conn {
    fn request(method: &str, path: &str, body: Bytes) -> anyhow::Result<http::Request<Full<Bytes>>> {
        Self::request_typed(method, path, "application/json", body)
    }

    fn request_typed(
        method: &str,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> anyhow::Result<http::Request<Full<Bytes>>> {
        let mut req = http::Request::builder().method(method).uri(format!("https://localhost{path}"));
        if !body.is_empty() {
            req = req.header("content-type", content_type);
        }
        Ok(req.header("accept", "application/json").body(Full::new(body))?)
    }

    /// Sends one request and reads the whole answer.
    pub(crate) async fn call(&self, method: &str, path: &str, body: Bytes) -> anyhow::Result<Answer> {
        self.call_typed(method, path, "application/json", body).await
    }

    /// Sends one request with a body of `content_type` (a PATCH's patch type).
    pub(crate) async fn call_typed(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> anyhow::Result<Answer> {
        let mut send = self.send.clone();
        send.ready().await?;
        let resp = send.send_request(Self::request_typed(method, path, content_type, body)?).await?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok(Answer { status, body })
    }

    /// Starts a streamed GET (a watch); returns the body.
    pub(crate) async fn stream(&self, path: &str) -> anyhow::Result<hyper::body::Incoming> {
        let mut send = self.send.clone();
        send.ready().await?;
        let resp = send.send_request(Self::request("GET", path, Bytes::new())?).await?;
        if resp.status() != 200 {
            let status = resp.status();
            let body = resp.into_body().collect().await?.to_bytes();
            return Err(anyhow!("watch answered {status}: {}", String::from_utf8_lossy(&body)));
        }
        Ok(resp.into_body())
    }
}
