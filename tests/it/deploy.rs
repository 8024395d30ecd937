//! `deploy/local-cluster.sh`, run as a person runs it: one command starts three engine members and
//! a frontend on free loopback ports in a temporary directory, then etcdctl and kubectl use the
//! cluster the way the script's printed hints say, and `stop` must leave none of its processes
//! behind.

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::harness::{free_port, wait_for};

const KUBECTL: &str = "/usr/bin/kubectl";
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/local-cluster.sh");
const PROCESSES: [&str; 4] = ["m1", "m2", "m3", "frontend"];

/// A cluster the script started in a temporary directory; dropping it runs `stop`, so a failing
/// test leaves no process behind.
struct LocalCluster {
    dir: tempfile::TempDir,
    client_ports: Vec<u16>,
    peer_ports: Vec<u16>,
    secure_port: u16,
}

/// Runs `cmd` to completion, at most `limit`; its output, or a panic naming `what`.
async fn run(mut cmd: tokio::process::Command, limit: Duration, what: &str) -> Output {
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    tokio::time::timeout(limit, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {limit:?}"))
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn stdout(out: &Output, what: &str) -> String {
    assert!(out.status.success(), "{what} failed ({}):\n{}", out.status, text(out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// True while process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

impl LocalCluster {
    fn new() -> LocalCluster {
        LocalCluster {
            dir: tempfile::tempdir().expect("tempdir"),
            client_ports: (0..3).map(|_| free_port()).collect(),
            peer_ports: (0..3).map(|_| free_port()).collect(),
            secure_port: free_port(),
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("cluster")
    }

    fn join(ports: &[u16]) -> String {
        ports.iter().map(u16::to_string).collect::<Vec<_>>().join(",")
    }

    /// Runs the script with `command` on this cluster's data directory, within `limit`.
    async fn script(&self, command: &str, limit: Duration) -> Output {
        let mut cmd = tokio::process::Command::new("bash");
        cmd.arg(SCRIPT)
            .arg(command)
            .arg(self.data())
            .env("BALLAST_BIN", env!("CARGO_BIN_EXE_ballast"))
            .env("BALLAST_CLIENT_PORTS", Self::join(&self.client_ports))
            .env("BALLAST_PEER_PORTS", Self::join(&self.peer_ports))
            .env("BALLAST_SECURE_PORT", self.secure_port.to_string())
            .env("BALLAST_START_TIMEOUT", "60");
        run(cmd, limit, &format!("local-cluster.sh {command}")).await
    }

    /// Returns the pid the script recorded for each process.
    fn pids(&self) -> Vec<u32> {
        PROCESSES
            .iter()
            .map(|name| {
                let path = self.data().join(format!("{name}.pid"));
                let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                text.trim().parse().unwrap_or_else(|e| panic!("{}: {text:?}: {e}", path.display()))
            })
            .collect()
    }

    /// The last lines of every process's log, for failure messages.
    fn logs(&self) -> String {
        PROCESSES
            .iter()
            .map(|name| {
                let log = std::fs::read_to_string(self.data().join(format!("{name}.log"))).unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                format!("--- {name}.log ---\n{}", lines[lines.len().saturating_sub(15)..].join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn endpoint(&self, member: usize) -> String {
        format!("127.0.0.1:{}", self.client_ports[member])
    }

    /// Runs etcdctl against `endpoints` only (none taken from the environment).
    async fn etcdctl(&self, endpoints: &[String], args: &[&str]) -> Output {
        let mut cmd = tokio::process::Command::new("etcdctl");
        cmd.env("ETCDCTL_API", "3")
            .env_remove("ETCDCTL_ENDPOINTS")
            .arg(format!("--endpoints={}", endpoints.join(",")))
            .args(["--dial-timeout=5s", "--command-timeout=10s"])
            .args(args);
        run(cmd, Duration::from_secs(30), &format!("etcdctl {args:?}")).await
    }

    fn kubeconfig(&self) -> PathBuf {
        self.data().join("frontend").join("pki").join("admin.kubeconfig")
    }

    async fn kubectl(&self, args: &[&str]) -> Output {
        let mut cmd = tokio::process::Command::new(KUBECTL);
        cmd.env_remove("KUBECONFIG")
            .arg(format!("--kubeconfig={}", self.kubeconfig().display()))
            .arg(format!("--cache-dir={}", self.dir.path().join("kube-cache").display()))
            .arg("--request-timeout=20s")
            .args(args);
        run(cmd, Duration::from_secs(30), &format!("kubectl {args:?}")).await
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        if PROCESSES.iter().any(|name| self.data().join(format!("{name}.pid")).exists()) {
            // Synchronous on purpose: the runtime may be gone; the script bounds its own wait.
            let _ = std::process::Command::new("bash")
                .arg(SCRIPT)
                .arg("stop")
                .arg(self.data())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status();
        }
    }
}

fn refused(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_cluster_starts_serves_and_stops() {
    let c = LocalCluster::new();

    // One command: built binary given, so nothing compiles here; 120 s covers a slow machine's
    // three members, the frontend's bootstrap and the script's own 60 s wait.
    let started = c.script("start", Duration::from_secs(120)).await;
    let hints = stdout(&started, "local-cluster.sh start");
    let endpoints: Vec<String> = (0..3).map(|i| c.endpoint(i)).collect();
    assert!(
        hints.contains(&format!("ETCDCTL_ENDPOINTS={}", endpoints.join(","))),
        "start did not print the endpoints:\n{hints}"
    );
    assert!(
        hints.contains(&format!("KUBECONFIG={}", c.kubeconfig().display())),
        "start did not print the kubeconfig path:\n{hints}"
    );
    assert!(c.kubeconfig().is_file(), "no kubeconfig at {}", c.kubeconfig().display());

    let pids = c.pids();
    for (name, pid) in PROCESSES.iter().zip(&pids) {
        assert!(alive(*pid), "{name} (pid {pid}) is not running after start\n{}", c.logs());
    }

    // Every member, asked alone, knows all three.
    for i in 0..3 {
        let list = stdout(&c.etcdctl(&[c.endpoint(i)], &["member", "list"]).await, "etcdctl member list");
        let rows: Vec<&str> = list.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(rows.len(), 3, "member list through {} has not 3 members:\n{list}", c.endpoint(i));
        for (m, (client, peer)) in c.client_ports.iter().zip(&c.peer_ports).enumerate() {
            let name = format!("m{}", m + 1);
            let row = rows.iter().find(|r| r.split(", ").nth(2) == Some(name.as_str()));
            let row = row.unwrap_or_else(|| panic!("member list has no {name}:\n{list}"));
            assert!(row.contains(", started, "), "{name} is not started:\n{list}");
            assert!(row.contains(&format!("http://127.0.0.1:{peer}")), "{name}'s peer URL is wrong:\n{list}");
            assert!(row.contains(&format!("http://127.0.0.1:{client}")), "{name}'s client URL is wrong:\n{list}");
        }
    }
    let health = c.etcdctl(&endpoints, &["endpoint", "health"]).await;
    let health_text = text(&health);
    assert!(health.status.success(), "endpoint health failed:\n{health_text}");
    assert_eq!(health_text.matches("is healthy").count(), 3, "not every endpoint is healthy:\n{health_text}");

    // A write through one member is read through each of the others.
    stdout(&c.etcdctl(&[c.endpoint(0)], &["put", "deploy-check", "through-m1"]).await, "etcdctl put");
    for i in [1, 2] {
        let got = c.etcdctl(&[c.endpoint(i)], &["get", "deploy-check", "--print-value-only"]).await;
        assert_eq!(stdout(&got, "etcdctl get").trim(), "through-m1", "read through {}", c.endpoint(i));
    }

    // The frontend serves the cluster with the printed kubeconfig.
    let ns = stdout(&c.kubectl(&["get", "ns", "-o", "name"]).await, "kubectl get ns");
    for want in ["namespace/default", "namespace/kube-system"] {
        assert!(ns.lines().any(|l| l == want), "kubectl get ns lacks {want}:\n{ns}");
    }
    stdout(
        &c.kubectl(&["create", "configmap", "deploy-check", "--from-literal=greeting=hello"]).await,
        "kubectl create configmap",
    );
    let got = c.kubectl(&["get", "configmap", "deploy-check", "-o", "jsonpath={.data.greeting}"]).await;
    assert_eq!(stdout(&got, "kubectl get configmap"), "hello");
    // ... and stores it in the members: the configmap is under kube-apiserver's key on a member
    // the frontend may not have written through.
    let stored =
        c.etcdctl(&[c.endpoint(2)], &["get", "/registry/configmaps/default/deploy-check", "--keys-only"]).await;
    assert_eq!(stdout(&stored, "etcdctl get configmap key").trim(), "/registry/configmaps/default/deploy-check");

    // A member killed with SIGKILL is brought back by `start`, which leaves the others alone.
    let killed = std::process::Command::new("kill").args(["-9", &pids[1].to_string()]).status().expect("kill runs");
    assert!(killed.success());
    assert!(wait_for(Duration::from_secs(5), async || !alive(pids[1])).await, "m2 survived kill -9");
    stdout(&c.etcdctl(&[c.endpoint(0)], &["put", "deploy-check", "while-m2-down"]).await, "etcdctl put");
    let restarted = c.script("start", Duration::from_secs(120)).await;
    stdout(&restarted, "local-cluster.sh start with m2 down");
    let after_restart = c.pids();
    for (i, name) in PROCESSES.iter().enumerate() {
        if i == 1 {
            assert_ne!(after_restart[i], pids[i], "m2 was not started again");
        } else {
            assert_eq!(after_restart[i], pids[i], "{name} was restarted though it ran");
        }
        assert!(alive(after_restart[i]), "{name} is not running after start\n{}", c.logs());
    }
    let caught_up = wait_for(Duration::from_secs(30), async || {
        let got = c.etcdctl(&[c.endpoint(1)], &["get", "deploy-check", "--print-value-only", "--consistency=s"]).await;
        text(&got).trim() == "while-m2-down"
    })
    .await;
    assert!(caught_up, "the restarted m2 does not hold the write made while it was down\n{}", c.logs());
    let pids = after_restart;

    let status = c.script("status", Duration::from_secs(60)).await;
    let status_text = stdout(&status, "local-cluster.sh status");
    for (name, pid) in PROCESSES.iter().zip(&pids) {
        assert!(status_text.contains(&format!("{name}: running (pid {pid})")), "status:\n{status_text}");
    }

    let stopped = c.script("stop", Duration::from_secs(60)).await;
    let stop_text = stdout(&stopped, "local-cluster.sh stop");
    for (name, pid) in PROCESSES.iter().zip(&pids) {
        assert!(stop_text.contains(&format!("stopped {name} (pid {pid})")), "stop:\n{stop_text}");
    }
    let gone = wait_for(Duration::from_secs(5), async || pids.iter().all(|pid| !alive(*pid))).await;
    let left: Vec<&u32> = pids.iter().filter(|pid| alive(**pid)).collect();
    assert!(gone, "processes still running after stop: {left:?}");
    for port in c.client_ports.iter().chain(&c.peer_ports).chain([&c.secure_port]) {
        assert!(refused(*port), "127.0.0.1:{port} still accepts connections after stop");
    }
    for name in PROCESSES {
        assert!(!c.data().join(format!("{name}.pid")).exists(), "stop left {name}.pid behind");
    }

    // With everything stopped, status says so with LSB's "not running".
    let after = c.script("status", Duration::from_secs(60)).await;
    assert_eq!(after.status.code(), Some(3), "status after stop:\n{}", text(&after));
    assert!(c.data().join("m1").is_dir(), "stop removed m1's data");
}
