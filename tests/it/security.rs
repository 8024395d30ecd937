//! The security review's findings replayed against `ballast serve` (real process, real
//! clients: curl, openssl s_client, etcdctl): connections that never close, unbounded work per
//! request, metadata kube refuses, and writes over the store's limit.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::Server;
use crate::kubectl_session::Serve;

both_targets!(oversize_grpc_messages_are_resource_exhausted, client_ping_floods_get_goaway_too_many_pings);

/// A request message over `--max-request-bytes` plus gRPC's overhead is refused as etcd's gRPC
/// server refuses it: ResourceExhausted, grpc-go's text.
async fn oversize_grpc_messages_are_resource_exhausted(s: Server) {
    let mut c = s.client().await;
    let err = c.put("big", vec![b'x'; 3 << 20], None).await.expect_err("a 3 MiB put is refused");
    let etcd_client::Error::GRpcStatus(status) = err else { panic!("not a gRPC status: {err}") };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().starts_with("grpc: received message larger than max ("), "{}", status.message());
}

/// A raw HTTP/2 connection to the client port, frame by frame.
struct RawH2 {
    conn: tokio::net::TcpStream,
}

/// What ended a raw connection: a GOAWAY's error code and debug data, or the end of the stream.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    GoAway(u32, String),
    Closed,
}

impl RawH2 {
    const PING: u8 = 0x6;
    const GOAWAY: u8 = 0x7;

    /// Connects, sends the preface and SETTINGS, and acknowledges the server's SETTINGS.
    async fn open(s: &Server) -> RawH2 {
        let conn = tokio::net::TcpStream::connect(s.endpoint()).await.expect("connect");
        let mut h2 = RawH2 { conn };
        h2.send(&[b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".as_slice(), &Self::frame(0x4, 0, 0, &[])].concat()).await;
        loop {
            let (kind, flags, _, _) = h2.next().await.expect("the server's SETTINGS");
            if kind == 0x4 && flags & 1 == 0 {
                break;
            }
        }
        h2.send(&Self::frame(0x4, 1, 0, &[])).await;
        h2
    }

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = u32::try_from(payload.len()).expect("small frame").to_be_bytes();
        [&len[1..], &[kind, flags], &stream.to_be_bytes(), payload].concat()
    }

    async fn send(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.conn.write_all(bytes).await.expect("write to the server");
    }

    /// Opens a Watch stream (its request never ends, so the stream stays open).
    async fn open_watch_stream(&mut self) {
        // HPACK: `:method POST` and `:scheme http` indexed, the rest literals without indexing.
        let mut block = vec![0x83, 0x86];
        for (index, value) in [(4u8, "/etcdserverpb.Watch/Watch"), (1, "localhost")] {
            block.extend_from_slice(&[index, u8::try_from(value.len()).expect("short")]);
            block.extend_from_slice(value.as_bytes());
        }
        for (name, value) in [("content-type", "application/grpc"), ("te", "trailers")] {
            block.push(0);
            block.push(u8::try_from(name.len()).expect("short"));
            block.extend_from_slice(name.as_bytes());
            block.push(u8::try_from(value.len()).expect("short"));
            block.extend_from_slice(value.as_bytes());
        }
        self.send(&Self::frame(0x1, 0x4, 1, &block)).await;
    }

    async fn ping(&mut self, n: u8) {
        self.send(&Self::frame(Self::PING, 0, 0, &[n; 8])).await;
    }

    /// The next frame (type, flags, stream, payload); None at the end of the stream or after
    /// ten seconds of silence.
    async fn next(&mut self) -> Option<(u8, u8, u32, Vec<u8>)> {
        use tokio::io::AsyncReadExt;
        let read = async {
            let mut header = [0u8; 9];
            self.conn.read_exact(&mut header).await.ok()?;
            let len = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            let mut payload = vec![0; len];
            self.conn.read_exact(&mut payload).await.ok()?;
            let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]]);
            Some((header[3], header[4], stream, payload))
        };
        tokio::time::timeout(Duration::from_secs(10), read).await.ok().flatten()
    }

    /// Waits for the ACK of ping `n`; what ended the connection if it ended first.
    async fn acked(&mut self, n: u8) -> Result<(), Ended> {
        loop {
            match self.next().await {
                Some((Self::PING, 1, _, payload)) if payload == [n; 8] => return Ok(()),
                Some((Self::GOAWAY, _, _, payload)) => return Err(Self::goaway(&payload)),
                Some(_) => {}
                None => return Err(Ended::Closed),
            }
        }
    }

    /// Reads until the connection ends; what ended it.
    async fn ended(&mut self) -> Ended {
        loop {
            match self.next().await {
                Some((Self::GOAWAY, _, _, payload)) => return Self::goaway(&payload),
                Some(_) => {}
                None => return Ended::Closed,
            }
        }
    }

    fn goaway(payload: &[u8]) -> Ended {
        let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
        Ended::GoAway(code, String::from_utf8_lossy(&payload[8..]).into_owned())
    }
}

/// etcd's keepalive enforcement (`--grpc-keepalive-min-time`, 5 s; etcd permits no pings on a
/// connection without a stream more often than every two hours): a client that pings more often
/// is sent GOAWAY ENHANCE_YOUR_CALM (0xb) `too_many_pings` after its third strike, and pings
/// spaced as allowed on an open stream are answered.
async fn client_ping_floods_get_goaway_too_many_pings(s: Server) {
    let too_many = Ended::GoAway(0xb, "too_many_pings".into());
    // No stream open: four pings in a row.
    let mut h2 = RawH2::open(&s).await;
    for n in 0..4 {
        h2.ping(n).await;
    }
    assert_eq!(h2.ended().await, too_many, "no stream open");
    // A stream open: pings spaced by the minimum time are fine; four in a row are not.
    let mut h2 = RawH2::open(&s).await;
    h2.open_watch_stream().await;
    h2.ping(0).await;
    h2.acked(0).await.expect("the first ping is answered");
    tokio::time::sleep(Duration::from_secs(6)).await;
    h2.ping(1).await;
    h2.acked(1).await.expect("a ping after the minimum time is answered");
    for n in 2..6 {
        h2.ping(n).await;
    }
    assert_eq!(h2.ended().await, too_many, "a stream open");
}

/// Answers one HTTPS request to the Kubernetes API as the admin: (status, body).
fn curl(s: &Serve, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, String) {
    let pki = s.dir.path().join("data").join("pki");
    let file = s.dir.path().join("request.body");
    std::fs::write(&file, body).expect("request body file");
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "60", "-w", "\n%{http_code}", "-X", method])
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .args(["-H", &format!("Content-Type: {content_type}")])
        .arg("--data-binary")
        .arg(format!("@{}", file.display()))
        .arg(format!("https://127.0.0.1:{}{path}", s.secure))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// The Status's message and its causes' messages (a failed patch says why in its cause).
fn message(body: &str) -> String {
    let Ok(status) = serde_json::from_str::<serde_json::Value>(body) else { return body.to_string() };
    let causes = status["details"]["causes"].as_array().into_iter().flatten().filter_map(|c| c["message"].as_str());
    std::iter::once(status["message"].as_str().unwrap_or("")).chain(causes).collect::<Vec<_>>().join("; ")
}

/// Asserts a request is answered `status` with `text` in its Status message.
fn must_refuse(s: &Serve, method: &str, path: &str, content_type: &str, body: &[u8], status: u16, text: &str) {
    let (code, answer) = curl(s, method, path, content_type, body);
    let msg = message(&answer);
    assert_eq!(code, status, "{method} {path}: {msg}");
    assert!(msg.contains(text), "{method} {path}: {msg:?} lacks {text:?}");
}

/// An `openssl s_client` process, killed when dropped.
struct SClient(Child);

impl SClient {
    /// Waits until s_client exits (the server closed the connection); false after `bound`.
    fn exited_within(&mut self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        while Instant::now() < deadline {
            if self.0.try_wait().expect("s_client status").is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for SClient {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An `openssl s_client` connection that sends `first` (if anything) and then stays silent,
/// its standard input held open so only the server can end it.
struct Silent {
    client: SClient,
    _stdin: std::process::ChildStdin,
}

impl Silent {
    fn open(port: u16, alpn: &str, first: &[u8]) -> Silent {
        let mut child = Command::new("openssl")
            .args(["s_client", "-quiet", "-alpn", alpn, "-connect", &format!("127.0.0.1:{port}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn openssl s_client");
        let mut stdin = child.stdin.take().expect("s_client stdin");
        stdin.write_all(first).expect("write to s_client");
        stdin.flush().expect("flush s_client");
        Silent { client: SClient(child), _stdin: stdin }
    }

    /// Waits until the server closed the connection; false after `bound`.
    fn closed_within(&mut self, bound: Duration) -> bool {
        self.client.exited_within(bound)
    }
}

/// The HTTP/2 client preface and an empty SETTINGS frame: a connection that speaks HTTP/2 and
/// then opens no stream.
const H2_PREFACE_AND_SETTINGS: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

#[tokio::test]
async fn idle_slow_and_surplus_connections_are_closed() {
    let s = Box::pin(Serve::start_with(&[
        "--http-header-read-timeout=1s",
        "--http-idle-timeout=2s",
        "--max-connections=3",
    ]))
    .await;
    // Far above the configured timeouts; kube-apiserver would close these too.
    let bound = Duration::from_secs(30);
    let mut idle_h1 = Silent::open(s.secure, "http/1.1", b"");
    let mut idle_h2 = Silent::open(s.secure, "h2", H2_PREFACE_AND_SETTINGS);
    let mut slowloris = Silent::open(s.secure, "http/1.1", b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    assert!(idle_h1.closed_within(bound), "an idle HTTP/1.1 connection stayed open");
    assert!(idle_h2.closed_within(bound), "an idle HTTP/2 connection stayed open");
    assert!(slowloris.closed_within(bound), "a connection sending its headers slowly stayed open");
    assert!(
        s.log().contains("connection limit reached"),
        "three connections at --max-connections=3 left no log line:\n{}",
        s.log()
    );
    // The port serves again once they are gone.
    assert_eq!(curl(&s, "GET", "/livez", "text/plain", b"").0, 200);
}

/// An HTTP/1.1 connection through `openssl s_client` (with the admin's certificate) whose
/// replies are read as they come.
struct Http1 {
    client: SClient,
    stdin: std::process::ChildStdin,
    replies: std::sync::mpsc::Receiver<Vec<u8>>,
    seen: Vec<u8>,
}

impl Http1 {
    fn open(s: &Serve) -> Http1 {
        let pki = s.dir.path().join("data").join("pki");
        let mut child = Command::new("openssl")
            .args(["s_client", "-quiet", "-alpn", "http/1.1", "-connect", &format!("127.0.0.1:{}", s.secure)])
            .arg("-cert")
            .arg(pki.join("admin.crt"))
            .arg("-key")
            .arg(pki.join("admin.key"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn openssl s_client");
        let stdin = child.stdin.take().expect("s_client stdin");
        let mut stdout = child.stdout.take().expect("s_client stdout");
        let (tx, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut stdout, &mut buf) {
                if tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Http1 { client: SClient(child), stdin, replies, seen: Vec::new() }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).expect("write to s_client");
        self.stdin.flush().expect("flush s_client");
    }

    /// Waits until `n` responses with status 200 arrived in all; false after `bound`.
    fn oks_within(&mut self, n: usize, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        loop {
            if String::from_utf8_lossy(&self.seen).matches("HTTP/1.1 200 OK").count() >= n {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.replies.recv_timeout(left) {
                Ok(chunk) => self.seen.extend_from_slice(&chunk),
                Err(_) => return false,
            }
        }
    }

    /// Waits until the server closed the connection; false after `bound`.
    fn closed_within(&mut self, bound: Duration) -> bool {
        self.client.exited_within(bound)
    }
}

/// As Go's HTTP server (so kube-apiserver): a keep-alive connection between requests waits the
/// idle timeout (90 s by default), not the header read timeout (32 s), which counts only while a
/// request's headers are coming in. Here the header timeout is 1 s and the idle timeout far
/// longer than the test: a second request three header timeouts after the first is served on the
/// same connection, and a request whose headers stop halfway is cut off by the header timeout.
#[tokio::test]
async fn keep_alive_waits_the_idle_timeout_and_headers_the_header_timeout() {
    let s = Box::pin(Serve::start_with(&["--http-header-read-timeout=1s", "--http-idle-timeout=10m"])).await;
    let bound = Duration::from_secs(30);
    let request = b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut conn = Http1::open(&s);
    conn.send(request);
    assert!(conn.oks_within(1, bound), "no answer to the first request");
    std::thread::sleep(Duration::from_secs(3));
    conn.send(request);
    assert!(conn.oks_within(2, bound), "the keep-alive connection was closed at the header read timeout");
    conn.send(b"GET /livez HTTP/1.1\r\nHost: x\r\n");
    assert!(conn.closed_within(bound), "a request's unfinished headers held the connection open");
}

#[tokio::test]
async fn heavy_bodies_are_refused_with_bounded_work() {
    let s = Box::pin(Serve::start_with(&["--max-request-bytes=262144"])).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, _) = curl(&s, "POST", cms, "application/json", br#"{"metadata":{"name":"target"}}"#);
    assert_eq!(code, 201);

    // One add and 32 copies of an object into itself would double it 32 times.
    let mut ops = vec![serde_json::json!({"op": "add", "path": "/data", "value": {"k": "x".repeat(1000)}})];
    for n in 0..32 {
        ops.push(serde_json::json!({"op": "copy", "from": "/data", "path": format!("/data/c{n}")}));
    }
    let patch = serde_json::to_vec(&ops).expect("patch");
    must_refuse(
        &s,
        "PATCH",
        &format!("{cms}/target"),
        "application/json-patch+json",
        &patch,
        422,
        "Unable to complete the copy, the accumulated size increase of copy is",
    );

    // 100,000 nested flow sequences (200 KB) are refused before the YAML parser sees them.
    let deep = format!("metadata: {}", "[".repeat(100_000));
    must_refuse(&s, "POST", cms, "application/yaml", deep.as_bytes(), 400, "exceeded max depth of 10000");
    // And the member still answers etcd clients.
    let put = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args([&format!("--endpoints=127.0.0.1:{}", s.client), "put", "after-yaml", "v"])
        .output()
        .expect("etcdctl");
    assert!(put.status.success(), "{}", String::from_utf8_lossy(&put.stderr));

    // A write over the store's request limit (here 256 KiB) is the client's fault: 413.
    let big = serde_json::json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(300_000)}});
    must_refuse(
        &s,
        "POST",
        cms,
        "application/json",
        big.to_string().as_bytes(),
        413,
        "etcdserver: request is too large",
    );

    // A patch nested past the parser's limit (here 500,000 levels) is refused as it is read,
    // and the member goes on answering.
    let deep = "[".repeat(500_000);
    for ty in ["application/merge-patch+json", "application/strategic-merge-patch+json", "application/json-patch+json"]
    {
        must_refuse(&s, "PATCH", &format!("{cms}/target"), ty, deep.as_bytes(), 400, "exceeded max depth of 127");
    }
    let put = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args([&format!("--endpoints=127.0.0.1:{}", s.client), "put", "after-patch", "v"])
        .output()
        .expect("etcdctl");
    assert!(put.status.success(), "{}", String::from_utf8_lossy(&put.stderr));
    // A JSON patch whose parts each parse can still build an object too deep to read back (a
    // deep value at a deep path): refused, and the object stays readable.
    let value = (0..120).fold(serde_json::json!("x"), |v, _| serde_json::json!({ "a": v }));
    let patch = serde_json::json!([{"op": "add", "path": "/metadata/annotations", "value": {"k": value}}]);
    must_refuse(
        &s,
        "PATCH",
        &format!("{cms}/target"),
        "application/json-patch+json",
        patch.to_string().as_bytes(),
        422,
        "the patched object nests 123 levels deep, more than the 120 allowed",
    );
    assert_eq!(curl(&s, "GET", &format!("{cms}/target"), "application/json", b"").0, 200);
    // A create body within the parser's limit but too deep for its managedFields to read back
    // is refused the same way, and the list of its kind stays readable.
    let value = (0..122).fold(serde_json::json!("x"), |v, _| serde_json::json!({ "a": v }));
    let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep", "annotations": {"k": value}}});
    must_refuse(
        &s,
        "POST",
        cms,
        "application/json",
        body.to_string().as_bytes(),
        400,
        "the object nests 125 levels deep, more than the 120 allowed",
    );
    assert_eq!(curl(&s, "GET", cms, "application/json", b"").0, 200);
}

#[tokio::test]
async fn metadata_is_validated_as_kube_does() {
    let s = Box::pin(Serve::start_with(&[])).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let post = |body: serde_json::Value| body.to_string().into_bytes();
    must_refuse(
        &s,
        "POST",
        cms,
        "application/json",
        &post(serde_json::json!({"metadata": {"name": "a", "annotations": {"k": {"nested": 1}}}})),
        400,
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal object into Go struct \
         field ObjectMeta.metadata.annotations of type string",
    );
    must_refuse(
        &s,
        "POST",
        cms,
        "application/json",
        &post(serde_json::json!({"metadata": {"name": "a", "labels": {"k": ["v"]}}})),
        400,
        "cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type string",
    );
    must_refuse(
        &s,
        "POST",
        cms,
        "application/json",
        &post(serde_json::json!({"metadata": {"name": "a"}, "immutable": "yes"})),
        400,
        "cannot unmarshal string into Go struct field ConfigMap.immutable of type bool",
    );
    must_refuse(
        &s,
        "POST",
        cms,
        "application/json",
        &post(serde_json::json!({"metadata": {"name": "a", "annotations": {"k": "v".repeat(300_000)}}})),
        422,
        "metadata.annotations: Too long: must have at most 262144 bytes",
    );
    must_refuse(
        &s,
        "POST",
        cms,
        "application/json",
        &post(serde_json::json!({"metadata": {"name": "a"}, "data": {"k": "v".repeat(1_100_000)}})),
        422,
        "Too long: must have at most 1048576 bytes",
    );
    let secret = serde_json::json!({"metadata": {"name": "a"}, "stringData": {"k": "v".repeat(1_100_000)}});
    must_refuse(
        &s,
        "POST",
        "/api/v1/namespaces/default/secrets",
        "application/json",
        &post(secret),
        422,
        "data: Too long: must have at most 1048576 bytes",
    );
    must_refuse(
        &s,
        "POST",
        cms,
        "application/json",
        &post(
            serde_json::json!({"metadata": {"name": "a", "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p"}]}}),
        ),
        422,
        "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty",
    );
    must_refuse(
        &s,
        "POST",
        cms,
        "application/json",
        &post(serde_json::json!({"metadata": {"name": "a", "finalizers": ["not a name!"]}})),
        422,
        "metadata.finalizers[0]",
    );
    // Nothing above was written.
    let (code, _) = curl(&s, "GET", &format!("{cms}/a"), "application/json", b"");
    assert_eq!(code, 404);
    // A null label or annotation value is stored as "", as Go decodes null into a
    // map[string]string.
    let nulls = serde_json::json!({"metadata": {"name": "nulls", "labels": {"l": null}, "annotations": {"a": null}}});
    let (code, body) = curl(&s, "POST", cms, "application/json", nulls.to_string().as_bytes());
    assert_eq!(code, 201, "{body}");
    let (code, body) = curl(&s, "GET", &format!("{cms}/nulls"), "application/json", b"");
    assert_eq!(code, 200, "{body}");
    let stored: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(stored["metadata"]["labels"], serde_json::json!({"l": ""}));
    assert_eq!(stored["metadata"]["annotations"], serde_json::json!({"a": ""}));
}

#[tokio::test]
async fn query_parameters_are_validated_as_kube_does() {
    let s = Box::pin(Serve::start_with(&[])).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    must_refuse(
        &s,
        "GET",
        &format!("{cms}?resourceVersion=abc"),
        "application/json",
        b"",
        400,
        "invalid resource version",
    );
    must_refuse(
        &s,
        "GET",
        &format!("{cms}?resourceVersion=1&resourceVersionMatch=Sometimes"),
        "application/json",
        b"",
        422,
        "resourceVersionMatch: Unsupported value: \"Sometimes\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
    );
    must_refuse(
        &s,
        "GET",
        &format!("{cms}?watch=1&timeoutSeconds=soon"),
        "application/json",
        b"",
        400,
        "invalid syntax",
    );
    must_refuse(&s, "GET", &format!("{cms}?limit=many"), "application/json", b"", 400, "invalid limit");
    // A list at a revision the store has not reached waits, then is told to come back.
    let (code, body) = curl(&s, "GET", &format!("{cms}?resourceVersion=99999999"), "application/json", b"");
    assert_eq!(code, 504, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).expect("a Status");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("Timeout: Too large resource version: 99999999, current: "),
        "{status}"
    );
    assert_eq!(status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
    assert_eq!(status["details"]["retryAfterSeconds"], 1);
    // A body in a format no decoder takes: 415.
    must_refuse(
        &s,
        "POST",
        cms,
        "text/x-unknown",
        b"{}",
        415,
        "accepted media types include: application/json, application/yaml",
    );
    // Only protobuf answers asked for: 406 listing what is served.
    let pki = s.dir.path().join("data").join("pki");
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "30", "-H", "Accept: application/vnd.kubernetes.protobuf"])
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .arg(format!("https://127.0.0.1:{}{cms}", s.secure))
        .output()
        .expect("curl");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a Status");
    assert_eq!(status["code"], 406, "{status}");
    assert_eq!(status["message"], "only the following media types are accepted: application/json, application/yaml");
}
