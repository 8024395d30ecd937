//! One scripted kubectl session against `ballast serve`, the embedded default: the commands a
//! person runs on a new cluster, in order, each asserting what kubectl prints. kubectl validates
//! with the server's OpenAPI (no `--validate=false` anywhere), creates typed objects with
//! protobuf bodies, applies with strategic merge patches and waits on watches, so this exercises
//! the whole frontend over the Ballast engine through the real binary.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::harness::{free_port, wait_for};

const KUBECTL: &str = "/usr/bin/kubectl";

/// How long a `kubectl wait` gets to start and read its object before the test changes it.
const WAITER_START: Duration = Duration::from_secs(2);

/// A `ballast serve` process on free loopback ports in its own directory.
pub(crate) struct Serve {
    pub(crate) dir: tempfile::TempDir,
    child: Child,
    /// The Kubernetes API's port.
    pub(crate) secure: u16,
    /// The etcd API's port.
    pub(crate) client: u16,
}

impl Serve {
    async fn start() -> Serve {
        Self::start_with(&[]).await
    }

    /// Starts `ballast serve` with more flags and waits until its `/readyz` answers.
    pub(crate) async fn start_with(args: &[&str]) -> Serve {
        let dir = tempfile::tempdir().expect("tempdir");
        let (client, peer, secure) = (free_port(), free_port(), free_port());
        let log = std::fs::File::create(dir.path().join("serve.log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_ballast"))
            .arg("serve")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--advertise-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!("--secure-port={secure}"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("spawn ballast serve");
        let s = Serve { dir, child, secure, client };
        let ready = wait_for(Duration::from_secs(30), async || {
            s.kubeconfig().exists() && s.kubectl_async(&["--request-timeout=5s", "get", "--raw", "/readyz"]).await.ok
        })
        .await;
        assert!(ready, "ballast serve did not become ready; log:\n{}", s.log());
        s
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("data").join("admin.kubeconfig")
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(KUBECTL);
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig().display()))
            .arg(format!("--cache-dir={}", self.dir.path().join("kube-cache").display()))
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl to completion (at most 60 s).
    async fn kubectl_async(&self, args: &[&str]) -> Out {
        let run = self.command(args).output();
        let out = tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
            .expect("run kubectl");
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs kubectl and returns its stdout, failing the test (with the server log) otherwise.
    pub(crate) async fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl_async(args).await;
        assert!(out.ok, "kubectl {args:?} failed:\n{}{}\nserver log:\n{}", out.stdout, out.stderr, self.tail());
        out.stdout
    }

    /// Runs kubectl and returns its stderr, failing the test if it succeeded.
    async fn fails(&self, args: &[&str]) -> String {
        let out = self.kubectl_async(args).await;
        assert!(!out.ok, "kubectl {args:?} should have failed:\n{}", out.stdout);
        out.stderr
    }

    async fn json(&self, args: &[&str]) -> Value {
        let mut full = args.to_vec();
        full.extend(["-o", "json"]);
        let text = self.ok(&full).await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl {args:?} printed no JSON ({e}):\n{text}"))
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write manifest");
        path
    }

    fn tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn path_arg(p: &Path) -> String {
    p.display().to_string()
}

fn line_with<'a>(text: &'a str, first_column: &str) -> &'a str {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(first_column))
        .unwrap_or_else(|| panic!("no row {first_column} in:\n{text}"))
}

const APP_CONFIG_V1: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: demo
  labels:
    app: web
data:
  a: \"1\"
  b: \"2\"
";

const APP_CONFIG_V2: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: demo
  labels:
    app: web
    stage: two
data:
  a: \"1\"
  c: \"3\"
";

const WITH_UNKNOWN_FIELD: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: typo
  namespace: demo
dataa:
  a: \"1\"
";

const HELD: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: held
  namespace: demo
  finalizers: [\"example.com/hold\"]
data:
  k: v
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_session_against_ballast_serve() {
    let s = Serve::start().await;

    // Discovery and OpenAPI.
    let versions = s.ok(&["api-versions"]).await;
    for v in [
        "v1",
        "apps/v1",
        "batch/v1",
        "rbac.authorization.k8s.io/v1",
        "autoscaling/v2",
        "flowcontrol.apiserver.k8s.io/v1",
    ] {
        assert!(versions.lines().any(|l| l == v), "{v} missing from api-versions:\n{versions}");
    }
    let resources = s.ok(&["api-resources"]).await;
    let deployments: Vec<&str> = line_with(&resources, "deployments").split_whitespace().collect();
    assert_eq!(deployments, ["deployments", "deploy", "apps/v1", "true", "Deployment"]);
    let explain = s.ok(&["explain", "deployment.spec.replicas"]).await;
    assert!(explain.contains("KIND:       Deployment"), "{explain}");
    assert!(explain.contains("replicas\t<integer>") || explain.contains("replicas <integer>"), "{explain}");
    assert!(explain.contains("Number of desired pods"), "{explain}");

    // Typed creates (protobuf bodies).
    assert_eq!(s.ok(&["create", "namespace", "demo"]).await.trim(), "namespace/demo created");
    assert_eq!(
        s.ok(&["create", "configmap", "settings", "-n", "demo", "--from-literal=mode=fast"]).await.trim(),
        "configmap/settings created"
    );
    assert_eq!(
        s.ok(&["create", "secret", "generic", "creds", "-n", "demo", "--from-literal=password=hunter2"]).await.trim(),
        "secret/creds created"
    );
    assert_eq!(
        s.ok(&["create", "deployment", "web", "-n", "demo", "--image=nginx:1.27", "--replicas=2"]).await.trim(),
        "deployment.apps/web created"
    );
    let web = s.json(&["get", "deployment", "web", "-n", "demo"]).await;
    assert_eq!(web["spec"]["replicas"], 2);
    assert_eq!(web["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27");
    assert_eq!(web["metadata"]["generation"], 1);
    let secret = s.json(&["get", "secret", "creds", "-n", "demo"]).await;
    assert_eq!(secret["data"]["password"], "aHVudGVyMg==");

    // Strict validation from the OpenAPI-aware kubectl: an unknown field is refused, nothing written.
    let typo = s.write("typo.yaml", WITH_UNKNOWN_FIELD);
    let err = s.fails(&["create", "-f", &path_arg(&typo)]).await;
    assert!(err.contains(r#"unknown field "dataa""#), "{err}");
    s.fails(&["get", "configmap", "typo", "-n", "demo"]).await;

    // Client-side apply: create, then re-apply a changed manifest.
    let v1 = s.write("app-config.yaml", APP_CONFIG_V1);
    assert_eq!(s.ok(&["apply", "-f", &path_arg(&v1)]).await.trim(), "configmap/app-config created");
    let v2 = s.write("app-config.yaml", APP_CONFIG_V2);
    assert_eq!(s.ok(&["apply", "-f", &path_arg(&v2)]).await.trim(), "configmap/app-config configured");
    let cm = s.json(&["get", "configmap", "app-config", "-n", "demo"]).await;
    assert_eq!(cm["data"], serde_json::json!({"a": "1", "c": "3"}));
    assert_eq!(cm["metadata"]["labels"], serde_json::json!({"app": "web", "stage": "two"}));
    let last_applied = cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .expect("last-applied annotation");
    assert!(last_applied.contains(r#""c":"3""#), "{last_applied}");
    assert_eq!(s.ok(&["apply", "-f", &path_arg(&v2)]).await.trim(), "configmap/app-config unchanged");

    // Patches in all three forms.
    let merged = s
        .ok(&["patch", "configmap", "app-config", "-n", "demo", "--type=merge", "-p", r#"{"data":{"m":"merge"}}"#])
        .await;
    assert_eq!(merged.trim(), "configmap/app-config patched");
    s.ok(&[
        "patch",
        "configmap",
        "app-config",
        "-n",
        "demo",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"json"},{"op":"remove","path":"/data/a"}]"#,
    ])
    .await;
    s.ok(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "demo",
        "--type=strategic",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}}}"#,
    ])
    .await;
    let cm = s.json(&["get", "configmap", "app-config", "-n", "demo"]).await;
    assert_eq!(cm["data"], serde_json::json!({"c": "3", "m": "merge", "j": "json"}));
    let web = s.json(&["get", "deployment", "web", "-n", "demo"]).await;
    let containers = web["spec"]["template"]["spec"]["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "the strategic patch merged by name: {containers:?}");
    assert_eq!(containers[0]["image"], "nginx:1.28");
    assert_eq!(containers[0]["imagePullPolicy"], "IfNotPresent", "fields the patch did not name stay");
    assert_eq!(web["metadata"]["generation"], 2);
    assert_eq!(
        s.ok(&["set", "image", "deployment/web", "-n", "demo", "nginx=nginx:1.29"]).await.trim(),
        "deployment.apps/web image updated"
    );
    s.ok(&["set", "image", "deployment/web", "-n", "demo", "nginx=nginx:1.28"]).await;

    // Label, annotate, scale.
    assert_eq!(
        s.ok(&["label", "deployment", "web", "-n", "demo", "tier=frontend"]).await.trim(),
        "deployment.apps/web labeled"
    );
    let clash = s.fails(&["label", "deployment", "web", "-n", "demo", "tier=backend"]).await;
    assert!(clash.contains("'tier' already has a value (frontend), and --overwrite is false"), "{clash}");
    assert_eq!(
        s.ok(&["annotate", "deployment", "web", "-n", "demo", "owner=team-a"]).await.trim(),
        "deployment.apps/web annotated"
    );
    assert_eq!(
        s.ok(&["scale", "deployment", "web", "-n", "demo", "--replicas=5"]).await.trim(),
        "deployment.apps/web scaled"
    );
    let web = s.json(&["get", "deployment", "web", "-n", "demo"]).await;
    assert_eq!(web["spec"]["replicas"], 5);
    assert_eq!(web["metadata"]["labels"]["tier"], "frontend");
    assert_eq!(web["metadata"]["annotations"]["owner"], "team-a");

    // Output formats.
    let yaml = s.ok(&["get", "deployment", "web", "-n", "demo", "-o", "yaml"]).await;
    assert!(yaml.contains("kind: Deployment") && yaml.contains("replicas: 5"), "{yaml}");
    let wide = s.ok(&["get", "deployment", "web", "-n", "demo", "-o", "wide"]).await;
    let header: Vec<&str> = wide.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]);
    let row: Vec<&str> = line_with(&wide, "web").split_whitespace().collect();
    assert_eq!(row[1], "0/5");
    assert_eq!(&row[5..], ["nginx", "nginx:1.28", "app=web"]);

    // get -w sees another client's write.
    let mut watch = s
        .command(&["get", "configmaps", "-n", "demo", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("kubectl get -w");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(watch.stdout.take().expect("stdout")));
    // The initial listing comes first; the write follows it.
    loop {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("watch output")
            .expect("read");
        if line.as_deref().is_some_and(|l| l.contains("settings")) {
            break;
        }
    }
    s.ok(&["create", "configmap", "watched", "-n", "demo", "--from-literal=k=v"]).await;
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("watched") {
                return line;
            }
        }
        String::new()
    })
    .await
    .expect("the watch saw the write");
    assert!(seen.starts_with("ADDED"), "{seen}");
    let _ = watch.kill().await;

    // wait --for=condition, on a condition another client writes to status.
    let waiter =
        s.command(&["wait", "--for=condition=Available", "deployment/web", "-n", "demo", "--timeout=30s"]).output();
    let waiter = tokio::spawn(waiter);
    // Time for kubectl to start and read the object first, on a loaded machine too.
    tokio::time::sleep(WAITER_START).await;
    s.ok(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "demo",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","message":"ok"}]}}"#,
    ])
    .await;
    let waited = waiter.await.expect("join").expect("kubectl wait");
    assert!(waited.status.success(), "{}", String::from_utf8_lossy(&waited.stderr));
    assert_eq!(String::from_utf8_lossy(&waited.stdout).trim(), "deployment.apps/web condition met");

    // Delete with a finalizer: the object stays, marked, until the finalizer goes; wait --for=delete sees it go.
    let held = s.write("held.yaml", HELD);
    s.ok(&["apply", "-f", &path_arg(&held)]).await;
    assert_eq!(
        s.ok(&["delete", "configmap", "held", "-n", "demo", "--wait=false"]).await.trim(),
        r#"configmap "held" deleted"#
    );
    let marked = s.json(&["get", "configmap", "held", "-n", "demo"]).await;
    assert!(marked["metadata"]["deletionTimestamp"].is_string(), "{marked}");
    let waiter =
        tokio::spawn(s.command(&["wait", "--for=delete", "configmap/held", "-n", "demo", "--timeout=30s"]).output());
    // kubectl says "condition met" only if the object still existed when it started.
    tokio::time::sleep(WAITER_START).await;
    s.ok(&[
        "patch",
        "configmap",
        "held",
        "-n",
        "demo",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    let waited = waiter.await.expect("join").expect("kubectl wait");
    assert!(waited.status.success(), "{}", String::from_utf8_lossy(&waited.stderr));
    assert_eq!(String::from_utf8_lossy(&waited.stdout).trim(), "configmap/held condition met");
    let gone = s.fails(&["get", "configmap", "held", "-n", "demo"]).await;
    assert!(gone.contains(r#"configmaps "held" not found"#), "{gone}");

    // auth can-i as the admin and as an impersonated user with only a view binding.
    assert_eq!(s.ok(&["auth", "can-i", "create", "deployments", "-n", "demo"]).await.trim(), "yes");
    let denied = s.kubectl_async(&["auth", "can-i", "list", "configmaps", "-n", "demo", "--as=jane"]).await;
    assert_eq!((denied.ok, denied.stdout.trim()), (false, "no"));
    s.ok(&["create", "rolebinding", "jane-view", "-n", "demo", "--clusterrole=view", "--user=jane"]).await;
    assert_eq!(s.ok(&["auth", "can-i", "list", "configmaps", "-n", "demo", "--as=jane"]).await.trim(), "yes");
    let write = s.kubectl_async(&["auth", "can-i", "delete", "configmaps", "-n", "demo", "--as=jane"]).await;
    assert_eq!((write.ok, write.stdout.trim()), (false, "no"));
    let forbidden = s.fails(&["delete", "configmap", "settings", "-n", "demo", "--as=jane"]).await;
    assert!(
        forbidden
            .contains(r#"User "jane" cannot delete resource "configmaps" in API group "" in the namespace "demo""#),
        "{forbidden}"
    );

    // dry-run=server writes nothing.
    assert_eq!(
        s.ok(&["create", "configmap", "dry", "-n", "demo", "--from-literal=a=b", "--dry-run=server"]).await.trim(),
        "configmap/dry created (server dry run)"
    );
    s.fails(&["get", "configmap", "dry", "-n", "demo"]).await;
    s.ok(&["delete", "deployment", "web", "-n", "demo", "--dry-run=server"]).await;
    s.ok(&["get", "deployment", "web", "-n", "demo"]).await;
}

/// `kubectl create token` on `ballast serve` (its generated signing key), then the token as the
/// only credential: `auth whoami` names the service account, RBAC forbids what it was not
/// granted, and the issuer's discovery document is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_token_session_against_ballast_serve() {
    let s = Serve::start().await;
    s.ok(&["create", "serviceaccount", "bot"]).await;
    let token = s.ok(&["create", "token", "bot", "--duration", "15m"]).await.trim().to_string();
    assert!(s.dir.path().join("data").join("pki").join("service-account.key").is_file());
    let config = s.dir.path().join("token.kubeconfig");
    let at = format!("--kubeconfig={}", config.display());
    let ca = s.dir.path().join("data").join("pki").join("ca.crt");
    let server = format!("--server=https://127.0.0.1:{}", s.secure);
    s.ok(&[&at, "config", "set-cluster", "c", &server, &format!("--certificate-authority={}", ca.display())]).await;
    s.ok(&[&at, "config", "set-credentials", "bot", &format!("--token={token}")]).await;
    s.ok(&[&at, "config", "set-context", "bot", "--cluster=c", "--user=bot"]).await;
    s.ok(&[&at, "config", "use-context", "bot"]).await;
    let me = s.json(&[&at, "auth", "whoami"]).await;
    assert_eq!(me["status"]["userInfo"]["username"], "system:serviceaccount:default:bot");
    let refused = s.fails(&[&at, "get", "pods"]).await;
    assert!(refused.contains(r#"User "system:serviceaccount:default:bot" cannot list resource "pods""#), "{refused}");
    let discovery: Value =
        serde_json::from_str(&s.ok(&[&at, "get", "--raw", "/.well-known/openid-configuration"]).await).expect("json");
    assert_eq!(discovery["issuer"], "https://kubernetes.default.svc.cluster.local");
}
