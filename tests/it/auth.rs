//! etcd auth (users, roles, key-range permissions, tokens) through etcdctl 3.4, the etcd-client
//! crate and raw gRPC, against both servers: one etcdctl script runs on each and the two
//! transcripts (every command's output, or its `Error:` line) must be identical; then the
//! watch refusals, auth surviving a restart, and a 3-member cluster where auth enabled through
//! one member is enforced on, and tokens granted by it accepted by, another.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use ballast_proto::etcdserverpb::{auth_client::AuthClient, kv_client::KvClient, AuthStatusRequest, RangeRequest};

use crate::cluster_harness::Cluster;
use crate::harness::{ok, Server, Target};

/// What a command printed: its stdout when it succeeded, else its `Error:` line (etcdctl's
/// stderr also holds client log lines with timestamps, which differ between runs).
fn outcome(out: &Output) -> String {
    if out.status.success() {
        return String::from_utf8_lossy(&out.stdout).into_owned();
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let error = stderr.lines().filter(|l| l.starts_with("Error:")).collect::<Vec<_>>().join("\n");
    format!("FAILED {error}")
}

/// The script: sets up a user `u` with read-write on the prefix `/a/` and read on `/ro`,
/// enables auth, then runs allowed and denied requests of every kind. Each step is
/// `(args, stdin)`.
fn script() -> Vec<(Vec<&'static str>, &'static str)> {
    let u = "--user=u:pw";
    let root = "--user=root:pw";
    vec![
        (vec!["role", "add", "r"], ""),
        (vec!["role", "grant-permission", "--prefix=true", "r", "readwrite", "/a/"], ""),
        (vec!["role", "grant-permission", "r", "read", "/ro"], ""),
        (vec!["user", "add", "u:pw"], ""),
        (vec!["user", "grant-role", "u", "r"], ""),
        (vec!["put", "/ro", "seed"], ""),
        (vec!["auth", "enable"], ""),
        (vec!["user", "grant-role", "root", "root"], ""),
        (vec!["auth", "enable"], ""),
        // No credentials, then the user's allowed and denied requests.
        (vec!["get", "/a/x"], ""),
        (vec![u, "put", "/a/x", "1"], ""),
        (vec![u, "get", "/a/x", "--print-value-only"], ""),
        (vec![u, "put", "/b", "1"], ""),
        (vec![u, "get", "/ro", "--print-value-only"], ""),
        (vec![u, "put", "/ro", "v"], ""),
        (vec![u, "get", "/a/", "--prefix", "--keys-only"], ""),
        (vec![u, "get", "/a", "--prefix"], ""),
        (vec![u, "get", "/a/", "--from-key"], ""),
        (vec![u, "put", "/a/y", "2", "--prev-kv"], ""),
        (vec![u, "del", "/a/x", "--prev-kv"], ""),
        (vec![u, "del", "/ro"], ""),
        (vec![u, "txn"], "mod(\"/a/y\") > \"0\"\n\nput /a/z 3\n\nget /a/y\n\n"),
        (vec![u, "txn"], "mod(\"/a/y\") > \"0\"\n\nput /a/z 3\n\nput /b 4\n\n"),
        (vec![u, "txn"], "mod(\"/b\") > \"0\"\n\nput /a/z 3\n\n\n"),
        (vec![u, "compaction", "1"], ""),
        (vec![u, "endpoint", "hashkv"], ""),
        // Wrong credentials.
        (vec!["--user=u:bad", "get", "/a/x"], ""),
        (vec!["--user=nobody:pw", "get", "/a/x"], ""),
        // A user made without a password cannot authenticate with one.
        (vec![root, "user", "add", "np", "--no-password"], ""),
        (vec!["--user=np:pw", "get", "/a/x"], ""),
        // Management: root only, except reading oneself and one's roles.
        (vec![u, "user", "list"], ""),
        (vec![u, "user", "add", "v:pw"], ""),
        (vec![u, "user", "get", "u"], ""),
        (vec![u, "user", "get", "root"], ""),
        (vec![u, "role", "get", "r"], ""),
        (vec![root, "user", "list"], ""),
        (vec![root, "role", "list"], ""),
        (vec![root, "role", "get", "r"], ""),
        (vec![root, "user", "get", "u"], ""),
        (vec![root, "user", "delete", "root"], ""),
        (vec![root, "user", "revoke-role", "root", "root"], ""),
        (vec![root, "role", "delete", "root"], ""),
        (vec![root, "user", "revoke-role", "u", "nosuch"], ""),
        (vec![root, "role", "revoke-permission", "r", "/zz"], ""),
        (vec![root, "user", "add", "u:x"], ""),
        (vec![root, "role", "add", "r"], ""),
        (vec![root, "user", "grant-role", "nobody", "r"], ""),
        (vec![root, "user", "grant-role", "u", "nosuch"], ""),
        (vec![root, "user", "get", "nobody"], ""),
        (vec![root, "role", "get", "nosuch"], ""),
        (vec![root, "user", "delete", "nobody"], ""),
        (vec![root, "role", "delete", "nosuch"], ""),
        // A new password: the old one fails, the new one works.
        (vec![root, "user", "passwd", "u", "--interactive=false"], "pw2\n"),
        (vec![u, "get", "/a/y", "--print-value-only"], ""),
        (vec!["--user=u:pw2", "get", "/a/y", "--print-value-only"], ""),
        (vec![root, "user", "passwd", "u", "--interactive=false"], "pw\n"),
        // Revoking the permission takes effect at once.
        (vec![root, "role", "revoke-permission", "r", "/ro"], ""),
        (vec![u, "get", "/ro"], ""),
        (vec![root, "auth", "disable"], ""),
        (vec!["get", "/a/y", "--print-value-only"], ""),
        (vec!["--user=u:pw", "get", "/a/y"], ""),
        (vec!["auth", "enable"], ""),
    ]
}

async fn transcript(target: Target) -> Vec<String> {
    let s = Server::start(target).await;
    // etcdctl's `auth enable` grants root the root role itself; the server's own refusals are
    // seen through the raw call.
    let mut client = s.client().await;
    let mut raw = Vec::new();
    raw.push(format!("{:?}", client.auth_enable().await.map(|_| ()).map_err(|e| e.to_string())));
    client.user_add("root", "pw", None).await.expect("add root");
    raw.push(format!("{:?}", client.auth_enable().await.map(|_| ()).map_err(|e| e.to_string())));
    raw.into_iter()
        .chain(script().into_iter().map(|(args, stdin)| {
            let out = s.etcdctl_stdin(&args, stdin);
            format!("$ etcdctl {}\n{}", args.join(" "), outcome(&out))
        }))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_session_matches_etcd() {
    let etcd = transcript(Target::Etcd).await;
    let ballast = transcript(Target::Ballast).await;
    for (e, b) in etcd.iter().zip(&ballast) {
        assert_eq!(b, e, "Ballast differs from etcd");
    }
    assert_eq!(etcd.len(), ballast.len());
    if let Ok(path) = std::env::var("AUTH_TRANSCRIPT") {
        std::fs::write(path, etcd.join("\n")).expect("write the transcript");
    }
    // The script does what it says on etcd (so the comparison above compares something).
    let step = |prefix: &str| etcd.iter().find(|l| l.starts_with(&format!("$ etcdctl {prefix}\n"))).expect(prefix);
    assert!(etcd[0].contains("etcdserver: root user does not exist"), "{}", etcd[0]);
    assert!(etcd[1].contains("etcdserver: root user does not have root role"), "{}", etcd[1]);
    assert!(step("auth enable").ends_with("Authentication Enabled\n"));
    assert!(step("get /a/x").ends_with("FAILED Error: etcdserver: user name is empty"));
    assert!(step("--user=u:pw put /b 1").ends_with("FAILED Error: etcdserver: permission denied"));
    assert!(step("--user=u:pw put /a/x 1").ends_with("OK\n"));
    assert!(step("--user=u:bad get /a/x").ends_with("invalid user ID or password"));
}

/// Sets up `root` and `u` (read-write on `/a/`) and enables auth, through etcdctl.
fn enable(s: &Server) {
    for args in [
        &["user", "add", "root:pw"][..],
        &["user", "grant-role", "root", "root"],
        &["role", "add", "r"],
        &["role", "grant-permission", "--prefix=true", "r", "readwrite", "/a/"],
        &["user", "add", "u:pw"],
        &["user", "grant-role", "u", "r"],
        &["auth", "enable"],
    ] {
        ok(&s.etcdctl(args));
    }
}

/// Runs `etcdctl watch` for at most 4 s (a refused watch ends it at once on both servers; an
/// allowed one is cut off) and returns what it printed.
fn watch_briefly(s: &Server, args: &[&str]) -> String {
    let out = Command::new("timeout")
        .args(["4", "etcdctl", &format!("--endpoints={}", s.endpoint())])
        .args(args)
        .env("ETCDCTL_API", "3")
        .stdin(Stdio::null())
        .output()
        .expect("etcdctl watch");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.extend(
        String::from_utf8_lossy(&out.stderr).lines().filter(|l| !l.contains("\"level\"")).map(|l| format!("{l}\n")),
    );
    text
}

async fn watches_and_restart(target: Target) -> Vec<String> {
    let mut s = Server::start(target).await;
    enable(&s);
    let mut seen = vec![
        watch_briefly(&s, &["--user=u:pw", "watch", "/b"]),
        watch_briefly(&s, &["--user=u:pw", "watch", "/b", "--prefix"]),
        watch_briefly(&s, &["watch", "/a/x"]),
    ];
    // An allowed watch sees a put made while it runs.
    let mut w = s.etcdctl_spawn(&["--user=u:pw", "watch", "/a/", "--prefix"]);
    let lines = crate::harness::stdout_lines(&mut w);
    let put = async {
        for _ in 0..50 {
            ok(&s.etcdctl(&["--user=u:pw", "put", "/a/w", "seen"]));
            if let Ok(line) = lines.recv_timeout(Duration::from_millis(100)) {
                return line;
            }
        }
        panic!("the allowed watch saw nothing");
    };
    seen.push(put.await);
    let _ = w.kill();
    let _ = w.wait();
    // Users, roles, permissions and the enabled flag survive a restart.
    s.restart().await;
    seen.push(outcome(&s.etcdctl(&["--user=u:pw", "get", "/a/w", "--print-value-only"])));
    seen.push(outcome(&s.etcdctl(&["get", "/a/w"])));
    seen.push(outcome(&s.etcdctl(&["--user=u:pw", "put", "/b", "1"])));
    seen.push(outcome(&s.etcdctl(&["--user=root:pw", "role", "get", "r"])));
    seen
}

/// Runs `body` on stock etcd and on Ballast, asserts the two give the same outcomes, and
/// answers etcd's.
async fn same_on_both<F: std::future::Future<Output = Vec<String>>>(body: impl Fn(Target) -> F) -> Vec<String> {
    let etcd = Box::pin(body(Target::Etcd)).await;
    let ballast = Box::pin(body(Target::Ballast)).await;
    assert_eq!(ballast, etcd, "Ballast differs from etcd");
    etcd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_permissions_and_restart_match_etcd() {
    let etcd = same_on_both(watches_and_restart).await;
    assert!(etcd[0].contains("etcdserver: permission denied"), "{etcd:?}");
    assert_eq!(etcd[3], "PUT", "{etcd:?}");
    assert_eq!(etcd[4], "seen\n");
}

/// A raw KV client for `endpoint` sending `token`.
async fn range_with_token(endpoint: &str, token: &str, key: &str) -> Result<i64, tonic::Status> {
    let mut kv = KvClient::connect(format!("http://{endpoint}")).await.expect("connect");
    let mut req = tonic::Request::new(RangeRequest { key: key.as_bytes().to_vec().into(), ..Default::default() });
    req.metadata_mut().insert("token", token.parse().expect("ascii token"));
    kv.range(req).await.map(|r| r.into_inner().count)
}

async fn cluster_auth(target: Target) {
    let c = Cluster::start(target, 3).await;
    let (first, last) = (&c.members[0], &c.members[2]);
    enable(first);
    // Enabled through the first member, enforced on the last.
    let denied = outcome(&last.etcdctl(&["get", "/a/x"]));
    assert_eq!(denied, "FAILED Error: etcdserver: user name is empty");
    assert_eq!(ok(&last.etcdctl(&["--user=u:pw", "put", "/a/x", "1"])), "OK\n");
    let denied = outcome(&last.etcdctl(&["--user=u:pw", "put", "/b", "1"]));
    assert_eq!(denied, "FAILED Error: etcdserver: permission denied");
    // The etcd-client crate with user and password, on the middle member.
    let opts = etcd_client::ConnectOptions::new().with_user("u", "pw");
    let mut client = etcd_client::Client::connect([c.members[1].endpoint()], Some(opts)).await.expect("connect as u");
    client.put("/a/y", "2", None).await.expect("u may write /a/");
    let err = client.put("/b", "2", None).await.expect_err("u may not write /b");
    assert!(err.to_string().contains("etcdserver: permission denied"), "{err}");
    // A token granted by the first member works on the last one; a made-up one does not.
    let auth = etcd_client::Client::connect([first.endpoint()], None).await.expect("connect");
    let token =
        auth.auth_client().authenticate("u".into(), "pw".into()).await.expect("authenticate").token().to_string();
    assert_eq!(range_with_token(&last.endpoint(), &token, "/a/y").await.expect("token accepted"), 1);
    let bad = range_with_token(&last.endpoint(), "abcdefghijklmnop.1", "/a/y").await.expect_err("unknown token");
    assert_eq!((bad.code(), bad.message()), (tonic::Code::Unauthenticated, "etcdserver: invalid auth token"));
    let denied = range_with_token(&last.endpoint(), &token, "/b").await.expect_err("not u's");
    assert_eq!((denied.code(), denied.message()), (tonic::Code::PermissionDenied, "etcdserver: permission denied"));
    if target.is_ballast() {
        // AuthStatus (etcd 3.5; 3.4 lacks it): on, at the revision of the six changes made.
        let mut a = AuthClient::connect(format!("http://{}", last.endpoint())).await.expect("connect");
        let st = a.auth_status(AuthStatusRequest {}).await.expect("auth status").into_inner();
        assert!(st.enabled);
        assert_eq!(st.auth_revision, 7);
    }
    // Disabled through the last member, open on the first.
    ok(&last.etcdctl(&["--user=root:pw", "auth", "disable"]));
    assert_eq!(ok(&first.etcdctl(&["get", "/a/y", "--print-value-only"])), "2\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabled_on_one_member_enforced_on_another() {
    for target in [Target::Ballast, Target::Etcd] {
        Box::pin(cluster_auth(target)).await;
    }
}

/// The JSON gateway: `/v3/auth/*` and the token in the `Authorization` header.
async fn gateway(target: Target) -> Vec<String> {
    let s = Server::start(target).await;
    enable(&s);
    let post = |path: &str, body: &str, token: Option<&str>| {
        let mut cmd = Command::new("curl");
        cmd.args(["-s", "--max-time", "5", "-X", "POST", "-d", body]);
        if let Some(t) = token {
            cmd.args(["-H", &format!("Authorization: {t}")]);
        }
        let out = cmd.arg(format!("{}{path}", s.url())).output().expect("curl");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("json")
    };
    let b64 = |s: &str| base64_encode(s.as_bytes());
    let auth = post("/v3/auth/authenticate", r#"{"name":"u","password":"pw"}"#, None);
    let token = auth["token"].as_str().expect("a token").to_string();
    let put = format!(r#"{{"key":"{}","value":"{}"}}"#, b64("/a/g"), b64("v"));
    let mut seen = Vec::new();
    let strip = |mut v: serde_json::Value| {
        // Headers differ between servers (IDs, terms); the rest must not.
        v.as_object_mut().map(|o| o.remove("header"));
        v.to_string()
    };
    seen.push(strip(post("/v3/kv/put", &put, Some(&token))));
    seen.push(strip(post("/v3/kv/put", &put, None)));
    seen.push(strip(post("/v3/kv/put", &put, Some("bogus.1"))));
    let other = format!(r#"{{"key":"{}","value":"{}"}}"#, b64("/b"), b64("v"));
    seen.push(strip(post("/v3/kv/put", &other, Some(&token))));
    let bad = post("/v3/auth/authenticate", r#"{"name":"u","password":"no"}"#, None);
    seen.push(strip(bad));
    let root = post("/v3/auth/authenticate", r#"{"name":"root","password":"pw"}"#, None);
    let root = root["token"].as_str().expect("root token").to_string();
    seen.push(strip(post("/v3/auth/user/list", "{}", Some(&root))));
    seen.push(strip(post("/v3/auth/role/get", r#"{"role":"r"}"#, Some(&root))));
    seen.push(strip(post("/v3/auth/user/add", r#"{"name":"w","password":"x"}"#, Some(&root))));
    seen.push(strip(post("/v3/auth/user/grant", r#"{"user":"w","role":"r"}"#, Some(&root))));
    seen.push(strip(post("/v3/auth/user/get", r#"{"name":"w"}"#, Some(&root))));
    seen.push(strip(post("/v3/auth/user/list", "{}", Some(&token))));
    // Streams and the Lock service: a snapshot needs root (the refusal is the stream's error
    // line), a lock needs write on its name (the Lock service's errors have code Unknown), a
    // watch outside the user's range is created canceled.
    seen.push(strip(post("/v3/maintenance/snapshot", "{}", Some(&token))));
    seen.push(strip(post("/v3/lock/lock", &format!(r#"{{"name":"{}"}}"#, b64("/b")), Some(&token))));
    seen.push(strip(post("/v3/lock/lock", &format!(r#"{{"name":"{}"}}"#, b64("/b")), None)));
    let watch = format!(r#"{{"create_request":{{"key":"{}"}}}}"#, b64("/b"));
    let mut refused = post("/v3/watch", &watch, Some(&token));
    refused["result"].as_object_mut().map(|o| o.remove("header"));
    seen.push(refused.to_string());
    // With auth on, /health reads without a user; etcd counts "user name is empty" as healthy.
    let health = Command::new("curl").args(["-s", "--max-time", "5"]).arg(format!("{}/health", s.url())).output();
    seen.push(String::from_utf8_lossy(&health.expect("curl").stdout).to_string());
    seen.push(strip(post("/v3/auth/disable", "{}", Some(&root))));
    seen
}

fn base64_encode(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_gateway_auth_matches_etcd() {
    let etcd = same_on_both(gateway).await;
    assert!(etcd[1].contains("user name is empty"), "{etcd:?}");
    assert!(etcd[11].contains(r#""grpc_code":2"#) && etcd[11].contains("permission denied"), "{etcd:?}");
    assert!(etcd[12].contains(r#""code":2"#), "{etcd:?}");
    assert!(etcd[14].contains(r#""canceled":true"#), "{etcd:?}");
    assert_eq!(etcd[15], r#"{"health":"true"}"#, "{etcd:?}");
}

/// JWT tokens (`--auth-token jwt,...`) and, with `--client-cert-auth`, the client
/// certificate's common name as the user when no token is given; the same steps on both
/// servers give the same outcomes.
async fn jwt_and_certificate_users(target: Target) -> Vec<String> {
    use crate::tls::{ca, cert, etcdctl};
    let pki = tempfile::tempdir().expect("tempdir");
    let d = pki.path();
    crate::harness::openssl(d, &["genrsa", "-out", "jwt.key", "2048"]);
    crate::harness::openssl(d, &["rsa", "-in", "jwt.key", "-pubout", "-out", "jwt.pub"]);
    ca(d, "ca");
    for name in ["server", "u", "root", "nobody"] {
        cert(d, "ca", name);
    }
    let path = |f: &str| d.join(f).display().to_string();
    let https = format!("https://127.0.0.1:{}", crate::harness::free_port());
    let flags = vec![
        format!("--cert-file={}", path("server.crt")),
        format!("--key-file={}", path("server.key")),
        format!("--trusted-ca-file={}", path("ca.crt")),
        "--client-cert-auth".to_string(),
        format!("--auth-token=jwt,pub-key={},priv-key={},sign-method=RS256,ttl=5m", path("jwt.pub"), path("jwt.key")),
    ];
    let s = Server::start_args(target, &flags, std::slice::from_ref(&https)).await;
    enable(&s);
    let as_cert = |name: &str, args: &[&str]| {
        let tls = [
            format!("--cacert={}", path("ca.crt")),
            format!("--cert={}", path(&format!("{name}.crt"))),
            format!("--key={}", path(&format!("{name}.key"))),
        ];
        outcome(&etcdctl(d, &https, &tls, args))
    };
    let mut seen = vec![
        outcome(&s.etcdctl(&["--user=u:pw", "put", "/a/jwt", "1"])),
        outcome(&s.etcdctl(&["--user=u:pw", "put", "/b", "1"])),
        as_cert("u", &["put", "/a/cn", "2"]),
        as_cert("u", &["get", "/b"]),
        as_cert("nobody", &["get", "/a/cn"]),
        as_cert("root", &["get", "/a/", "--prefix", "--keys-only"]),
        // A token wins over the certificate.
        as_cert("root", &["--user=u:pw", "get", "/b"]),
    ];
    // The token is a JWT (three parts), accepted by the member that signed it.
    let client = s.client().await;
    let token =
        client.auth_client().authenticate("u".into(), "pw".into()).await.expect("authenticate").token().to_string();
    seen.push(format!("parts {}", token.split('.').count()));
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_tokens_and_certificate_users_match_etcd() {
    let etcd = same_on_both(jwt_and_certificate_users).await;
    assert_eq!(etcd[0], "OK\n");
    assert!(etcd[1].contains("permission denied"), "{etcd:?}");
    assert_eq!(etcd[2], "OK\n", "{etcd:?}");
    assert_eq!(etcd[7], "parts 3");
}

/// Lock and Election check the caller's permissions on `<name>/`, then work on its behalf.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_needs_permission_on_its_name() {
    for target in [Target::Ballast, Target::Etcd] {
        let s = Server::start(target).await;
        enable(&s);
        // `etcdctl lock` waits for the lock without a deadline of its own: bounded from outside.
        let lock = |name: &str| {
            Command::new("timeout")
                .args(["10", "etcdctl", &format!("--endpoints={}", s.endpoint()), "--user=u:pw", "lock", name])
                .args(["echo", "held"])
                .env("ETCDCTL_API", "3")
                .output()
                .expect("etcdctl lock")
        };
        let out = lock("/a/l");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "held\n", "{target:?}");
        let denied = lock("/b");
        assert!(!denied.status.success(), "{target:?}");
        assert!(String::from_utf8_lossy(&denied.stderr).contains("etcdserver: permission denied"), "{target:?}");
    }
}
