//! The client port with TLS (`--cert-file`, `--key-file`, `--trusted-ca-file`,
//! `--client-cert-auth`, `https://` listen URLs) and on Unix sockets (plain and `unixs://`), through etcdctl and
//! curl, against both servers: the same session works, a client certificate from another CA
//! or none at all is refused.

use std::path::Path;
use std::process::{Command, Output};

use crate::harness::{fails, free_port, ok, openssl, Server, Target};

/// Makes a CA `<ca>.crt/.key` in `dir`.
pub(crate) fn ca(dir: &Path, ca: &str) {
    let (key, crt, subj) = (format!("{ca}.key"), format!("{ca}.crt"), format!("/CN={ca}"));
    openssl(
        dir,
        &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &crt, "-days", "2", "-subj", &subj],
    );
}

/// Makes `<name>.crt/.key` in `dir`, signed by CA `ca`, valid for 127.0.0.1.
pub(crate) fn cert(dir: &Path, ca: &str, name: &str) {
    let (key, csr, crt, subj) =
        (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"), format!("/CN={name}"));
    openssl(dir, &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", &subj]);
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .expect("ext");
    let (ca_crt, ca_key) = (format!("{ca}.crt"), format!("{ca}.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
            "-extfile",
            "ext",
        ],
    );
}

/// Runs etcdctl in `dir` against `endpoint` with the TLS flags `tls`.
pub(crate) fn etcdctl(dir: &Path, endpoint: &str, tls: &[String], args: &[&str]) -> Output {
    Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .current_dir(dir)
        .arg(format!("--endpoints={endpoint}"))
        .arg("--command-timeout=5s")
        .arg("--dial-timeout=3s")
        .args(tls)
        .args(args)
        .output()
        .expect("etcdctl")
}

async fn client_tls(target: Target) {
    let pki = tempfile::tempdir().expect("tempdir");
    let d = pki.path();
    ca(d, "ca");
    cert(d, "ca", "server");
    cert(d, "ca", "client");
    ca(d, "other");
    cert(d, "other", "stranger");
    let path = |f: &str| d.join(f).display().to_string();
    let port = free_port();
    let https = format!("https://127.0.0.1:{port}");
    let unix = format!("unix://localhost:{}", free_port());
    let unixs = format!("unixs://localhost:{}", free_port());
    let flags = vec![
        format!("--cert-file={}", path("server.crt")),
        format!("--key-file={}", path("server.key")),
        format!("--trusted-ca-file={}", path("ca.crt")),
        "--client-cert-auth".to_string(),
    ];
    let s = Server::start_args(target, &flags, &[https.clone(), unix.clone(), unixs.clone()]).await;
    let with = |name: &str| {
        vec![
            format!("--cacert={}", path("ca.crt")),
            format!("--cert={}", path(&format!("{name}.crt"))),
            format!("--key={}", path(&format!("{name}.key"))),
        ]
    };
    let client = with("client");
    assert_eq!(ok(&etcdctl(d, &https, &client, &["put", "k", "v"])), "OK\n");
    assert_eq!(ok(&etcdctl(d, &https, &client, &["get", "k", "--print-value-only"])), "v\n");
    let status = ok(&etcdctl(d, &https, &client, &["endpoint", "status"]));
    assert!(status.starts_with(&https), "{status}");
    fails(&etcdctl(d, &https, &with("stranger"), &["get", "k"]));
    fails(&etcdctl(d, &https, &[format!("--cacert={}", path("ca.crt"))], &["get", "k"]));
    let curl = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "5",
            "--cacert",
            &path("ca.crt"),
            "--cert",
            &path("client.crt"),
            "--key",
            &path("client.key"),
        ])
        .arg(format!("{https}/health"))
        .output()
        .expect("curl");
    let health: serde_json::Value = serde_json::from_slice(&curl.stdout).expect("health json");
    assert_eq!(health["health"], "true");
    // The Unix socket: `unix://host:port` is a socket file of that name in the server's
    // directory, as etcd makes it.
    assert_eq!(ok(&etcdctl(s.dir(), &unix, &[], &["get", "k", "--print-value-only"])), "v\n");
    // TLS over a Unix socket (`unixs://`), with the same certificate rules as https.
    assert_eq!(ok(&etcdctl(s.dir(), &unixs, &client, &["get", "k", "--print-value-only"])), "v\n");
    fails(&etcdctl(s.dir(), &unixs, &with("stranger"), &["get", "k"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_tls_and_unix_socket() {
    for target in [Target::Ballast, Target::Etcd] {
        client_tls(target).await;
    }
}
