//! The HTTP/2 `:authority` values etcd's clients send and etcd accepts: the endpoint as a URL
//! (etcdctl 3.4's `endpoint status`, `endpoint hashkv` and `defrag` with `http://` endpoints),
//! etcd client 3.5's `#initially=[...]`, empty, none, IPv6 literals. Raw HTTP/2 requests carry
//! the forms no Rust client can send.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use ballast_engine::api::hpack::{encode_literals, Decoder, Field};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{ok, Server};

all_targets!(etcdctl_http_endpoints);
both_targets!(raw_authority_forms);

/// Runs etcdctl with the endpoint written as a URL.
fn etcdctl_url(s: &Server, args: &[&str]) -> Output {
    Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", s.url()))
        .arg("--command-timeout=10s")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("etcdctl")
}

async fn etcdctl_http_endpoints(s: Server) {
    ok(&etcdctl_url(&s, &["put", "k", "v"]));
    let status = ok(&etcdctl_url(&s, &["endpoint", "status", "-w", "json"]));
    let j: serde_json::Value = serde_json::from_str(&status).expect("json");
    assert_eq!(j[0]["Endpoint"].as_str(), Some(s.url().as_str()), "{status}");
    assert!(j[0]["Status"]["header"]["revision"].as_i64() >= Some(2), "{status}");
    let hash = ok(&etcdctl_url(&s, &["endpoint", "hashkv"]));
    assert!(hash.starts_with(&format!("{}, ", s.url())), "{hash}");
    let defrag = ok(&etcdctl_url(&s, &["defrag"]));
    assert!(defrag.contains(&format!("Finished defragmenting etcd member[{}]", s.url())), "{defrag}");
    assert_eq!(ok(&etcdctl_url(&s, &["get", "k", "--print-value-only"])), "v\n");
}

fn field(n: &str, v: &str) -> Field {
    Field { name: n.as_bytes().to_vec(), value: v.as_bytes().to_vec() }
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// What the server answered on one stream.
#[derive(Debug, Default)]
struct Answer {
    headers: Vec<Field>,
    data: Vec<u8>,
    reset: Option<u32>,
}

/// Sends gRPC calls `(method, authority, request)` on one raw HTTP/2 connection, one stream
/// each, and returns each stream's answer.
async fn raw_calls(addr: &str, calls: &[(&str, Option<&str>, Vec<u8>)]) -> Vec<Answer> {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(0x4, 0, 0, &[]));
    for (i, (method, authority, body)) in calls.iter().enumerate() {
        let stream = 2 * i as u32 + 1;
        let mut fields = vec![field(":method", "POST"), field(":scheme", "http"), field(":path", method)];
        if let Some(a) = authority {
            fields.push(field(":authority", a));
        }
        fields.extend([field("content-type", "application/grpc"), field("te", "trailers")]);
        out.extend(frame(0x1, 0x4, stream, &encode_literals(&fields)));
        let mut msg = vec![0u8];
        msg.extend_from_slice(&(body.len() as u32).to_be_bytes());
        msg.extend_from_slice(body);
        out.extend(frame(0x0, 0x1, stream, &msg));
    }
    tcp.write_all(&out).await.expect("write");
    let mut answers: Vec<Answer> = (0..calls.len()).map(|_| Answer::default()).collect();
    let mut done = 0;
    let mut decoder = Decoder::new(4096);
    let mut buf = Vec::new();
    let read_all = async {
        while done < calls.len() {
            let mut chunk = [0u8; 8192];
            let n = tcp.read(&mut chunk).await.expect("read");
            assert!(n > 0, "the server closed the connection");
            buf.extend_from_slice(&chunk[..n]);
            while buf.len() >= 9 {
                let len = (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
                if buf.len() < 9 + len {
                    break;
                }
                let (kind, flags) = (buf[3], buf[4]);
                let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
                let payload: Vec<u8> = buf[9..9 + len].to_vec();
                buf.drain(..9 + len);
                if stream == 0 {
                    if kind == 0x4 && flags & 1 == 0 {
                        tcp.write_all(&frame(0x4, 0x1, 0, &[])).await.expect("settings ack");
                    }
                    continue;
                }
                let a = &mut answers[(stream as usize - 1) / 2];
                match kind {
                    0x1 => a.headers.extend(decoder.decode(&payload).expect("hpack")),
                    0x0 => a.data.extend_from_slice(&payload),
                    0x3 => a.reset = Some(u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])),
                    _ => {}
                }
                if kind == 0x3 || (flags & 0x1 != 0 && matches!(kind, 0x0 | 0x1)) {
                    done += 1;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read_all).await.expect("answers within 10 s");
    answers
}

fn grpc_status(a: &Answer) -> Option<&str> {
    a.headers.iter().find(|f| f.name == b"grpc-status").and_then(|f| std::str::from_utf8(&f.value).ok())
}

async fn raw_authority_forms(s: Server) {
    use ballast_proto::etcdserverpb::{MemberListResponse, RangeRequest, RangeResponse, StatusResponse};
    s.client().await.put("a", "1", None).await.expect("put");
    let ep = s.endpoint();
    let url = s.url();
    let initially = format!("#initially=[{url}]");
    let port = ep.rsplit(':').next().expect("port").to_string();
    let v6 = format!("[::1]:{port}");
    let forms: Vec<Option<&str>> =
        vec![Some(ep.as_str()), Some(url.as_str()), Some(initially.as_str()), Some(""), Some(v6.as_str()), None];
    let range = RangeRequest { key: b"a".to_vec().into(), ..Default::default() }.encode_to_vec();
    for form in forms {
        // Each form on its own connection, on several services, with the form on every call.
        let calls = vec![
            ("/etcdserverpb.Maintenance/Status", form, Vec::new()),
            ("/etcdserverpb.KV/Range", form, range.clone()),
            ("/etcdserverpb.Cluster/MemberList", form, Vec::new()),
            ("/etcdserverpb.KV/Range", form, range.clone()),
        ];
        let answers = raw_calls(&ep, &calls).await;
        for (a, (method, ..)) in answers.iter().zip(&calls) {
            assert_eq!(a.reset, None, "{method} with :authority {form:?} was reset");
            assert_eq!(grpc_status(a), Some("0"), "{method} with :authority {form:?}: {a:?}");
        }
        let body = |a: &Answer| a.data.get(5..).map(<[u8]>::to_vec).unwrap_or_default();
        let status = StatusResponse::decode(body(&answers[0]).as_slice()).expect("StatusResponse");
        assert!(status.version.starts_with("3."), "{form:?}: {status:?}");
        let r = RangeResponse::decode(body(&answers[3]).as_slice()).expect("RangeResponse");
        assert_eq!(r.kvs.first().map(|kv| kv.value.to_vec()), Some(b"1".to_vec()), "{form:?}");
        let m = MemberListResponse::decode(body(&answers[2]).as_slice()).expect("MemberListResponse");
        assert_eq!(m.members.len(), 1, "{form:?}");
    }
}
