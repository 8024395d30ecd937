//! [`AggregatorConfig`]: the aggregator's settings, kube-apiserver's flag names where it has
//! them; every limit has its reason on the field.

use std::time::Duration;

/// The aggregator's configuration.
#[derive(Debug, Clone)]
pub struct AggregatorConfig {
    /// `--proxy-client-cert-file` (PEM): the client certificate the aggregator presents to
    /// extension servers, which trust the `X-Remote-*` headers of whoever presents it. `None`
    /// proxies without one (extension servers then reject the identity headers).
    pub proxy_client_cert_pem: Option<String>,
    /// `--proxy-client-key-file` (PEM), the key of `proxy_client_cert_pem`.
    pub proxy_client_key_pem: Option<String>,
    /// `--enable-aggregator-routing`: proxy to an endpoint address of the Service's
    /// EndpointSlices rather than its cluster IP (for a control plane that is not on the
    /// service network, as kube's flag is).
    pub enable_aggregator_routing: bool,
    /// How long connecting to an extension server (TCP and TLS) may take. 5 s, kube's dial
    /// timeout for the aggregator: a live server on a reachable network answers in
    /// milliseconds; a dead address should fail the request well before the client gives up.
    pub connect_timeout: Duration,
    /// How long an extension server may take to send a response's headers. 60 s, kube's
    /// request timeout: a slow LIST is legitimate, a server that never answers must not hold
    /// the caller forever. Bodies (watch streams) are not bounded by it.
    pub response_header_timeout: Duration,
    /// Idle keep-alive connections kept per extension server (address and trust settings):
    /// 25, as kube's aggregator transport keeps per host. A burst of concurrent requests opens
    /// as many connections as it needs; afterwards this many stay open for the next ones, so a
    /// steady stream of requests (kubectl top, an HPA's metrics reads) costs no TCP and TLS
    /// handshakes, while a past burst does not hold hundreds of sockets on the server. 0 opens
    /// a connection per request.
    pub pool_idle_per_backend: usize,
    /// How long an idle connection stays open: 90 s, kube's (Go's) idle connection timeout.
    /// Longer than the gap between an availability check and the next request in a steady
    /// workload; short enough that connections to a server nobody calls are not held.
    pub pool_idle_timeout: Duration,
    /// How often each remote APIService is checked (Service present, discovery answers) when
    /// nothing changed. 30 s, as kube's availability controller resyncs: often enough that a
    /// server that stopped is marked unavailable within a kubectl retry or two, rare enough
    /// that many APIServices cost little. A change of an APIService, Service or EndpointSlice
    /// triggers a check at once.
    pub availability_interval: Duration,
    /// How long one availability check's discovery GET may take: 5 s, kube's.
    pub discovery_timeout: Duration,
    /// Largest discovery document read from an extension server (its `APIResourceList`):
    /// 4 MiB, a hundred times a large real one; a server sending more is marked unavailable
    /// instead of filling memory.
    pub max_discovery_bytes: usize,
    /// Largest OpenAPI v3 document read from an extension server: 16 MiB, five times the
    /// largest of kube's own (its core group's); a larger one is not merged (and logged).
    pub max_openapi_bytes: usize,
    /// How long the controllers wait after storage failed them before listing again: long
    /// enough not to hammer a storage that is down, short enough to resume about when it does.
    pub retry_interval: Duration,
}

impl Default for AggregatorConfig {
    fn default() -> Self {
        AggregatorConfig {
            proxy_client_cert_pem: None,
            proxy_client_key_pem: None,
            enable_aggregator_routing: false,
            connect_timeout: Duration::from_secs(5),
            response_header_timeout: Duration::from_secs(60),
            pool_idle_per_backend: 25,
            pool_idle_timeout: Duration::from_secs(90),
            availability_interval: Duration::from_secs(30),
            discovery_timeout: Duration::from_secs(5),
            max_discovery_bytes: 4 << 20,
            max_openapi_bytes: 16 << 20,
            retry_interval: Duration::from_millis(500),
        }
    }
}
