//! [`Unary`]: unary gRPC calls made straight on an HTTP/2 connection (the `h2` crate), for the KV
//! scenarios.
//!
//! Why not tonic's channel: the load tool shares the machine's cores with the server it
//! measures, so every microsecond it spends per request is taken from the server's throughput.
//! A tonic request passes the channel's buffer task and then hyper's client dispatch task (one
//! spawned task more per request to send its body) before h2 sees it; here the worker task
//! itself opens the stream, sends the one DATA frame and reads the answer, and the connection
//! task only does the socket I/O. The requests on the wire are the same gRPC requests
//! (HTTP/2 POST, `application/grpc`, `te: trailers`, one length-prefixed protobuf message) with
//! the flow-control settings hyper's client uses, so etcd and Ballast are measured alike.
//! An `https://` endpoint is reached over TLS (rustls, ALPN h2), its certificate checked against
//! the CA of `--cacert` ([`CA_FILE`]).

use ballast_proto::coalesce::CoalescingStream;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Method, Request, Uri};
use prost::Message;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// The CA certificate (PEM) `https://` endpoints are checked against (`--cacert`).
pub(crate) static CA_FILE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Returns a TLS connector trusting [`CA_FILE`], offering HTTP/2 only, as etcd's Go client does.
fn tls_connector() -> anyhow::Result<tokio_rustls::TlsConnector> {
    use rustls_pki_types::pem::PemObject;
    let path = CA_FILE.get().ok_or_else(|| anyhow::anyhow!("an https:// endpoint needs --cacert"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(path)? {
        roots.add(cert?)?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)))
}

/// Starts HTTP/2 with hyper's client settings on `io`; the connection runs on a task of its own.
async fn handshake<T>(io: T) -> anyhow::Result<h2::client::SendRequest<Bytes>>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_send_buffer_size(MAX_SEND_BUFFER)
        .max_header_list_size(MAX_HEADER_LIST)
        .initial_max_send_streams(INITIAL_MAX_SEND_STREAMS)
        .enable_push(false)
        .handshake::<_, Bytes>(CoalescingStream::new(io))
        .await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(send)
}

/// hyper's client defaults (which tonic's channel uses): windows of 2 MiB per stream and 5 MiB
/// per connection, 1 MiB of queued send data per stream, 16 KiB of headers, 100 streams
/// before the server's SETTINGS arrive.
const STREAM_WINDOW: u32 = 2 << 20;
const CONNECTION_WINDOW: u32 = 5 << 20;
const MAX_SEND_BUFFER: usize = 1 << 20;
const MAX_HEADER_LIST: u32 = 16 << 10;
const INITIAL_MAX_SEND_STREAMS: usize = 100;

/// gRPC's message prefix: a compression flag and a big-endian length.
const PREFIX: usize = 5;

/// KV service paths.
pub(crate) const PUT: &str = "/etcdserverpb.KV/Put";
pub(crate) const RANGE: &str = "/etcdserverpb.KV/Range";
pub(crate) const TXN: &str = "/etcdserverpb.KV/Txn";

/// One HTTP/2 connection for unary calls; clones share it.
#[derive(Clone, Debug)]
pub(crate) struct Unary {
    send: h2::client::SendRequest<Bytes>,
    scheme: Scheme,
    authority: Authority,
    /// Largest response accepted, as tonic's `max_decoding_message_size`.
    max_response: usize,
}

impl Unary {
    /// Connects to `url` (`http://host:port`, or `https://` with [`CA_FILE`]).
    pub(crate) async fn connect(url: &str) -> anyhow::Result<Self> {
        let uri: Uri = url.parse()?;
        let authority = uri.authority().cloned().ok_or_else(|| anyhow::anyhow!("no host in {url}"))?;
        let tcp = TcpStream::connect((authority.host(), authority.port_u16().unwrap_or(2379))).await?;
        tcp.set_nodelay(true)?;
        let (send, scheme) = if uri.scheme() == Some(&Scheme::HTTPS) {
            let name = rustls_pki_types::ServerName::try_from(authority.host().to_string())?;
            let tls = tls_connector()?.connect(name, tcp).await?;
            (handshake(tls).await?, Scheme::HTTPS)
        } else {
            (handshake(tcp).await?, Scheme::HTTP)
        };
        Ok(Self { send, scheme, authority, max_response: 64 << 20 })
    }

    /// Calls the unary method at `path` with `req`.
    ///
    /// # Errors
    /// A transport error, a gRPC status other than OK, or a response that does not decode.
    pub(crate) async fn call<Req: Message, Resp: Message + Default>(
        &self,
        path: &'static str,
        req: &Req,
    ) -> anyhow::Result<Resp> {
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(self.authority.clone());
        parts.path_and_query = Some(PathAndQuery::from_static(path));
        let mut request = Request::new(());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = Uri::from_parts(parts)?;
        let headers = request.headers_mut();
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(http::header::TE, HeaderValue::from_static("trailers"));

        let len = req.encoded_len();
        let mut body = BytesMut::with_capacity(PREFIX + len);
        body.put_u8(0);
        body.put_u32(u32::try_from(len)?);
        req.encode_raw(&mut body);

        let mut send = self.send.clone().ready().await?;
        let (response, mut stream) = send.send_request(request, false)?;
        stream.send_data(body.freeze(), true)?;
        let response = response.await?;
        if response.status() != http::StatusCode::OK {
            anyhow::bail!("http status {}", response.status());
        }
        // A server that fails a call at once answers with headers only (grpc-status in them).
        if response.headers().contains_key("grpc-status") {
            check_status(response.headers())?;
            anyhow::bail!("no message in the response");
        }
        let mut recv = response.into_body();
        let mut message = Bytes::new();
        let mut gathered = BytesMut::new();
        while let Some(chunk) = recv.data().await {
            let chunk = chunk?;
            let _ = recv.flow_control().release_capacity(chunk.len());
            if message.is_empty() && gathered.is_empty() {
                message = chunk; // most answers are one DATA frame: no copy
            } else {
                if gathered.is_empty() {
                    gathered.extend_from_slice(&message);
                }
                gathered.extend_from_slice(&chunk);
            }
            if gathered.len().max(message.len()) > self.max_response + PREFIX {
                anyhow::bail!("response larger than {} bytes", self.max_response);
            }
        }
        match recv.trailers().await? {
            Some(trailers) if trailers.contains_key("grpc-status") => check_status(&trailers)?,
            _ => anyhow::bail!("no grpc-status in the response's trailers"),
        }
        let mut message = if gathered.is_empty() { message } else { gathered.freeze() };
        if message.len() < PREFIX || message[0] != 0 {
            anyhow::bail!("no uncompressed message in the response");
        }
        message.advance(1);
        let declared = message.get_u32() as usize;
        if declared != message.len() {
            anyhow::bail!("response holds {} bytes, its prefix says {declared}", message.len());
        }
        Ok(Resp::decode(message)?)
    }
}

/// Fails on a `grpc-status` other than 0.
fn check_status(headers: &http::HeaderMap) -> anyhow::Result<()> {
    match headers.get("grpc-status") {
        None => Ok(()),
        Some(v) if v.as_bytes() == b"0" => Ok(()),
        Some(v) => {
            let message = headers.get("grpc-message").map_or(&b""[..], |m| m.as_bytes());
            anyhow::bail!("grpc-status {}: {}", String::from_utf8_lossy(v.as_bytes()), String::from_utf8_lossy(message))
        }
    }
}

/// Opens `n` connections to `url`.
pub(crate) async fn connections(url: &str, n: usize) -> anyhow::Result<Vec<Unary>> {
    let mut out = Vec::with_capacity(n.max(1));
    for _ in 0..n.max(1) {
        out.push(Unary::connect(url).await?);
    }
    Ok(out)
}
