//! The gRPC health service (`grpc.health.v1.Health`), as etcd registers it: the server as a
//! whole (service name "") is SERVING while this member knows a leader of its first shard and no
//! shard has stopped on an error, and any other service name is unknown. `Watch` sends the
//! status at once and again whenever it changes, checked every [`HealthService::poll`].

use std::pin::Pin;
use std::time::Duration;

use ballast_proto::healthpb::{
    health_check_response::ServingStatus, health_server::Health, HealthCheckRequest, HealthCheckResponse,
};
use futures::Stream;
use tonic::{Request, Response, Status};

use super::Api;

/// Serves `grpc.health.v1.Health`.
#[derive(Clone, Debug)]
pub struct HealthService {
    api: Api,
    /// How often a `Watch` re-checks the status. 1 s: health watchers (load balancers, probes)
    /// act on seconds, and a check is two atomic loads.
    pub poll: Duration,
}

impl HealthService {
    /// Serves the health of the member `api` serves.
    pub fn new(api: Api) -> Self {
        Self { api, poll: Duration::from_secs(1) }
    }

    fn status(&self, service: &str) -> ServingStatus {
        if !service.is_empty() {
            return ServingStatus::ServiceUnknown;
        }
        if self.api.stopped_shard().is_none() && self.api.first().leader() != 0 {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        }
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(&self, req: Request<HealthCheckRequest>) -> Result<Response<HealthCheckResponse>, Status> {
        match self.status(&req.get_ref().service) {
            ServingStatus::ServiceUnknown => Err(Status::not_found("unknown service")),
            s => Ok(Response::new(HealthCheckResponse { status: s as i32 })),
        }
    }

    type WatchStream = WatchStream;

    async fn watch(&self, req: Request<HealthCheckRequest>) -> Result<Response<WatchStream>, Status> {
        let service = req.into_inner().service;
        let me = self.clone();
        let stream = futures::stream::unfold(None, move |last: Option<ServingStatus>| {
            let me = me.clone();
            let service = service.clone();
            async move {
                loop {
                    let now = me.status(&service);
                    if last != Some(now) {
                        return Some((Ok(HealthCheckResponse { status: now as i32 }), Some(now)));
                    }
                    tokio::time::sleep(me.poll).await;
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }
}
