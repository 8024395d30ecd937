//! Ballast's generic Kubernetes API server (kube's `k8s.io/apiserver`): the handler chain, the
//! filters, authentication, authorization and audit, the generic registry store, the watch
//! cache and the storage client. It knows no kind: the kinds a server serves come in as a
//! [`registry::ServedKinds`] (the built-in API's table is one), and storage is reached only
//! through the etcd v3 API, so it runs the same against stock etcd and the Ballast engine.
//!
//! # Map
//!
//! A request flows top to bottom:
//!
//! * [`server`]: the secure port: TLS (rustls, ring), HTTP/1.1 and HTTP/2 (hyper-util auto),
//!   client certificates handed to the chain, each connection held to [`connection_limits`]; [`certs`]: the generated CA, serving and admin
//!   certificates, and `admin.kubeconfig`.
//! * [`chain`]: `build_handler_chain`, the one place that orders the [`filters`]: audit init →
//!   panic recovery → request info → metrics → timeout → authentication → audit →
//!   impersonation → max-in-flight → authorization → body limit, in front of the
//!   [`delegation`] chain of servers (aggregator → built-in API → apiextensions → 404). A
//!   server behind another is built from a [`delegation::DelegateContext`] and adds its groups
//!   to the front server's discovery and OpenAPI index ([`delegation::DelegatedApis`]) and
//!   admission to its writes ([`registry::admission`]).
//! * [`audit`]: audit policy, events and the bounded log writer; [`metrics`]: the metric
//!   registry that filters and audit count into and `/metrics` renders.
//! * [`request_info`] parses URLs like kube's `RequestInfoFactory`; [`authn`] (x509, token
//!   file, anonymous) decides who, and an [`authz::Authorizer`] (the built-in API's RBAC)
//!   whether.
//! * [`routes`]: a server of the chain: health and version, discovery, OpenAPI, and REST on
//!   the served kinds (with watch streams); other requests go to the server behind it.
//! * [`served`]: what is served besides the kinds (the shape of resources answered without
//!   storage, subresources, the reported version), for routes and OpenAPI alike.
//! * [`registry`]: the generic store (metadata, validation, optimistic concurrency, selectors,
//!   pages, watches, patches, server-side apply and managedFields) over rows of
//!   [`registry::ResourceKind`], and the
//!   [`registry::ServedKinds`] seam the kinds come in through.
//! * [`watch`]: a client's watch: selector transitions, bookmarks, watch-list initial events,
//!   from the [`watch_cache`] (one upstream etcd watch per resource, fanned out to every client
//!   watch) or from storage directly.
//! * [`storage`]: the `Storage` seam the registry uses; `Etcd3Storage`, the only code that talks
//!   to etcd, and `MemStorage`, its in-memory twin for tests.
//! * [`error`]: `ApiError`, and the one mapping of errors to `metav1.Status`; [`body`]: the
//!   request and response body types every layer shares.
//!
//! Layering: routes → registry → storage; filters never touch storage except through the
//! authorizer. Nothing here holds authoritative state. `tools/module_cycles.py` checks that no
//! two modules import each other, directly or around a loop.
//!
//! Reading order: [`chain`], [`routes`], [`registry::store`].

pub mod audit;
pub mod authn;
pub mod authz;
pub mod body;
pub mod certs;
pub mod chain;
pub mod connection_limits;
pub mod delegation;
pub mod error;
pub mod filters;
pub mod metrics;
pub mod registry;
pub mod request_info;
pub mod routes;
pub mod served;
pub mod server;
pub mod storage;
pub mod watch;
pub mod watch_cache;

// The object model and codecs live in their own crate, below this one; re-exported so paths
// such as `crate::protobuf::Message` read the same everywhere.
pub use ballast_apimachinery::{clock, patch, protobuf, schema, uid};
