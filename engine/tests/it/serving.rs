//! An engine served on a free loopback port for one test, and stopped by it.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use ballast_engine::server::{Engine, EngineConfig};
use ballast_engine::ServeError;
use tonic::transport::Channel;

/// The default configuration on a free loopback port, with its data under `dir`.
pub(crate) fn config(dir: &Path) -> EngineConfig {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    EngineConfig { data_dir: dir.join("data"), listen_client: vec![addr], ..Default::default() }
}

/// A started engine being served, with a connected channel.
pub(crate) struct Served {
    pub(crate) channel: Channel,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), ServeError>>,
}

/// Serves `engine` (started from `cfg`) and connects to it.
pub(crate) async fn serve(engine: Engine, cfg: &EngineConfig) -> Served {
    let addr: SocketAddr = cfg.listen_client[0];
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(engine.serve(async move {
        let _ = stop_rx.await;
    }));
    let url = format!("http://{addr}");
    // Bounded: the listener is bound before `serve`'s first poll, so this takes a few tries.
    let mut tries = 0;
    let channel = loop {
        match tonic::transport::Endpoint::from_shared(url.clone()).expect("url").connect().await {
            Ok(c) => break c,
            Err(e) => {
                tries += 1;
                assert!(tries < 500, "cannot connect to {url}: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    Served { channel, stop, server }
}

impl Served {
    /// Stops serving and waits (at most 10 s) for the engine to stop.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.server).await;
    }
}
