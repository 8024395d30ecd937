//! Test fixtures: the storage backend ([`Backend`]: the in-memory twin `MemStorage`, a stock
//! etcd process, or the Ballast engine in-process on its own thread and runtime, the last two on
//! free loopback ports), the frontend in-process on its own thread and runtime and a free port
//! against it ([`Cluster`]), kubectl runs with a deadline ([`Cluster::kubectl`]), and a small
//! HTTPS client in the test's process ([`Cluster::request`], [`Cluster::must_post`],
//! [`Cluster::must_get`]). kubectl is kept for what proves kubectl works (its requests, its
//! output, its errors); a test of the server's own behaviour (defaults, validation, lifecycle),
//! its setup and its polls talk to the server in-process: a kubectl process costs about 50 ms
//! of CPU, mostly its own start, and is most of what a test on the in-memory twin costs (a
//! cluster starts in under 20 ms).
//!
//! Two tiers: [`in_memory!`] runs a test body on `MemStorage` (the registry, patch, chain and
//! kubectl behaviour, which does not depend on the store); [`both_backends!`] runs one against
//! stock etcd and the Ballast engine (one shard and eight), for the behaviour that must be
//! proved on real storage (pages and revisions, watches, compaction). The storage conformance
//! suite (`storage.rs`) is what lets the first tier stand in for the second. Every process and
//! thread is stopped when its owner is dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ballast_apiserver::storage::MemStorage;
use ballast_frontend::{Frontend, FrontendConfig};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// The kubectl on the machine. Where it is gcloud's dispatcher, every run starts it, asks the
/// server for `/version` and then executes `kubectl.1.<minor>` beside it: a second process
/// start and a request that double what a run costs, so tests run that binary directly
/// ([`kubectl_binary`]) and `kubectl::discovery_commands` goes
/// through the dispatcher.
pub(crate) const KUBECTL: &str = "/usr/bin/kubectl";

/// The kubectl binary tests run: the one the dispatcher at [`KUBECTL`] would pick for our
/// server's minor version, when [`KUBECTL`] is that dispatcher (a `kubectl.1.<minor>` sits
/// beside the file it links to), else [`KUBECTL`] itself. Resolved once per test binary.
pub(crate) fn kubectl_binary() -> &'static Path {
    static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BINARY.get_or_init(|| {
        let minor = ballast_frontend::kinds::KUBERNETES_VERSION.minor;
        let real = std::fs::canonicalize(KUBECTL).unwrap_or_else(|e| panic!("{KUBECTL}: {e}"));
        let versioned = real.with_file_name(format!("kubectl.1.{minor}"));
        if versioned.is_file() {
            versioned
        } else {
            PathBuf::from(KUBECTL)
        }
    })
}
const ETCD: &str = "/usr/bin/etcd";

/// Bearer tokens in every cluster's token file: (token, user, groups).
pub(crate) const ALICE_TOKEN: &str = "alice-token";
pub(crate) const BOB_TOKEN: &str = "bob-token";

/// A kubectl process of `program` with `home` as its home, its output piped, killed if dropped.
///
/// Go's collector is off (`GOGC=off`): kubectl's start-up allocates heavily and a test's run is
/// short (at most 60 s, tens of MB), so collecting only costs CPU, about a fifth of a run's.
pub(crate) fn kubectl_process(program: &Path, home: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.env("HOME", home)
        .env("GOGC", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free loopback port")
}

/// Polls `cond` every 20 ms until it holds or `timeout` passes; returns whether it held.
pub(crate) async fn wait_for(timeout: Duration, mut cond: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `body` on a thread of its own with a two-worker runtime of its own, which is dropped
/// (ending every task spawned on it) when `body` returns: a server a test starts neither
/// depends on the test's runtime nor outlives the thread that owns it.
fn on_own_runtime(name: &str, body: impl AsyncFnOnce() + Send + 'static) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime for a test server");
            rt.block_on(body());
        })
        .expect("a thread for a test server")
}

/// A server running on [`on_own_runtime`]: dropping it tells it to stop and waits until its
/// thread (and so its runtime and every task on it) has ended.
struct ServerThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerThread {
    fn new(stop: tokio::sync::oneshot::Sender<()>, thread: std::thread::JoinHandle<()>) -> ServerThread {
        ServerThread { stop: Some(stop), thread: Some(thread) }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Which etcd v3 server the frontend stores into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// The in-memory twin (`MemStorage`), in the test's process.
    Memory,
    /// Stock etcd (`/usr/bin/etcd`), the reference.
    Etcd,
    /// The Ballast engine.
    Ballast,
    /// The Ballast engine with eight shards: kube's keys of different namespaces and resources
    /// live on different shards, and LISTs and watches over a resource span them.
    BallastSharded,
}

/// Defines `<name>::etcd`, `<name>::ballast` and `<name>::ballast_8_shards`, each running
/// `async fn <name>(Backend)`.
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn etcd() {
                super::$name(crate::harness::Backend::Etcd).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ballast() {
                super::$name(crate::harness::Backend::Ballast).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ballast_8_shards() {
                super::$name(crate::harness::Backend::BallastSharded).await
            }
        }
    )*};
}
pub(crate) use both_backends;

/// Defines `<name>::memory`, running `async fn <name>(Backend)` on the in-memory storage.
macro_rules! in_memory {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn memory() {
                super::$name(crate::harness::Backend::Memory).await
            }
        }
    )*};
}
pub(crate) use in_memory;

/// A running storage server.
pub(crate) enum StorageServer {
    Memory(MemStorage),
    Etcd(Etcd),
    Ballast(EngineServer),
}

impl StorageServer {
    pub(crate) async fn start(backend: Backend) -> StorageServer {
        match backend {
            Backend::Memory => StorageServer::Memory(MemStorage::new()),
            Backend::Etcd => StorageServer::Etcd(Etcd::start().await),
            Backend::Ballast => StorageServer::Ballast(EngineServer::start(1).await),
            Backend::BallastSharded => StorageServer::Ballast(EngineServer::start(8).await),
        }
    }

    /// Freezes stock etcd (SIGSTOP); only the etcd backend can be frozen.
    pub(crate) fn pause(&self) {
        match self {
            StorageServer::Etcd(e) => e.pause(),
            StorageServer::Ballast(_) | StorageServer::Memory(_) => {
                panic!("pause is only for the stock etcd backend")
            }
        }
    }

    /// Thaws a paused etcd.
    pub(crate) fn resume(&self) {
        if let StorageServer::Etcd(e) = self {
            e.resume();
        }
    }

    /// Returns `http://127.0.0.1:<port>`.
    ///
    /// # Panics
    ///
    /// On the in-memory backend, which has no endpoint.
    pub(crate) fn endpoint(&self) -> &str {
        match self {
            StorageServer::Memory(_) => panic!("the in-memory backend has no etcd endpoint"),
            StorageServer::Etcd(e) => &e.endpoint,
            StorageServer::Ballast(b) => &b.endpoint,
        }
    }
}

/// The Ballast engine on its own thread with its own runtime (so it outlives no test and a
/// test's runtime shutting down cannot strand it), in a temporary data directory.
pub(crate) struct EngineServer {
    endpoint: String,
    /// Stopped before the data directory goes (fields drop in order).
    _server: ServerThread,
    _dir: tempfile::TempDir,
}

impl EngineServer {
    async fn start(shards: u32) -> EngineServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let cfg = ballast_engine::EngineConfig {
            name: "test".into(),
            data_dir: dir.path().join("data"),
            listen_client: vec![addr],
            advertise_client_urls: vec![format!("http://{addr}")],
            advertise_peer_urls: vec![format!("http://127.0.0.1:{}", free_port())],
            shards,
            ..ballast_engine::EngineConfig::default()
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = on_own_runtime("test-engine", async move || {
            let engine = ballast_engine::Engine::start(&cfg).expect("engine starts");
            if let Err(e) = engine
                .serve(async {
                    let _ = stopped.await;
                })
                .await
            {
                eprintln!("engine stopped with an error: {e}");
            }
        });
        let server =
            EngineServer { endpoint: format!("http://{addr}"), _server: ServerThread::new(stop, thread), _dir: dir };
        let up = wait_for(Duration::from_secs(20), async || {
            TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok()
        })
        .await;
        assert!(up, "the Ballast engine did not start");
        server
    }
}

/// A stock etcd process with its own data directory.
pub(crate) struct Etcd {
    child: Child,
    pub(crate) endpoint: String,
    dir: tempfile::TempDir,
}

impl Etcd {
    /// Starts etcd on free loopback ports and waits until its client port accepts connections.
    pub(crate) async fn start() -> Etcd {
        for attempt in 0..3 {
            let dir = tempfile::tempdir().expect("tempdir");
            let (client, peer) = (free_port(), free_port());
            let log = std::fs::File::create(dir.path().join("etcd.log")).expect("log file");
            let client_url = format!("http://127.0.0.1:{client}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let child = Command::new(ETCD)
                .args(["--name", "test", "--data-dir"])
                .arg(dir.path().join("data"))
                .args(["--listen-client-urls", &client_url, "--advertise-client-urls", &client_url])
                .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &format!("test={peer_url}")])
                // A lone member serves once it has elected itself, an election timeout after
                // start: etcd's 1 s default (heartbeat 100 ms) is half a second of every start;
                // on loopback with no other member a tenth of it is as safe.
                .args(["--heartbeat-interval", "10", "--election-timeout", "100"])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("spawn /usr/bin/etcd");
            let mut etcd = Etcd { child, endpoint: client_url, dir };
            let addr: SocketAddr = ([127, 0, 0, 1], client).into();
            // Generous: CI starts dozens of these at once on two cores. A process that has
            // already exited (a port taken between free_port and etcd's bind) ends the wait early.
            let settled = wait_for(Duration::from_secs(30), async || {
                !etcd.running() || TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok()
            })
            .await;
            if settled && etcd.running() {
                return etcd;
            }
            etcd.kill();
            eprintln!("attempt {attempt}: etcd did not start; log:\n{}", etcd.log_tail());
        }
        panic!("etcd did not start");
    }

    /// The last lines etcd logged, for a failure message.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Freezes etcd (SIGSTOP): connections stay open and requests hang, as with a stalled disk.
    pub(crate) fn pause(&self) {
        signal(self.child.id(), "-STOP");
    }

    /// Thaws a paused etcd (SIGCONT).
    pub(crate) fn resume(&self) {
        signal(self.child.id(), "-CONT");
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops etcd whether it is running, paused (SIGKILL ends a stopped process too) or already
    /// gone; never panics, as it runs in drop.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn signal(pid: u32, which: &str) {
    let status = Command::new("kill").arg(which).arg(pid.to_string()).status().expect("run kill");
    assert!(status.success(), "kill {which} {pid}");
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Adjusts a cluster's frontend configuration; gets the cluster's temporary directory.
pub(crate) type Configure = Box<dyn FnOnce(&mut FrontendConfig, &Path) + Send>;

/// Options for [`Cluster::start_with`].
#[derive(Default)]
pub(crate) struct Options {
    pub(crate) anonymous_auth_off: bool,
    pub(crate) max_requests_inflight: Option<usize>,
    pub(crate) configure: Option<Configure>,
    /// The in-memory storage unless set.
    pub(crate) backend: Option<Backend>,
    pub(crate) watch_cache: Option<ballast_apiserver::watch_cache::WatchCacheConfig>,
    /// Serves CustomResourceDefinitions: the apiextensions server behind the built-in API, as
    /// the binary chains it.
    pub(crate) crds: bool,
    /// Puts the aggregator in front of the built-in API (and apiextensions behind it), as the
    /// binary chains them, with these settings.
    pub(crate) aggregator: Option<ballast_aggregator::AggregatorConfig>,
}

/// etcd plus an in-process frontend, with an admin kubeconfig and a token file.
pub(crate) struct Cluster {
    pub(crate) etcd: StorageServer,
    pub(crate) addr: SocketAddr,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) dir: tempfile::TempDir,
    ca_pem: String,
    admin_cert_pem: String,
    admin_key_pem: String,
    frontend: Option<ServerThread>,
}

/// Starts the frontend on its own thread and runtime; returns that thread with the frontend's
/// address and admin kubeconfig. Stopping the thread drops the runtime, which ends every task
/// the frontend started (watch caches, its connections to the store), so the storage server
/// stopped after it has no clients left to wait for: the Ballast engine gives open streams a
/// grace period before it stops, which a frontend on the test's runtime (alive until the test
/// returns) kept open for all of it.
async fn start_frontend(
    config: FrontendConfig,
    storage: Option<ballast_apiserver::storage::SharedStorage>,
    delegation: ballast_frontend::Delegation,
) -> (ServerThread, SocketAddr, PathBuf) {
    let (started_tx, started) = tokio::sync::oneshot::channel::<Result<(SocketAddr, PathBuf), String>>();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = on_own_runtime("test-frontend", async move || {
        match Frontend::start_in_chain_on(config, storage, delegation).await {
            Ok(frontend) => {
                let serving = (frontend.local_addr(), frontend.admin_kubeconfig().to_path_buf());
                let _ = started_tx.send(Ok(serving));
                frontend
                    .serve(async {
                        let _ = stopped.await;
                    })
                    .await;
            }
            Err(e) => {
                let _ = started_tx.send(Err(e.to_string()));
            }
        }
    });
    let frontend = ServerThread::new(stop, thread);
    match started.await {
        Ok(Ok((addr, kubeconfig))) => (frontend, addr, kubeconfig),
        Ok(Err(e)) => panic!("frontend starts: {e}"),
        Err(_) => panic!("the frontend thread ended before the frontend started"),
    }
}

/// A finished kubectl run.
pub(crate) struct KubectlOutput {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// A raw HTTPS answer.
pub(crate) struct RawResponse {
    pub(crate) status: u16,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Bytes,
}

impl RawResponse {
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// The path of object `name` of `resource` in namespace `default` (or cluster-wide), for the
/// kubectl resource names and short names tests use: what `kubectl get <resource> <name>`
/// requests.
pub(crate) fn object_path(resource: &str, name: &str) -> String {
    let collection = match resource {
        "cm" | "configmap" => "/api/v1/namespaces/default/configmaps",
        "quota" => "/api/v1/namespaces/default/resourcequotas",
        "sa" | "serviceaccount" => "/api/v1/namespaces/default/serviceaccounts",
        "deploy" | "deployment" => "/apis/apps/v1/namespaces/default/deployments",
        "job" => "/apis/batch/v1/namespaces/default/jobs",
        "cronjob" => "/apis/batch/v1/namespaces/default/cronjobs",
        "ingress" => "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
        "pdb" => "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        "priorityclass" => "/apis/scheduling.k8s.io/v1/priorityclasses",
        "role" => "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        "rolebinding" => "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        "clusterrole" => "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        other => panic!("no path for resource {other}"),
    };
    format!("{collection}/{name}")
}

/// Which credentials a raw request carries.
#[derive(Clone, Copy)]
pub(crate) enum Credentials<'a> {
    None,
    Admin,
    Token(&'a str),
    /// A client certificate and its key (PEM).
    Cert(&'a str, &'a str),
}

impl Cluster {
    /// Starts a cluster on `backend` with default options.
    pub(crate) async fn start_on(backend: Backend) -> Cluster {
        Self::start_with(Options { backend: Some(backend), ..Options::default() }).await
    }

    pub(crate) async fn start_with(options: Options) -> Cluster {
        let etcd = StorageServer::start(options.backend.unwrap_or(Backend::Memory)).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let token_file = dir.path().join("tokens.csv");
        std::fs::write(&token_file, format!("{ALICE_TOKEN},alice,1001,\"dev,qa\"\n{BOB_TOKEN},bob,1002\n"))
            .expect("token file");
        let mut config = FrontendConfig {
            etcd_servers: match &etcd {
                StorageServer::Memory(_) => Vec::new(),
                real => vec![real.endpoint().to_string()],
            },
            secure_port: 0,
            cert_dir: dir.path().join("certs"),
            token_auth_file: Some(token_file),
            anonymous_auth: !options.anonymous_auth_off,
            ..FrontendConfig::default()
        };
        if let Some(n) = options.max_requests_inflight {
            config.max_requests_inflight = n;
        }
        if let Some(w) = options.watch_cache {
            config.watch_cache = w;
        }
        if let Some(configure) = options.configure {
            configure(&mut config, dir.path());
        }
        let storage: Option<ballast_apiserver::storage::SharedStorage> = match &etcd {
            StorageServer::Memory(mem) => Some(Arc::new(mem.clone())),
            _ => None,
        };
        let delegation = if let Some(config) = options.aggregator {
            let aggregator = ballast_aggregator::Aggregator::new(config).expect("front-proxy identity");
            ballast_frontend::Delegation {
                in_front: Box::new(|context, builtin| aggregator.server(context, builtin)),
                in_front_admission: ballast_aggregator::admission(),
                behind: Box::new(|context| {
                    ballast_apiextensions::server(context, ballast_apiserver::delegation::NotFound::handler())
                }),
            }
        } else if options.crds {
            ballast_frontend::Delegation {
                in_front: Box::new(|_, builtin| builtin),
                in_front_admission: Vec::new(),
                behind: Box::new(|context| {
                    ballast_apiextensions::server(context, ballast_apiserver::delegation::NotFound::handler())
                }),
            }
        } else {
            ballast_frontend::Delegation::default()
        };
        let (frontend, addr, kubeconfig) = start_frontend(config, storage, delegation).await;
        let certs = dir.path().join("certs");
        let read = |name: &str| std::fs::read_to_string(certs.join(name)).expect("cert file");
        Cluster {
            etcd,
            addr,
            kubeconfig,
            ca_pem: read("ca.crt"),
            admin_cert_pem: read("admin.crt"),
            admin_key_pem: read("admin.key"),
            dir,
            frontend: Some(frontend),
        }
    }

    fn kubectl_command(&self, args: &[&str]) -> tokio::process::Command {
        self.kubectl_command_of(kubectl_binary(), args)
    }

    fn kubectl_command_of(&self, program: &Path, args: &[&str]) -> tokio::process::Command {
        let mut cmd = kubectl_process(program, self.dir.path());
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args);
        cmd
    }

    /// Runs kubectl with the admin kubeconfig; panics if it takes longer than 60 s.
    pub(crate) async fn kubectl(&self, args: &[&str]) -> KubectlOutput {
        self.run_kubectl(self.kubectl_command(args), args).await
    }

    /// Runs [`KUBECTL`] itself (the dispatcher, where it is one) with the admin kubeconfig.
    pub(crate) async fn kubectl_through_dispatcher(&self, args: &[&str]) -> KubectlOutput {
        self.run_kubectl(self.kubectl_command_of(Path::new(KUBECTL), args), args).await
    }

    async fn run_kubectl(&self, mut command: tokio::process::Command, args: &[&str]) -> KubectlOutput {
        let child = command.spawn().expect("spawn kubectl");
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
            .expect("kubectl runs");
        KubectlOutput {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs kubectl and panics unless it succeeds; returns stdout.
    pub(crate) async fn must_kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl(args).await;
        assert!(out.ok, "kubectl {args:?} failed:\nstdout: {}\nstderr: {}", out.stdout, out.stderr);
        out.stdout
    }

    /// Starts kubectl in the background (for `get -w`).
    pub(crate) fn spawn_kubectl(&self, args: &[&str]) -> tokio::process::Child {
        self.kubectl_command(args).spawn().expect("spawn kubectl")
    }

    fn tls_client(&self, creds: Credentials<'_>) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots.add(cert.expect("CA PEM")).expect("CA cert");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots);
        let mut config = match creds {
            Credentials::Admin => {
                let certs =
                    CertificateDer::pem_slice_iter(self.admin_cert_pem.as_bytes()).map(|c| c.expect("cert")).collect();
                let key = PrivateKeyDer::from_pem_slice(self.admin_key_pem.as_bytes()).expect("key");
                builder.with_client_auth_cert(certs, key).expect("client auth")
            }
            Credentials::Cert(cert, key) => {
                let certs = CertificateDer::pem_slice_iter(cert.as_bytes()).map(|c| c.expect("cert")).collect();
                let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key");
                builder.with_client_auth_cert(certs, key).expect("client auth")
            }
            _ => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config
    }

    async fn tls_stream(&self, creds: Credentials<'_>) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        let tcp = tokio::net::TcpStream::connect(self.addr).await.expect("connect");
        let connector = tokio_rustls::TlsConnector::from(Arc::new(self.tls_client(creds)));
        connector.connect(ServerName::try_from("localhost").expect("name"), tcp).await.expect("TLS")
    }

    /// Opens a connection with a small receive buffer, writes `head` (a request without its
    /// body) and returns the stream unread, for tests of clients that read slowly or not at
    /// all (the small buffer makes the server notice sooner).
    pub(crate) async fn open_stream(
        &self,
        creds: Credentials<'_>,
        head: &str,
    ) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        use tokio::io::AsyncWriteExt;
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(16 * 1024).expect("receive buffer size");
        let tcp = socket.connect(self.addr).await.expect("connect");
        let connector = tokio_rustls::TlsConnector::from(Arc::new(self.tls_client(creds)));
        let mut tls = connector.connect(ServerName::try_from("localhost").expect("name"), tcp).await.expect("TLS");
        tls.write_all(head.as_bytes()).await.expect("write head");
        tls
    }

    /// Writes `head` (a request without its body) and returns the server's answer: everything
    /// up to the end of a JSON body (bounded by 10 s).
    pub(crate) async fn raw_exchange(&self, creds: Credentials<'_>, head: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tls = self.tls_stream(creds).await;
        tls.write_all(head.as_bytes()).await.expect("write head");
        let mut answer = Vec::new();
        let read = async {
            let mut buf = [0u8; 4096];
            while !answer.ends_with(b"}") {
                match tls.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => answer.extend_from_slice(&buf[..n]),
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(10), read).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// Sends a GET with an `Accept` header.
    pub(crate) async fn request_with_accept(&self, creds: Credentials<'_>, path: &str, accept: &str) -> RawResponse {
        self.request_full(creds, "GET", path, None, Some(accept), &[], Bytes::new()).await
    }

    /// Sends one HTTPS request over a new HTTP/1.1 connection and reads the whole answer.
    pub(crate) async fn request(
        &self,
        creds: Credentials<'_>,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: impl Into<Bytes>,
    ) -> RawResponse {
        self.request_full(creds, method, path, content_type, None, &[], body.into()).await
    }

    /// Sends one HTTPS request with extra headers (impersonation, audit IDs).
    pub(crate) async fn request_with_headers(
        &self,
        creds: Credentials<'_>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        content_type: Option<&str>,
        body: impl Into<Bytes>,
    ) -> RawResponse {
        self.request_full(creds, method, path, content_type, None, headers, body.into()).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn request_full(
        &self,
        creds: Credentials<'_>,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> RawResponse {
        let tls = self.tls_stream(creds).await;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.expect("handshake");
        tokio::spawn(conn);
        let mut req = http::Request::builder().method(method).uri(path).header("host", "localhost");
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        if let Some(accept) = accept {
            req = req.header("accept", accept);
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Credentials::Token(token) = creds {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let req = req.body(Full::new(body)).expect("request");
        let resp = tokio::time::timeout(Duration::from_secs(30), sender.send_request(req))
            .await
            .expect("answer within 30 s")
            .expect("response");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        RawResponse { status, headers, body }
    }

    /// The collection path of `obj`'s kind in its namespace (`default` if it names none) or
    /// cluster-wide, found in discovery by its `apiVersion` and `kind`, as kubectl finds it.
    pub(crate) async fn collection_of(&self, obj: &serde_json::Value) -> String {
        let api_version = obj["apiVersion"].as_str().expect("apiVersion");
        let kind = obj["kind"].as_str().expect("kind");
        let base =
            if api_version.contains('/') { format!("/apis/{api_version}") } else { format!("/api/{api_version}") };
        let list = self.must_get(&base).await;
        let resource = list["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["kind"] == kind && !r["name"].as_str().unwrap_or("/").contains('/')))
            .unwrap_or_else(|| panic!("{kind} is not in {base}: {list}"));
        let name = resource["name"].as_str().expect("name");
        if resource["namespaced"] == true {
            let namespace = obj["metadata"]["namespace"].as_str().unwrap_or("default");
            format!("{base}/namespaces/{namespace}/{name}")
        } else {
            format!("{base}/{name}")
        }
    }

    /// Creates `obj` (in its namespace, `default` if none, if its kind lives in one) as the admin,
    /// as `kubectl create -f` sends it; panics unless it is created. Returns the stored object.
    pub(crate) async fn must_post(&self, obj: &serde_json::Value) -> serde_json::Value {
        let path = self.collection_of(obj).await;
        let r = self.request(Credentials::Admin, "POST", &path, Some("application/json"), obj.to_string()).await;
        assert_eq!(r.status, 201, "POST {path}: {}", String::from_utf8_lossy(&r.body));
        r.json()
    }

    /// GETs `path` as the admin; panics unless it answers 200. Returns the JSON body.
    pub(crate) async fn must_get(&self, path: &str) -> serde_json::Value {
        let r = self.request(Credentials::Admin, "GET", path, None, "").await;
        assert_eq!(r.status, 200, "GET {path}: {}", String::from_utf8_lossy(&r.body));
        r.json()
    }

    /// Creates namespace `name` as the admin, in-process (for tests where kubectl's part is
    /// elsewhere).
    pub(crate) async fn create_namespace(&self, name: &str) {
        self.must_post(&serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})).await;
    }

    /// Creates service account `name` in `namespace` as the admin, in-process.
    pub(crate) async fn create_service_account(&self, namespace: &str, name: &str) -> serde_json::Value {
        let account = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
                                         "metadata": {"name": name, "namespace": namespace}});
        self.must_post(&account).await
    }

    /// Puts a JSON value into storage (for RBAC objects, which are not served over REST yet).
    pub(crate) async fn etcd_put(&self, key: &str, value: &serde_json::Value) {
        self.storage_put(key, value.to_string().into_bytes()).await;
    }

    /// Puts raw bytes into storage, as another writer would (etcd's plain Put).
    pub(crate) async fn storage_put(&self, key: &str, value: Vec<u8>) {
        match &self.etcd {
            StorageServer::Memory(mem) => {
                mem.put(key.as_bytes(), value);
            }
            _ => {
                self.etcd_client().await.put(key, value, None).await.expect("etcd put");
            }
        }
    }

    /// Returns the stored bytes at `key`, if any.
    pub(crate) async fn storage_get(&self, key: &str) -> Option<Vec<u8>> {
        match &self.etcd {
            StorageServer::Memory(mem) => {
                use ballast_apiserver::storage::Storage as _;
                mem.get(key.as_bytes()).await.expect("get").0.map(|kv| kv.value.to_vec())
            }
            _ => {
                let resp = self.etcd_client().await.get(key, None).await.expect("etcd get");
                resp.kvs().first().map(|kv| kv.value().to_vec())
            }
        }
    }

    /// Deletes `key` from storage unconditionally.
    pub(crate) async fn storage_delete(&self, key: &str) {
        match &self.etcd {
            StorageServer::Memory(mem) => {
                use ballast_apiserver::storage::Storage as _;
                let (kv, _) = mem.get(key.as_bytes()).await.expect("get");
                if let Some(kv) = kv {
                    mem.delete(key.as_bytes(), kv.mod_revision).await.expect("delete");
                }
            }
            _ => {
                self.etcd_client().await.delete(key, None).await.expect("etcd delete");
            }
        }
    }

    /// Returns a client of the storage backend (stock etcd or the engine only).
    pub(crate) async fn etcd_client(&self) -> etcd_client::Client {
        etcd_client::Client::connect([self.etcd.endpoint()], None).await.expect("etcd client")
    }

    /// The cluster's own temporary directory, for manifests a test writes.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The serving CA (PEM).
    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    pub(crate) fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }
}

impl Drop for Cluster {
    /// Stops the frontend before the storage server (a field, dropped after this).
    fn drop(&mut self) {
        drop(self.frontend.take());
    }
}
