//! ServiceAccount tokens, TokenReview and request-header authentication through real clients:
//! `kubectl create token`, then `kubectl auth whoami` and `kubectl get` with the token (RBAC
//! allowing and forbidding), tokens dying with their service account and bound pod, forged,
//! expired and wrong-audience tokens refused 401, TokenReview and SubjectAccessReview sent as
//! an extension server sends them, OIDC discovery verifying a token, and identities from a
//! front proxy's certificate and `X-Remote-*` headers.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{both_backends, in_memory, Backend, Cluster, Credentials, Options, BOB_TOKEN};
use ballast_apiserver::authn::service_account::keys::SigningKey;
use ballast_apiserver::authn::service_account::{Claims, KubernetesClaims, ObjectRef, TokenIssuer};

const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const JSON: Option<&str> = Some("application/json");

/// Runs kubectl with nothing but the server, its CA and `token` (the admin kubeconfig's client
/// certificate would otherwise win).
async fn kubectl_as(c: &Cluster, token: &str, args: &[&str]) -> (bool, String, String) {
    let ca = c.dir().join("serving-ca.crt");
    std::fs::write(&ca, c.ca_pem()).expect("ca file");
    std::fs::write(c.dir().join("empty.kubeconfig"), "apiVersion: v1\nkind: Config\n").expect("kubeconfig");
    let child = crate::harness::kubectl_process(crate::harness::kubectl_binary(), c.dir())
        .arg("--kubeconfig")
        .arg(c.dir().join("empty.kubeconfig"))
        .arg(format!("--server=https://{}", c.addr))
        .arg(format!("--certificate-authority={}", ca.display()))
        .arg(format!("--token={token}"))
        .arg("--cache-dir")
        .arg(c.dir().join("token-cache"))
        .args(args)
        .spawn()
        .expect("spawn kubectl");
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("kubectl within 60 s")
        .expect("kubectl runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// The claims of a JWT (unverified).
fn payload(token: &str) -> Value {
    use base64::Engine as _;
    let part = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).expect("base64url");
    serde_json::from_slice(&bytes).expect("claims JSON")
}

async fn whoami(c: &Cluster, token: &str) -> Result<Value, String> {
    match kubectl_as(c, token, &["auth", "whoami", "-o", "json"]).await {
        (true, stdout, _) => Ok(serde_json::from_str(&stdout).expect("whoami json")),
        (false, _, stderr) => Err(stderr),
    }
}

/// Binds the aggregated `view` ClusterRole to the service account `team:bot` in `team`.
async fn let_team_bot_view(c: &Cluster) {
    c.must_post(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "bot-view", "namespace": "team"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "team"}],
    }))
    .await;
}

fn pod(name: &str, account: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team"},
           "spec": {"serviceAccountName": account, "containers": [{"name": "c", "image": "busybox"}]}})
}

async fn kubectl_service_account_tokens(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.create_namespace("team").await;
    c.create_service_account("team", "bot").await;
    let token = c
        .must_kubectl(&["create", "token", "bot", "-n", "team", "--audience", ISSUER, "--duration", "15m"])
        .await
        .trim()
        .to_string();
    let me = whoami(&c, &token).await.expect("the token authenticates");
    let info = &me["status"]["userInfo"];
    assert_eq!(info["username"], "system:serviceaccount:team:bot");
    assert_eq!(
        info["groups"],
        json!(["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"])
    );
    let sa: Value = serde_json::from_str(&c.must_kubectl(&["get", "sa", "bot", "-n", "team", "-o", "json"]).await)
        .expect("sa json");
    assert_eq!(info["uid"], sa["metadata"]["uid"]);
    assert!(info["extra"]["authentication.kubernetes.io/credential-id"][0]
        .as_str()
        .is_some_and(|c| c.starts_with("JTI=")));

    // RBAC decides what the account may do: nothing in the namespace, then what view allows.
    let (ok, _, stderr) = kubectl_as(&c, &token, &["get", "configmaps", "-n", "team"]).await;
    assert!(!ok && stderr.contains("cannot list resource \"configmaps\""), "{stderr}");
    let_team_bot_view(&c).await;
    let (ok, _, stderr) = kubectl_as(&c, &token, &["get", "configmaps", "-n", "team"]).await;
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = kubectl_as(&c, &token, &["create", "configmap", "x", "-n", "team"]).await;
    assert!(!ok && stderr.contains("forbidden"), "{stderr}");

    // Bound to a pod that runs as the account: the pod's name and uid are in the identity, and
    // the token dies with the pod.
    c.must_post(&pod("web", "bot")).await;
    let bound = c
        .must_kubectl(&["create", "token", "bot", "-n", "team", "--bound-object-kind=Pod", "--bound-object-name=web"])
        .await
        .trim()
        .to_string();
    let me = whoami(&c, &bound).await.expect("the bound token authenticates");
    assert_eq!(me["status"]["userInfo"]["extra"]["authentication.kubernetes.io/pod-name"], json!(["web"]));
    // kubelet's projected-token request (3607 s, bound to the pod) gets a year-long token whose
    // warnafter is the hour asked for; the same lifetime unbound is not extended.
    let projected = ["create", "token", "bot", "-n", "team", "--bound-object-kind=Pod", "--bound-object-name=web"];
    let extended = c.must_kubectl(&[&projected[..], &["--duration=3607s"]].concat()).await;
    let claims = payload(extended.trim());
    let iat = claims["iat"].as_i64().expect("iat");
    assert_eq!(claims["exp"].as_i64(), Some(iat + 365 * 24 * 3600), "{claims}");
    assert_eq!(claims["kubernetes.io"]["warnafter"].as_i64(), Some(iat + 3607), "{claims}");
    assert!(whoami(&c, extended.trim()).await.is_ok(), "the extended token authenticates");
    let unbound = c.must_kubectl(&["create", "token", "bot", "-n", "team", "--duration=3607s"]).await;
    let claims = payload(unbound.trim());
    assert_eq!(claims["exp"].as_i64(), claims["iat"].as_i64().map(|iat| iat + 3607), "{claims}");
    assert!(claims["kubernetes.io"].get("warnafter").is_none(), "{claims}");
    c.must_kubectl(&["delete", "pod", "web", "-n", "team", "--grace-period=0", "--force"]).await;
    let refused = whoami(&c, &bound).await.expect_err("the pod is gone");
    assert!(refused.contains("Unauthorized") || refused.contains("must be logged in"), "{refused}");
    // A pod running as another account cannot carry this account's token.
    c.create_service_account("team", "other").await;
    c.must_post(&pod("db", "other")).await;
    let out =
        c.kubectl(&["create", "token", "bot", "-n", "team", "--bound-object-kind=Pod", "--bound-object-name=db"]).await;
    assert!(
        out.stderr.contains(r#"cannot bind token for serviceaccount "bot" to pod running with serviceaccount "other""#),
        "{}",
        out.stderr
    );

    // Lifetimes out of kube's bounds are refused with kube's message.
    let out = c.kubectl(&["create", "token", "bot", "-n", "team", "--duration", "1m"]).await;
    assert!(
        out.stderr
            .contains("spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"),
        "{}",
        out.stderr
    );
    let out = c.kubectl(&["create", "token", "ghost", "-n", "team"]).await;
    assert!(out.stderr.contains(r#"serviceaccounts "ghost" not found"#), "{}", out.stderr);

    // Deleting and recreating the account (a new uid) invalidates its tokens.
    let r = c.request(Credentials::Admin, "DELETE", "/api/v1/namespaces/team/serviceaccounts/bot", None, "").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    c.create_service_account("team", "bot").await;
    assert!(whoami(&c, &token).await.is_err(), "a token of the old account");
}

/// A frontend signing with an RSA key made by openssl (kubeadm's kind of key).
async fn with_rsa_key(backend: Backend) -> (Cluster, String) {
    with_openssl_key(backend, &["genrsa", "-traditional", "-out", "{}", "2048"], "RSA PRIVATE KEY").await
}

/// A frontend signing with a key openssl writes with `args` (`{}` is the file), whose PEM
/// block is labelled `label`.
async fn with_openssl_key(backend: Backend, args: &[&str], label: &str) -> (Cluster, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("sa.key");
    let status = std::process::Command::new("openssl")
        .args(args.iter().map(|a| if *a == "{}" { key.as_os_str() } else { std::ffi::OsStr::new(a) }))
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(status.success(), "openssl {args:?}");
    let pem = std::fs::read_to_string(&key).expect("key");
    assert!(pem.starts_with(&format!("-----BEGIN {label}-----")), "{pem}");
    let key_path = key.clone();
    let c = Cluster::start_with(Options {
        backend: Some(backend),
        configure: Some(Box::new(move |config, _| {
            config.service_accounts.signing_key_file = Some(key_path);
        })),
        ..Options::default()
    })
    .await;
    drop(dir);
    (c, pem)
}

/// A SEC1 key (`openssl ecparam -genkey`, the `EC PRIVATE KEY` block) signs the tokens
/// `kubectl create token` gets, ES256 with the key ID of its public half, and they authenticate.
async fn sec1_signing_key(backend: Backend) {
    let args = ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "{}"];
    let (c, pem) = with_openssl_key(backend, &args, "EC PRIVATE KEY").await;
    c.create_service_account("default", "bot").await;
    let token = c.must_kubectl(&["create", "token", "bot"]).await.trim().to_string();
    let header = jsonwebtoken::decode_header(&token).expect("a JWT");
    assert_eq!(header.alg, jsonwebtoken::Algorithm::ES256);
    let public = SigningKey::from_pem(pem.as_bytes()).expect("SEC1 key");
    assert_eq!(header.kid.as_deref(), Some(public.public().kid.as_str()));
    let me = whoami(&c, &token).await.expect("the token authenticates");
    assert_eq!(me["status"]["userInfo"]["username"], "system:serviceaccount:default:bot");
}

fn claims(exp_from_now: i64, aud: &str, sa_uid: &str) -> Claims {
    let now = ballast_apimachinery::clock::unix_now();
    Claims {
        aud: vec![aud.into()],
        exp: Some(now + exp_from_now),
        iat: Some(now - 7200),
        nbf: Some(now - 7200),
        sub: "system:serviceaccount:default:bot".into(),
        kubernetes: Some(KubernetesClaims {
            namespace: "default".into(),
            serviceaccount: ObjectRef { name: "bot".into(), uid: sa_uid.into() },
            ..KubernetesClaims::default()
        }),
        ..Claims::default()
    }
}

async fn post_token_review(c: &Cluster, as_: Credentials<'_>, token: &str, audiences: &[&str]) -> (u16, Value) {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                      "spec": {"token": token, "audiences": audiences}});
    let r = c.request(as_, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", JSON, body.to_string()).await;
    (r.status, r.json())
}

async fn bad_tokens_are_refused(backend: Backend) {
    let (c, pem) = with_rsa_key(backend).await;
    let sa = c.create_service_account("default", "bot").await;
    let uid = sa["metadata"]["uid"].as_str().expect("uid").to_string();
    let issuer = TokenIssuer::new(ISSUER, SigningKey::from_pem(pem.as_bytes()).expect("rsa key"));
    let good = issuer.sign(claims(3600, ISSUER, &uid)).expect("sign");
    assert_eq!(c.request(Credentials::Token(&good), "GET", "/api/v1/namespaces", None, "").await.status, 403);

    let expired = issuer.sign(claims(-3600, ISSUER, &uid)).expect("sign");
    let wrong_audience = issuer.sign(claims(3600, "vault", &uid)).expect("sign");
    let mut tampered = good.clone();
    tampered.insert_str(tampered.rfind('.').expect("signature") + 1, "AAAA");
    let (other_key, _) = SigningKey::generate().expect("key");
    let foreign = TokenIssuer::new(ISSUER, other_key).sign(claims(3600, ISSUER, &uid)).expect("sign");
    for token in [&expired, &wrong_audience, &tampered, &foreign] {
        let r = c.request(Credentials::Token(token), "GET", "/api/v1/namespaces", None, "").await;
        assert_eq!(r.status, 401, "{}", String::from_utf8_lossy(&r.body));
        let status = r.json();
        assert_eq!(
            (status["reason"].as_str(), status["message"].as_str()),
            (Some("Unauthorized"), Some("Unauthorized"))
        );
    }

    // TokenReview says why, in kube's words (the admin may create reviews).
    let (code, r) = post_token_review(&c, Credentials::Admin, &expired, &[]).await;
    assert_eq!((code, &r["status"]["error"]), (201, &json!("service account token has expired")));
    assert!(r["status"].get("authenticated").is_none(), "{r}");
    let (_, r) = post_token_review(&c, Credentials::Admin, &wrong_audience, &[]).await;
    assert_eq!(
        r["status"]["error"],
        format!(r#"token audiences ["vault"] is invalid for the target audiences ["{ISSUER}"]"#)
    );
    let (_, r) = post_token_review(&c, Credentials::Admin, &tampered, &[]).await;
    assert_eq!(r["status"]["error"], "go-jose/go-jose: error in cryptographic primitive");
    let (_, r) = post_token_review(&c, Credentials::Admin, "not-a-token", &[]).await;
    assert_eq!(r["status"]["error"], "invalid bearer token");
    // The wrong-audience token is good for the audience it names, when a review asks for it.
    let (_, r) = post_token_review(&c, Credentials::Admin, &wrong_audience, &["vault"]).await;
    assert_eq!((r["status"]["authenticated"].as_bool(), &r["status"]["audiences"]), (Some(true), &json!(["vault"])));
    // Static tokens are reviewed too, for the API audiences.
    let (_, r) = post_token_review(&c, Credentials::Admin, BOB_TOKEN, &[]).await;
    assert_eq!(r["status"]["user"]["username"], "bob");
    let r = c
        .request(Credentials::Admin, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", JSON, r#"{"spec":{}}"#)
        .await;
    assert_eq!(
        (r.status, r.json()["message"].as_str()),
        (400, Some("token is required for TokenReview in authentication"))
    );
}

/// An extension server's identity (a service account bound to `system:auth-delegator` and to
/// the authentication-reader Role) reviews tokens and access as kube's delegating
/// authenticator and authorizer do, and reads the published trust ConfigMap.
async fn extension_server_reviews(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.create_namespace("team").await;
    for (ns, name) in [("kube-system", "metrics"), ("team", "bot")] {
        c.create_service_account(ns, name).await;
    }
    let ext = c.must_kubectl(&["create", "token", "metrics", "-n", "kube-system"]).await.trim().to_string();
    let bot = c.must_kubectl(&["create", "token", "bot", "-n", "team"]).await.trim().to_string();
    // Not yet delegated: 403.
    let (code, _) = post_token_review(&c, Credentials::Token(&ext), &bot, &[]).await;
    assert_eq!(code, 403);
    c.must_kubectl(&[
        "create",
        "clusterrolebinding",
        "metrics:system:auth-delegator",
        "--clusterrole=system:auth-delegator",
        "--serviceaccount=kube-system:metrics",
    ])
    .await;
    c.must_kubectl(&[
        "create",
        "rolebinding",
        "metrics-auth-reader",
        "-n",
        "kube-system",
        "--role=extension-apiserver-authentication-reader",
        "--serviceaccount=kube-system:metrics",
    ])
    .await;
    let (code, r) = post_token_review(&c, Credentials::Token(&ext), &bot, &[]).await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(r["status"]["authenticated"], true);
    assert_eq!(r["status"]["user"]["username"], "system:serviceaccount:team:bot");
    assert_eq!(r["status"]["audiences"], json!([ISSUER]));
    // The caller being reviewed may not review.
    assert_eq!(post_token_review(&c, Credentials::Token(&bot), &ext, &[]).await.0, 403);

    // The SubjectAccessReview kube's delegating authorizer sends for the reviewed user.
    let user = &r["status"]["user"];
    let sar = |verb: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "resourceAttributes": {"namespace": "team", "verb": verb, "group": "", "version": "v1", "resource": "configmaps"},
            "user": user["username"], "groups": user["groups"], "extra": user["extra"], "uid": user["uid"]}})
        .to_string()
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let r = c.request(Credentials::Token(&ext), "POST", path, JSON, sar("list")).await;
    assert_eq!((r.status, &r.json()["status"]["allowed"]), (201, &json!(false)));
    let_team_bot_view(&c).await;
    let r = c.request(Credentials::Token(&ext), "POST", path, JSON, sar("list")).await;
    let status = r.json()["status"].clone();
    assert_eq!(status["allowed"], true, "{status}");
    assert!(status["reason"].as_str().is_some_and(|r| r.contains("bot-view")), "{status}");

    // The trust ConfigMap, readable through the reader Role, and nothing else in kube-system.
    let cm = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";
    let r = c.request(Credentials::Token(&ext), "GET", cm, None, "").await;
    assert_eq!(r.status, 200);
    assert!(r.json()["data"]["client-ca-file"].as_str().is_some_and(|ca| ca.contains("BEGIN CERTIFICATE")));
    let r = c.request(Credentials::Token(&ext), "GET", "/api/v1/namespaces/kube-system/configmaps", None, "").await;
    assert_eq!(r.status, 403);
}

async fn oidc_discovery_verifies_tokens(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.create_service_account("default", "bot").await;
    let token = c.must_kubectl(&["create", "token", "bot"]).await.trim().to_string();
    // Anonymous callers may not read the documents; service accounts may.
    let r = c.request(Credentials::None, "GET", "/.well-known/openid-configuration", None, "").await;
    assert_eq!(r.status, 403);
    let r = c.request(Credentials::Token(&token), "GET", "/.well-known/openid-configuration", None, "").await;
    assert_eq!(r.status, 200);
    let config = r.json();
    assert_eq!(config["issuer"], ISSUER);
    assert_eq!(config["jwks_uri"], format!("{ISSUER}/openid/v1/jwks"));
    assert_eq!(config["id_token_signing_alg_values_supported"], json!(["ES256"]));
    let r = c.request(Credentials::Token(&token), "GET", "/openid/v1/jwks", None, "").await;
    assert_eq!(r.headers["content-type"], "application/jwk-set+json");
    assert_eq!(r.headers["cache-control"], "public, max-age=3600");
    let set: jsonwebtoken::jwk::JwkSet = serde_json::from_slice(&r.body).expect("a JWK set");
    let kid = jsonwebtoken::decode_header(&token).expect("header").kid.expect("kid");
    let jwk = set.find(&kid).expect("the token's key is published");
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk).expect("decoding key");
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_audience(&[ISSUER]);
    validation.set_issuer(&[ISSUER]);
    let data = jsonwebtoken::decode::<Value>(&token, &key, &validation).expect("the token verifies");
    assert_eq!(data.claims["sub"], "system:serviceaccount:default:bot");
    assert_eq!(data.claims["kubernetes.io"]["serviceaccount"]["name"], "bot");
    assert!(data.claims["jti"].is_string());
}

/// `openssl req` / `x509` into `dir`: a CA and client certificates it signs.
fn openssl(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(status.success(), "openssl {args:?}");
}

/// `openssl req` for a new P-256 key `<name>.key` with subject CN `name`: a self-signed
/// certificate `<name>.crt` with `-x509`, else a request `<name>.csr`.
fn new_key(dir: &Path, name: &str, self_signed: bool) {
    let (key, subject) = (format!("{name}.key"), format!("/CN={name}"));
    let out = if self_signed { format!("{name}.crt") } else { format!("{name}.csr") };
    let mut args = vec!["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"];
    if self_signed {
        args.push("-x509");
    }
    args.extend(["-keyout", &key, "-out", &out, "-subj", &subject]);
    openssl(dir, &args);
}

fn client_cert(dir: &Path, cn: &str, ca: &str) -> (String, String) {
    new_key(dir, cn, false);
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").expect("ext");
    let (csr, ca_crt, ca_key, crt) =
        (format!("{cn}.csr"), format!("{ca}.crt"), format!("{ca}.key"), format!("{cn}.crt"));
    let args = ["x509", "-req", "-in", &csr, "-CA", &ca_crt, "-CAkey", &ca_key, "-CAcreateserial", "-days", "1"];
    openssl(dir, &[&args[..], &["-extfile", "client.ext", "-out", &crt]].concat());
    let read = |name: String| std::fs::read_to_string(dir.join(name)).expect("pem");
    (read(format!("{cn}.crt")), read(format!("{cn}.key")))
}

async fn self_review(c: &Cluster, creds: Credentials<'_>, headers: &[(&str, &str)]) -> crate::harness::RawResponse {
    let body = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
    let path = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    c.request_with_headers(creds, "POST", path, headers, JSON, body).await
}

async fn request_header_authentication(backend: Backend) {
    let pki = tempfile::tempdir().expect("tempdir");
    new_key(pki.path(), "front-proxy-ca", true);
    new_key(pki.path(), "other-ca", true);
    let proxy = client_cert(pki.path(), "front-proxy-client", "front-proxy-ca");
    let mallory = client_cert(pki.path(), "mallory", "front-proxy-ca");
    let stranger = client_cert(pki.path(), "front-proxy-client-2", "other-ca");
    let ca_file = pki.path().join("front-proxy-ca.crt");
    let c = Cluster::start_with(Options {
        backend: Some(backend),
        configure: Some(Box::new(move |config, _| {
            let mut files = ballast_frontend::RequestHeaderFiles::new(ca_file);
            files.allowed_names = vec!["front-proxy-client".into()];
            config.request_header = Some(files);
        })),
        ..Options::default()
    })
    .await;
    let headers = [
        ("X-Remote-User", "alice"),
        ("X-Remote-Uid", "u-7"),
        ("X-Remote-Group", "dev"),
        ("X-Remote-Group", "ops"),
        ("X-Remote-Extra-Scopes", "read"),
    ];
    let whoami = |creds| self_review(&c, creds, &headers);
    let r = whoami(Credentials::Cert(&proxy.0, &proxy.1)).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let info = &r.json()["status"]["userInfo"];
    assert_eq!((info["username"].as_str(), info["uid"].as_str()), (Some("alice"), Some("u-7")));
    assert_eq!(info["groups"], json!(["dev", "ops", "system:authenticated"]));
    assert_eq!(info["extra"]["scopes"], json!(["read"]));
    // A certificate of the right CA with a name not allowed, or of another CA: not trusted.
    assert_eq!(whoami(Credentials::Cert(&mallory.0, &mallory.1)).await.status, 401);
    assert_eq!(whoami(Credentials::Cert(&stranger.0, &stranger.1)).await.status, 401);
    // Without a proxy certificate the headers are ignored: the token's user it is.
    let r = whoami(Credentials::Token(BOB_TOKEN)).await;
    assert_eq!(r.json()["status"]["userInfo"]["username"], "bob");
    let r = whoami(Credentials::None).await;
    assert_eq!(r.status, 403);
    assert!(r.json()["message"].as_str().is_some_and(|m| m.contains("system:anonymous")), "{}", r.json());

    // The published ConfigMap carries the request-header settings as kube-apiserver writes them.
    let cm: Value = serde_json::from_str(
        &c.must_kubectl(&["get", "cm", "extension-apiserver-authentication", "-n", "kube-system", "-o", "json"]).await,
    )
    .expect("configmap json");
    let data = &cm["data"];
    assert_eq!(data["requestheader-allowed-names"], r#"["front-proxy-client"]"#);
    assert_eq!(data["requestheader-username-headers"], r#"["X-Remote-User"]"#);
    assert_eq!(data["requestheader-group-headers"], r#"["X-Remote-Group"]"#);
    assert_eq!(data["requestheader-extra-headers-prefix"], r#"["X-Remote-Extra-"]"#);
    assert_eq!(data["requestheader-uid-headers"], r#"["X-Remote-Uid"]"#);
    let front_proxy_ca = std::fs::read_to_string(pki.path().join("front-proxy-ca.crt")).expect("ca");
    assert_eq!(data["requestheader-client-ca-file"].as_str().map(str::trim), Some(front_proxy_ca.trim()));
    assert!(data["client-ca-file"].as_str().is_some_and(|ca| ca.trim() == c.ca_pem().trim()));
}

both_backends!(kubectl_service_account_tokens, extension_server_reviews);
in_memory!(bad_tokens_are_refused, oidc_discovery_verifies_tokens, request_header_authentication, sec1_signing_key);
