//! The gRPC health service (`grpc.health.v1.Health`) through a raw gRPC client, as load
//! balancers and probes call it.

use ballast_proto::healthpb::{health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest};

use crate::harness::Server;

both_targets!(grpc_health_check_and_watch);

async fn grpc_health_check_and_watch(s: Server) {
    let mut c = HealthClient::connect(s.url()).await.expect("connect");
    let r = c.check(HealthCheckRequest { service: String::new() }).await.expect("check").into_inner();
    assert_eq!(r.status, ServingStatus::Serving as i32);
    let err = c.check(HealthCheckRequest { service: "nope".into() }).await.expect_err("unknown service");
    assert_eq!((err.code(), err.message()), (tonic::Code::NotFound, "unknown service"));
    let mut w = c.watch(HealthCheckRequest { service: String::new() }).await.expect("watch").into_inner();
    let first = tokio::time::timeout(std::time::Duration::from_secs(5), w.message()).await.expect("in time");
    assert_eq!(first.expect("message").expect("a status").status, ServingStatus::Serving as i32);
    let mut w = c.watch(HealthCheckRequest { service: "nope".into() }).await.expect("watch").into_inner();
    let first = tokio::time::timeout(std::time::Duration::from_secs(5), w.message()).await.expect("in time");
    assert_eq!(first.expect("message").expect("a status").status, ServingStatus::ServiceUnknown as i32);
}
