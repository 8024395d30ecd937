//! A shard that stops on a storage error is not a silent death: run `ballast engine` under a low
//! open-file limit, use up its descriptors with idle connections, then write until RocksDB
//! cannot open its next file. The member must log the cause at error level at once, its health
//! endpoints must name the shard and the cause, and it must exit non-zero (as etcd exits on a
//! fatal storage error), not linger with every request failing. The same under `ballast serve`,
//! whose Kubernetes port's health endpoints name the shard and the cause too.

use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{free_port, wait_for};

/// The member's open-file limit: room for RocksDB, the runtime and a few dozen connections.
const NOFILE: usize = 256;

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// `curl -s -w '\n%{http_code}'`: returns (status, body), or status 0 when nothing answered. The
/// Kubernetes port's certificate is not checked (`-k`).
fn curl(url: &str) -> (u16, String) {
    let out =
        Command::new("curl").args(["-sk", "--max-time", "5", "-w", "\n%{http_code}", url]).output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[tokio::test]
async fn running_out_of_descriptors_is_logged_reported_and_fatal() {
    out_of_descriptors(None).await;
}

#[tokio::test]
async fn running_out_of_descriptors_under_serve_is_reported_on_the_kubernetes_port() {
    out_of_descriptors(Some(free_port())).await;
}

/// Runs `ballast engine`, or `ballast serve` with its Kubernetes port on `secure_port`, out of
/// descriptors.
async fn out_of_descriptors(secure_port: Option<u16>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, peer) = (free_port(), free_port());
    let log_path = dir.path().join("log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut command = Command::new("prlimit");
    command.arg(format!("--nofile={NOFILE}:{NOFILE}")).arg("--").arg(env!("CARGO_BIN_EXE_ballast"));
    match secure_port {
        Some(secure) => command.arg("serve").arg(format!("--secure-port={secure}")),
        None => command.arg("engine"),
    };
    let mut child = command
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .arg(format!("--listen-client-urls=http://127.0.0.1:{port}"))
        .arg(format!("--advertise-client-urls=http://127.0.0.1:{port}"))
        .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
        // Long enough to read the health endpoints before the member exits.
        .arg("--shard-error-exit-delay-ms=30000")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file"))
        .stderr(log)
        .spawn()
        .expect("spawn prlimit ballast engine");
    let pid = child.id();
    let endpoint = format!("127.0.0.1:{port}");
    let up = wait_for(Duration::from_secs(20), async || match etcd_client::Client::connect([&endpoint], None).await {
        Ok(mut c) => c.status().await.is_ok(),
        Err(_) => false,
    })
    .await;
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(up, "the engine did not start; log:\n{}", read_log());
    if let Some(secure) = secure_port {
        // The frontend starts after the engine answers; its port must be up before the
        // descriptors run out.
        let url = format!("https://127.0.0.1:{secure}/livez");
        let serving = wait_for(Duration::from_secs(30), async || curl(&url).0 == 200).await;
        assert!(serving, "the Kubernetes port did not start; log:\n{}", read_log());
    }
    assert!(read_log().contains("open-file limit is low"), "no warning about the low limit:\n{}", read_log());
    let mut client = etcd_client::Client::connect([&endpoint], None).await.expect("connect");
    // The client's connection is made before the descriptors run out.
    client.put("/fill/first", "v", None).await.expect("a first write");

    // Idle connections until the member holds every descriptor it may (those past that wait in
    // the listen backlog).
    let mut idle = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while open_fds(pid) < NOFILE && Instant::now() < deadline && idle.len() < 2 * NOFILE {
        idle.push(TcpStream::connect(&endpoint).expect("connect an idle socket"));
        let before = idle.len();
        wait_for(Duration::from_millis(200), async || open_fds(pid) >= before.min(NOFILE)).await;
    }
    assert!(open_fds(pid) >= NOFILE, "the member never used up its descriptors: {} open", open_fds(pid));

    // Large writes fill a memtable within a few dozen puts; switching it needs a new log file.
    let value = vec![b'x'; 1_400_000];
    let mut failed = None;
    for i in 0..400 {
        let put = client.put(format!("/fill/{i}"), value.clone(), None);
        match tokio::time::timeout(Duration::from_secs(20), put).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                failed = Some(e.to_string());
                break;
            }
            Err(_) => panic!("write {i} got no answer; log:\n{}", read_log()),
        }
    }
    assert!(failed.is_some(), "every write succeeded without descriptors; log:\n{}", read_log());
    drop(idle);

    // The cause is logged at error level, with the shard.
    let logged = wait_for(Duration::from_secs(20), async || {
        let text = read_log();
        text.lines().any(|l| l.contains("ERROR") && l.contains("shard stopped") && l.contains("Too many open files"))
    })
    .await;
    assert!(logged, "no error line with the cause; log:\n{}", read_log());

    // The health endpoints say which shard and why.
    for path in ["livez", "readyz", "health"] {
        let url = format!("http://{endpoint}/{path}");
        let mut last = (0, String::new());
        let said = wait_for(Duration::from_secs(20), async || {
            last = curl(&url);
            last.0 == 503 && last.1.contains("shard 0 stopped") && last.1.contains("Too many open files")
        })
        .await;
        assert!(said, "/{path} answered {last:?}");
    }
    if let Some(secure) = secure_port {
        // kube's health endpoints are public; the engine check says what the etcd port says.
        for path in ["livez", "readyz"] {
            let url = format!("https://127.0.0.1:{secure}/{path}?verbose");
            let (code, body) = curl(&url);
            assert_eq!(code, 500, "/{path}: {body}");
            assert!(
                body.lines()
                    .any(|l| l.starts_with("[-]engine failed: shard 0 stopped:") && l.contains("Too many open files")),
                "/{path}: {body}"
            );
        }
    }

    // And the member exits non-zero.
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the member") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the member did not exit; log:\n{}", read_log());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!status.success(), "the member exited with {status}");
}
