//! Starting servers for tests: [`Server`] runs Ballast or stock etcd on free loopback ports in a
//! temporary directory and kills it when dropped. [`both_targets!`] turns an async test function
//! into three tests: `<name>::etcd`, `<name>::ballast` and `<name>::ballast_8_shards` (the engine
//! with `--shards 8`; the suite's keys are etcdctl-style, outside `/registry/`, so they live on
//! shard 0 and every range from below `/registry/` to above it is a cross-shard Range).
//!
//! A failing test prints the end of each of its servers' logs; with `IT_KEEP_LOGS=<dir>` set it
//! also copies the whole logs there, since the server directories go with the test.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Which server a test runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Ballast,
    /// The engine with `--shards 8`.
    BallastSharded,
    Etcd,
    /// A follower of a 3-member Ballast cluster (the other members run beside it).
    BallastCluster,
    /// A follower of a 3-member etcd cluster.
    EtcdCluster,
}

impl Target {
    /// Returns true for Ballast's engine, whatever its shard count or cluster.
    pub(crate) fn is_ballast(self) -> bool {
        matches!(self, Target::Ballast | Target::BallastSharded | Target::BallastCluster)
    }
}

/// A server process owned by one test.
pub(crate) struct Server {
    pub(crate) target: Target,
    dir: tempfile::TempDir,
    port: u16,
    peer_port: u16,
    child: Option<Child>,
    /// The member's name and `--initial-cluster`, for a member of a cluster (see
    /// [`crate::cluster_harness`]).
    pub(crate) member: Option<(String, String)>,
    /// Joins a running cluster (`--initial-cluster-state existing`) rather than bootstrapping.
    pub(crate) join: bool,
    /// The other members of this server's cluster (cluster targets), kept running with it.
    peers: Vec<Server>,
    /// More flags for the server process.
    pub(crate) extra_args: Vec<String>,
    /// Peer URLs are `https://` (the member runs with peer TLS flags).
    pub(crate) peer_https: bool,
    /// More client listen URLs, after the `http://` one.
    pub(crate) extra_listen: Vec<String>,
    /// The log's length when the process was last started: what it printed since follows.
    log_from: u64,
}

/// How long a server may take to answer after it is started. Its start is progress the
/// machine's load delays: a member of a debug build opening six shards' stores took 20.4 s at a
/// load of 35 on the project's 2-core machine (a test failed on the 20 s this was before); one
/// that exits is seen at once (see [`Server::ready`]).
const START_WITHIN: Duration = Duration::from_secs(60);

/// Returns a loopback port for a server a test starts, never the same one twice in this process.
///
/// Not one the kernel picks for `bind(0)`: those come from the ephemeral range, from which it also
/// picks the source port of every outgoing connection on the machine. Between this check and the
/// server's own bind, or while a test has a member stopped to restart it on the same port, any
/// connection (another test's member dialling its peers) may take it, and the server fails with
/// "Address already in use" (seen under load, as a member that did not start). A port below the
/// ephemeral range is only ever taken by a bind, and this process binds each one once.
pub(crate) fn free_port() -> u16 {
    static NEXT: std::sync::Mutex<Option<u16>> = std::sync::Mutex::new(None);
    let Some((low, high)) = below_ephemeral() else {
        return TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port");
    };
    let mut next = NEXT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let span = high - low;
    // Test processes run one after another, but a start hashed from the process ID keeps copies
    // run side by side (whose IDs are close) apart.
    let mut port = next.unwrap_or_else(|| {
        let start = u64::from(std::process::id()).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        low + u16::try_from(start % u64::from(span)).unwrap_or(0)
    });
    for _ in 0..span {
        let candidate = port;
        port = if port + 1 >= high { low } else { port + 1 };
        if TcpListener::bind(("127.0.0.1", candidate)).is_ok() {
            *next = Some(port);
            return candidate;
        }
    }
    panic!("no free loopback port in {low}..{high}");
}

/// The ports from 10000 up to the start of the machine's ephemeral range, when that leaves
/// enough of them.
fn below_ephemeral() -> Option<(u16, u16)> {
    const LOW: u16 = 10_000;
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let start: u16 = range.split_whitespace().next()?.parse().ok()?;
    (start >= LOW + 2_000).then_some((LOW, start))
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

impl Server {
    /// Starts a fresh server and waits until it answers. For a cluster target, starts a
    /// 3-member cluster and returns one of its followers, so requests take the follower's paths
    /// (forwarded writes, read index).
    pub(crate) async fn start(target: Target) -> Server {
        let base = match target {
            Target::BallastCluster => Target::Ballast,
            Target::EtcdCluster => Target::Etcd,
            _ => return Self::start_with(target, |_, _| {}).await,
        };
        let mut c = crate::cluster_harness::Cluster::start(base, 3).await;
        let leader = c.leader().await;
        let mut follower = c.members.remove((leader + 1) % 3);
        follower.target = target;
        follower.peers = std::mem::take(&mut c.members);
        follower
    }

    /// Starts a server on a data directory `prepare(data_dir, peer_url)` fills first (a
    /// restored snapshot), and waits until it answers.
    pub(crate) async fn start_with(target: Target, prepare: impl Fn(&std::path::Path, &str)) -> Server {
        Self::start_full(target, prepare, &[], &[]).await
    }

    /// Starts a fresh server (not a cluster) with more flags and more client listen URLs (after
    /// its `http://` one, which the harness uses), and waits until it answers.
    pub(crate) async fn start_args(target: Target, args: &[String], listen: &[String]) -> Server {
        Self::start_full(target, |_, _| {}, args, listen).await
    }

    async fn start_full(
        target: Target,
        prepare: impl Fn(&std::path::Path, &str),
        args: &[String],
        listen: &[String],
    ) -> Server {
        let mut dir = tempfile::tempdir().expect("tempdir");
        for attempt in 0..3 {
            let mut s = Server {
                target,
                dir,
                port: free_port(),
                peer_port: free_port(),
                child: None,
                member: None,
                join: false,
                peers: Vec::new(),
                extra_args: args.to_vec(),
                extra_listen: listen.to_vec(),
                peer_https: false,
                log_from: 0,
            };
            let data = s.dir.path().join("data");
            let _ = std::fs::remove_dir_all(&data);
            prepare(&data, &s.peer_url());
            s.spawn();
            if s.wait_ready().await {
                return s;
            }
            eprintln!("attempt {attempt}: server did not start; log:\n{}", s.log_tail());
            s.kill9();
            dir = s.take_dir();
        }
        panic!("{target:?} did not start");
    }

    fn take_dir(mut self) -> tempfile::TempDir {
        self.child = None;
        let replacement = tempfile::tempdir().expect("tempdir");
        std::mem::replace(&mut self.dir, replacement)
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// Returns the server's whole log.
    pub(crate) fn full_log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Returns the end of the server's log, for failure messages.
    pub(crate) fn log_tail(&self) -> String {
        tail_without_backtrace(&std::fs::read_to_string(self.log_path()).unwrap_or_default(), 30)
    }

    /// Returns a member of a cluster, not started: `name` on `port` and `peer_port`, with
    /// `initial_cluster` naming every member.
    pub(crate) fn member_of(target: Target, name: &str, port: u16, peer_port: u16, initial_cluster: &str) -> Server {
        Server {
            target,
            dir: tempfile::tempdir().expect("tempdir"),
            port,
            peer_port,
            child: None,
            member: Some((name.to_string(), initial_cluster.to_string())),
            join: false,
            peers: Vec::new(),
            extra_args: Vec::new(),
            extra_listen: Vec::new(),
            peer_https: false,
            log_from: 0,
        }
    }

    /// Starts the process (a cluster member; see [`Server::member_of`]) without waiting.
    pub(crate) fn spawn_member(&mut self) {
        self.spawn();
    }

    /// Waits until the server answers Status; false once it exited, or after [`START_WITHIN`].
    pub(crate) async fn ready(&self) -> bool {
        self.wait_ready().await
    }

    /// Returns the member's name (`t` for a server alone).
    pub(crate) fn name(&self) -> String {
        self.member.as_ref().map_or_else(|| "t".to_string(), |(name, _)| name.clone())
    }

    /// Returns the number of members of the server's cluster (1 alone).
    pub(crate) fn cluster_size(&self) -> usize {
        1 + self.peers.len()
    }

    /// Returns true while the process runs.
    pub(crate) fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Sends `signal` (SIGSTOP, SIGCONT) to the process.
    pub(crate) fn signal(&self, signal: i32) {
        if let Some(c) = &self.child {
            // kill(1) rather than libc: the workspace forbids unsafe code.
            let _ = std::process::Command::new("kill").arg(format!("-{signal}")).arg(c.id().to_string()).status();
        }
    }

    /// Waits up to `limit` for the process to end on its own (after a signal) and reaps it;
    /// None when it was still running, and is then killed.
    pub(crate) fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    pub(crate) fn peer_url(&self) -> String {
        let scheme = if self.peer_https { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.peer_port)
    }

    fn spawn(&mut self) {
        let client = format!("http://127.0.0.1:{}", self.port);
        let peer = self.peer_url();
        let data = self.dir.path().join("data");
        self.log_from = std::fs::metadata(self.log_path()).map_or(0, |m| m.len());
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path()).expect("log file");
        let mut cmd = match self.target {
            Target::Ballast | Target::BallastSharded | Target::BallastCluster => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_ballast"));
                c.arg("engine"); // the etcd-protocol suite targets the engine alone: `serve` adds the frontend and its namespaces
                if self.target == Target::BallastSharded {
                    c.arg("--shards=8");
                }
                c
            }
            Target::Etcd | Target::EtcdCluster => Command::new("etcd"),
        };
        let (name, initial_cluster) = match &self.member {
            Some((name, cluster)) => (name.clone(), Some(cluster.clone())),
            None if self.target == Target::Etcd => ("t".to_string(), Some(format!("t={peer}"))),
            None => ("t".to_string(), None),
        };
        if let Some(ic) = initial_cluster {
            cmd.arg(format!("--initial-cluster={ic}"));
        }
        if self.join {
            cmd.arg("--initial-cluster-state=existing");
        }
        cmd.args(&self.extra_args);
        cmd.args(["--name", &name])
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!(
                "--listen-client-urls={}",
                [vec![client.clone()], self.extra_listen.clone()].concat().join(",")
            ))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            // Relative paths the server makes (etcd's `unix://host:port` socket files) land in
            // its own directory.
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log);
        self.child = Some(cmd.spawn().expect("spawn server"));
    }

    async fn wait_ready(&self) -> bool {
        let ep = self.endpoint();
        let mut up = false;
        wait_for(START_WITHIN, async || {
            up = match etcd_client::Client::connect([ep.as_str()], None).await {
                Ok(mut c) => c.status().await.is_ok() && self.listening(),
                Err(_) => false,
            };
            up || self.exited()
        })
        .await;
        up
    }

    /// True once this process said it serves on its ports, which both servers print only after
    /// binding them: a server of another test that took the port first answers Status too (this
    /// one then cannot listen and exits), and must not be taken for this one.
    fn listening(&self) -> bool {
        let log = std::fs::read(self.log_path()).unwrap_or_default();
        let since = String::from_utf8_lossy(log.get(self.log_from as usize..).unwrap_or_default());
        since.contains("serving etcd v3 API") || since.contains("ready to serve client requests")
    }

    /// True once the process ended (a zombie until reaped: the harness reaps only on kill), so
    /// a server that cannot start (a port taken meanwhile) is not waited for.
    fn exited(&self) -> bool {
        let Some(pid) = self.pid() else { return true };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the parenthesised command name.
        stat.rsplit_once(')').is_none_or(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
    }

    /// Returns `127.0.0.1:<port>`.
    pub(crate) fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Returns `http://127.0.0.1:<port>` for raw gRPC clients.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Returns the server process's ID while it runs, for tests that watch its resources (its
    /// resident memory in `/proc/<pid>/status`).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Returns a connected etcd-client.
    pub(crate) async fn client(&self) -> etcd_client::Client {
        etcd_client::Client::connect([self.endpoint()], None).await.expect("connect")
    }

    /// Runs etcdctl against this server.
    pub(crate) fn etcdctl(&self, args: &[&str]) -> Output {
        self.etcdctl_stdin(args, "")
    }

    /// Runs etcdctl with `input` on its standard input.
    pub(crate) fn etcdctl_stdin(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoint()))
            .arg("--command-timeout=10s")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("etcdctl");
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
        child.wait_with_output().expect("etcdctl output")
    }

    /// Spawns a long-running etcdctl (for `watch`); the caller kills it.
    pub(crate) fn etcdctl_spawn(&self, args: &[&str]) -> Child {
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoint()))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("etcdctl")
    }

    /// Kills the server with SIGKILL and reaps it.
    pub(crate) fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same data directory and ports.
    pub(crate) async fn restart(&mut self) {
        self.kill9();
        self.spawn();
        assert!(self.wait_ready().await, "{:?} did not restart; log:\n{}", self.target, self.log_tail());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A failing test drops its server while unwinding: show what the server said last, since
        // its directory (and log) goes with it.
        if std::thread::panicking() {
            eprintln!("{:?} server log, last lines:\n{}", self.target, self.log_tail());
            self.keep_log();
        }
        self.kill9();
    }
}

/// Runs openssl with `args` in `dir` (test certificates), asserting success.
pub(crate) fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("openssl").current_dir(dir).args(args).output().expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Server {
    /// A failing test's whole server log, copied into the directory `IT_KEEP_LOGS` names (when
    /// set) as `<name>-<pid>.log`, since the tail printed on failure may not reach back to the
    /// cause of a failure seen once under load.
    fn keep_log(&self) {
        let Some(dir) = std::env::var_os("IT_KEEP_LOGS") else { return };
        let name = format!("{}-{}.log", self.name(), self.pid().unwrap_or_default());
        let to = std::path::Path::new(&dir).join(name);
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::copy(self.log_path(), &to)) {
            eprintln!("the server log was not kept in {}: {e}", to.display());
        } else {
            eprintln!("the whole server log is kept in {}", to.display());
        }
    }

    /// Returns the server's own directory (its working directory).
    pub(crate) fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// Reads a running child's stdout line by line on a thread of its own; the lines arrive on the
/// returned channel until the output ends.
pub(crate) fn stdout_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("stdout piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Returns etcdctl's stdout, asserting success.
pub(crate) fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "etcdctl failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Returns etcdctl's stderr, asserting failure.
pub(crate) fn fails(out: &Output) -> String {
    assert!(!out.status.success(), "etcdctl should have failed: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Defines one test `$test` running `super::$name(Server)` on a fresh server of `$target`.
macro_rules! target_test {
    ($test:ident, $name:ident, $target:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            super::$name(crate::harness::Server::start(crate::harness::Target::$target).await).await
        }
    };
}

/// Defines `<name>::ballast`, `<name>::ballast_8_shards`, `<name>::etcd` and, run on a follower
/// of a 3-member cluster, `<name>::ballast_3_members` and `<name>::etcd_3_members`: the
/// etcd-protocol suite, whose expectations hold for a member of a cluster as for one alone.
macro_rules! all_targets {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            target_test!(ballast, $name, Ballast);
            target_test!(ballast_8_shards, $name, BallastSharded);
            target_test!(etcd, $name, Etcd);
            target_test!(ballast_3_members, $name, BallastCluster);
            target_test!(etcd_3_members, $name, EtcdCluster);
        }
    )*};
}

/// Defines `<name>::ballast`, `<name>::ballast_8_shards` and `<name>::etcd`, each running
/// `async fn <name>(Server)`.
macro_rules! both_targets {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            target_test!(ballast, $name, Ballast);
            target_test!(ballast_8_shards, $name, BallastSharded);
            target_test!(etcd, $name, Etcd);
        }
    )*};
}

/// Returns the last `n` lines of a process's log without backtrace frames, which would push the
/// error or panic message above them out of the tail.
pub(crate) fn tail_without_backtrace(log: &str, n: usize) -> String {
    let frame = |l: &&str| {
        let t = l.trim_start();
        t.starts_with("at ")
            || t.split_once(':').is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let lines: Vec<&str> = log.lines().filter(|l| !frame(l)).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
