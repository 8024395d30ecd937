//! The secure port: TLS (rustls with the ring provider) and HTTP/1.1 or HTTP/2 (hyper-util's
//! auto builder, chosen by ALPN), feeding every request into the handler chain with the
//! connection's client certificates attached.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::TryFutureExt;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::authn::PeerCertificates;
use crate::body::BodyError;
use crate::chain::ChainService;
use crate::connection_limits::{check_interval, Activity, ConnectionLimits, CountReads, Deadlines};

/// How long a client may take to finish the TLS handshake before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds the TLS configuration: the serving certificate, the client-certificate verifier, and
/// ALPN for h2 and http/1.1.
///
/// # Errors
///
/// Returns rustls's error for unusable certificates or keys.
pub fn tls_config(
    cert_pem: &str,
    key_pem: &str,
    client_verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>,
) -> Result<ServerConfig, rustls::Error> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes()).flatten().collect();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|_| rustls::Error::General("serving key is not a PEM private key".into()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Accepts connections until `shutdown` resolves, each held to `limits` (see
/// [`ConnectionLimits`]). Each connection runs in its own task; in-flight connections are left
/// to finish (or to die with the runtime).
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    chain: ChainService,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    tokio::pin!(shutdown);
    loop {
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection limit reached: new connections wait until one closes"
                );
                tokio::select! {
                    _ = &mut shutdown => return,
                    slot = slots.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => return, // the semaphore is never closed
                    },
                }
            }
        };
        let (tcp, remote) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // A response's last frames are small (the end of a LIST, a short GET), and Nagle's
        // algorithm holds a small segment until the client acknowledges earlier data, which a
        // client's delayed ACK puts off by up to 40 ms. Go's net package, so kube-apiserver,
        // sets TCP_NODELAY on every connection.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(%remote, error = %e, "TCP_NODELAY not set");
        }
        let acceptor = acceptor.clone();
        let chain = chain.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(%remote, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let peer = PeerCertificates(
                stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .map(|c| Arc::new(c.iter().map(|c| c.clone().into_owned()).collect())),
            );
            let activity = Activity::default();
            let requests = activity.clone();
            let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                // The request counts as in flight until its response body is dropped.
                let in_flight = requests.start();
                let mut req = req.map(|b| b.map_err(|e| BodyError(Box::new(e))).boxed_unsync());
                req.extensions_mut().insert(peer.clone());
                req.extensions_mut().insert(crate::audit::RemoteAddr(remote));
                chain.clone().oneshot(req).map_ok(move |resp| {
                    resp.map(move |body| {
                        body.map_frame(move |frame| {
                            let _ = &in_flight;
                            frame
                        })
                    })
                })
            });
            // HTTP/2 is chosen by ALPN (every HTTP/2 client of the port negotiates it over TLS).
            let http1 = stream.get_ref().1.alpn_protocol() != Some(b"h2");
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            // hyper's own header timeout also runs while a keep-alive connection waits for its
            // next request, which would close it at the header timeout instead of the idle
            // one; `Deadlines` keeps the two apart.
            builder.http1().timer(TokioTimer::new()).header_read_timeout(None);
            builder
                .http2()
                .timer(TokioTimer::new())
                .max_concurrent_streams(limits.http2_max_concurrent_streams)
                .max_pending_accept_reset_streams(limits.http2_max_pending_accept_reset_streams);
            // Upgrades (a 101 answer) hand an HTTP/1.1 connection to whoever answered: the
            // aggregator's proxy, for exec-style streams to extension servers.
            let conn = builder
                .serve_connection_with_upgrades(TokioIo::new(CountReads::new(stream, activity.clone())), service);
            tokio::pin!(conn);
            let every = check_interval(&limits);
            let mut deadlines = Deadlines::new(limits, http1);
            let expired = loop {
                tokio::select! {
                    done = conn.as_mut() => {
                        if let Err(e) = done {
                            tracing::debug!(%remote, error = %e, "connection ended with an error");
                        }
                        return;
                    }
                    () = tokio::time::sleep(every) => {
                        if let Some(expired) = deadlines.tick(&activity, every) {
                            break expired;
                        }
                    }
                }
            };
            // HTTP/2 gets a GOAWAY, HTTP/1.1 is closed; a client that does not finish closing
            // within one more check is cut off.
            tracing::debug!(%remote, ?expired, "closing a connection that waited too long");
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(every, conn).await;
        });
    }
}
