//! A Kubernetes frontend over a 3-member Ballast cluster, as kube-apiserver runs over etcd:
//! `ballast frontend --etcd-servers a,b,c` keeps serving kubectl while members are killed one
//! after another (after the first write that finds a member dead, every write succeeds in one
//! try), and a watch resumed from a resourceVersion taken before the failures sees
//! every object created during them, in order.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::cluster_harness::Cluster;
use crate::harness::{free_port, wait_for, Target};

const KUBECTL: &str = "/usr/bin/kubectl";

/// A `ballast frontend` process (here pointed at every member of a cluster).
pub(crate) struct Frontend {
    dir: tempfile::TempDir,
    child: Child,
}

impl Frontend {
    async fn start(c: &Cluster) -> Frontend {
        let servers = c.members.iter().map(|m| m.url()).collect::<Vec<_>>().join(",");
        Self::start_args(&servers, &[]).await
    }

    /// Starts `ballast frontend --etcd-servers=<servers>` with more flags, and waits until it
    /// is ready.
    pub(crate) async fn start_args(servers: &str, args: &[String]) -> Frontend {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = std::fs::File::create(dir.path().join("frontend.log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_ballast"))
            .arg("frontend")
            .arg(format!("--etcd-servers={servers}"))
            .arg(format!("--secure-port={}", free_port()))
            .arg(format!("--cert-dir={}", dir.path().join("pki").display()))
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("spawn ballast frontend");
        let f = Frontend { dir, child };
        let ready = wait_for(Duration::from_secs(30), async || {
            f.kubeconfig().exists() && f.kubectl(&["--request-timeout=5s", "get", "--raw", "/readyz"]).0
        })
        .await;
        assert!(ready, "the frontend did not become ready; log:\n{}", f.log());
        f
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("pki").join("admin.kubeconfig")
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("frontend.log")).unwrap_or_default()
    }

    /// Runs kubectl; answers (success, stdout, stderr).
    pub(crate) fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(KUBECTL)
            .arg(format!("--kubeconfig={}", self.kubeconfig().display()))
            .arg(format!("--cache-dir={}", self.dir.path().join("kube-cache").display()))
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .expect("run kubectl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Creates ConfigMap `name`, retrying for up to 20 s while a member's failure is noticed.
    async fn create(&self, name: &str) {
        let created = wait_for(Duration::from_secs(20), async || {
            let (ok, _, err) = self.kubectl(&["--request-timeout=5s", "create", "configmap", name]);
            ok || err.contains("AlreadyExists")
        })
        .await;
        assert!(created, "configmap {name} was never created; frontend log:\n{}", self.log());
    }

    /// Creates ConfigMap `name` in one try.
    fn create_once(&self, name: &str) {
        let (ok, _, err) = self.kubectl(&["--request-timeout=5s", "create", "configmap", name]);
        assert!(ok, "configmap {name}: {err}; frontend log:\n{}", self.log());
    }
}

impl Drop for Frontend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_keeps_working_while_members_fail() {
    let mut c = Cluster::start(Target::Ballast, 3).await;
    let f = Frontend::start(&c).await;
    f.create("before").await;
    let (ok, rv, err) = f.kubectl(&["get", "configmap", "before", "-o", "jsonpath={.metadata.resourceVersion}"]);
    assert!(ok, "{err}");
    let mut names = Vec::new();
    for victim in 0..3 {
        c.members[victim].kill9();
        for i in 0..6 {
            let name = format!("during-{victim}-{i}");
            if i == 0 {
                // A write in flight on the dead member's connection fails, as with etcd.
                f.create(&name).await;
            } else {
                // Then the frontend sends only to the members alive: each write succeeds in one
                // try (the dead member, refusing connections, was picked by about half of them
                // while it stayed in the rotation).
                f.create_once(&name);
            }
            names.push(name);
        }
        c.members[victim].restart().await;
    }
    let (ok, listed, err) = f.kubectl(&["get", "configmaps", "-o", "name"]);
    assert!(ok, "{err}; frontend log:\n{}", f.log());
    for n in &names {
        assert!(listed.contains(&format!("configmap/{n}")), "{n} missing from the list:\n{listed}");
    }
    // A client resuming its watch from before the failures gets every change, in order.
    let path = format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=3");
    let (ok, events, err) = f.kubectl(&["get", "--raw", &path]);
    assert!(ok, "{err}");
    let mut seen = Vec::new();
    let mut last = 0i64;
    for line in events.lines() {
        let ev: serde_json::Value = serde_json::from_str(line).expect("a watch event per line");
        let obj = &ev["object"];
        let rev: i64 = obj["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).unwrap_or(0);
        assert!(rev > last, "watch events out of order: {rev} after {last}");
        last = rev;
        if ev["type"] == "ADDED" {
            seen.push(obj["metadata"]["name"].as_str().unwrap_or_default().to_string());
        }
    }
    assert_eq!(seen, names, "the resumed watch saw every configmap created during the failures");
}
