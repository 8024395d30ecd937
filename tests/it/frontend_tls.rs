//! kube-apiserver's etcd client flags on `ballast frontend`: `--etcd-cafile`,
//! `--etcd-certfile`, `--etcd-keyfile` with `https://` `--etcd-servers`, against a server that
//! requires client certificates (`--client-cert-auth`), and `--etcd-prefix`: kubectl works, and
//! the objects are stored under the prefix. The same test body runs on the engine and on stock
//! etcd.

use crate::cluster_frontend::Frontend;
use crate::harness::{free_port, ok, Server, Target};
use crate::tls::{ca, cert, etcdctl};

async fn frontend_over_tls(target: Target) {
    let pki = tempfile::tempdir().expect("tempdir");
    let d = pki.path();
    ca(d, "ca");
    cert(d, "ca", "server");
    cert(d, "ca", "client");
    let path = |f: &str| d.join(f).display().to_string();
    let https = format!("https://127.0.0.1:{}", free_port());
    let flags = vec![
        format!("--cert-file={}", path("server.crt")),
        format!("--key-file={}", path("server.key")),
        format!("--trusted-ca-file={}", path("ca.crt")),
        "--client-cert-auth".to_string(),
    ];
    let _server = Server::start_args(target, &flags, std::slice::from_ref(&https)).await;
    let frontend = Frontend::start_args(
        &https,
        &[
            format!("--etcd-cafile={}", path("ca.crt")),
            format!("--etcd-certfile={}", path("client.crt")),
            format!("--etcd-keyfile={}", path("client.key")),
            "--etcd-prefix=/tenant-a".to_string(),
        ],
    )
    .await;
    let (created, _, err) = frontend.kubectl(&["--request-timeout=10s", "create", "configmap", "over-tls"]);
    assert!(created, "{target:?}: {err}\n{}", frontend.log());
    let (got, out, err) = frontend.kubectl(&["get", "configmap", "over-tls", "-o", "name"]);
    assert!(got, "{target:?}: {err}");
    assert_eq!(out, "configmap/over-tls\n");
    // The object is under the prefix, and nothing is under kube's default one.
    let client = vec![
        format!("--cacert={}", path("ca.crt")),
        format!("--cert={}", path("client.crt")),
        format!("--key={}", path("client.key")),
    ];
    let keys = ok(&etcdctl(d, &https, &client, &["get", "/tenant-a/configmaps/default/", "--prefix", "--keys-only"]));
    assert_eq!(keys.trim(), "/tenant-a/configmaps/default/over-tls", "{target:?}");
    let none = ok(&etcdctl(d, &https, &client, &["get", "/registry/", "--prefix", "--keys-only"]));
    assert_eq!(none, "", "{target:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frontend_with_etcd_client_tls_and_prefix() {
    for target in [Target::Ballast, Target::Etcd] {
        Box::pin(frontend_over_tls(target)).await;
    }
}
