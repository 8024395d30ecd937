//! The apiextensions server (kube's `k8s.io/apiextensions-apiserver`): serves the resources that
//! CustomResourceDefinitions declare, and validates and maintains the definitions themselves.
//!
//! # Place in the delegation chain
//!
//! A request that passed the handler chain goes to the first server that claims its path:
//!
//! ```text
//! aggregator (ballast-aggregator)         /apis/<group>/<version> of an APIService -> proxy
//!   -> built-in API (ballast-frontend)    the 59 built-in resources, discovery, OpenAPI
//!     -> apiextensions (this crate)       /apis/<crd group>/<version>/..., their discovery
//!       -> 404                            and OpenAPI v3 documents
//! ```
//!
//! CustomResourceDefinition objects stay a built-in kind (the built-in API stores, prints and
//! describes them); this server adds what only it knows, through the generic server's seams:
//! their validation ([`validation::DefinitionAdmission`], an admission plugin on the built-in
//! store), their status (the [`controller`]), and the entries of their groups in the built-in
//! API's `/apis` and `/openapi/v3` index ([`server::Apis`], a `DelegatedApis`).
//!
//! # Map
//!
//! * [`definition`]: a definition read from its JSON ([`definition::Definition`]).
//! * [`validation`]: kube's checks of definitions, as admission (`object_meta`: the checks of
//!   embedded resources' `apiVersion`, `kind` and `metadata` that schema defaults must pass).
//! * [`controller`]: one watch on the definitions per frontend; keeps the [`registry`] current
//!   and writes `acceptedNames`, `NamesAccepted`, `Established` and `storedVersions`.
//! * [`registry`]: what is served now ([`registry::Snapshot`]), built into generic-server rows
//!   ([`registry::CrdKinds`]) with each version's strategy (defaulting, validation), printer,
//!   `/status`, `/scale`, selectable fields and version rewriting;
//!   [`registry::Registry::openapi_schema`] hands out a version's schema as written.
//! * [`schema`]: pruning, defaulting and validation of custom resources by a version's
//!   OpenAPI v3 schema; [`rules`]: its CEL `x-kubernetes-validations`, with kube's CEL
//!   libraries in the private `cel_*` modules (one per library: quantity, lists, regex, url,
//!   ip, cidr, format, semver, sets, two-variable comprehensions `cel_comprehensions`, and the
//!   durations' conversion `cel_time`; `cel_overload` lets a library declare typed overloads on
//!   the environment), checked when a definition is admitted by `cel_admit` (types and costs
//!   by `cel_check`, over the schema's CEL types of `cel_decl` and the functions' declared
//!   overloads of `cel_signatures`, in the units and limits of `cel_cost`); [`formats`]: string formats; [`jsonpath`]: the JSONPath subset of
//!   printer columns and selectable fields; [`printer`]: Table columns from
//!   `additionalPrinterColumns`.
//! * [`conversion`]: each served version's converter to and from the storage version
//!   (`apiVersion` rewritten, or a conversion webhook called through [`webhook_client`]).
//! * [`server`]: the chain's server (REST, group discovery, OpenAPI v3 documents of
//!   [`openapi`]).
//!
//! # Layering
//!
//! Depends on `ballast-apiserver` (the generic server's registry, routes and seams) and
//! `ballast-apimachinery` through it; never on the built-in API's crate or on the aggregator
//! (the chain delegates downwards only). Inside: `server` → `registry` → `schema`, `printer` →
//! `jsonpath`; `registry` → `conversion` → `webhook_client`, `schema`; `controller` →
//! `registry`, `definition`; `validation` → `definition`, `schema`, `cel_admit`; `rules`,
//! `cel_admit` → `cel_check` → `cel_decl`, `cel_signatures`, `cel_cost`.
//!
//! Reading order: [`server`], [`registry`], [`controller`].

mod blocking;
mod cel_admit;
mod cel_check;
mod cel_cidr;
mod cel_comprehensions;
mod cel_cost;
mod cel_decl;
mod cel_error;
mod cel_format;
mod cel_ip;
mod cel_lists;
mod cel_meter;
mod cel_overload;
mod cel_parse;
mod cel_quantity;
mod cel_regex;
mod cel_regex_syntax;
mod cel_semver;
mod cel_sets;
mod cel_signatures;
#[cfg(test)]
mod cel_signatures_sync;
mod cel_time;
mod cel_url;
mod cel_view;
pub mod controller;
pub mod conversion;
pub mod definition;
pub mod formats;
pub mod jsonpath;
mod object_meta;
pub mod openapi;
pub mod printer;
pub mod registry;
pub mod rules;
pub mod schema;
pub mod server;
pub mod validation;
pub mod webhook_client;

use std::sync::Arc;

pub use cel_parse::RULES_THREAD_STACK;

use ballast_apiserver::delegation::{in_front_of, Delegate, DelegateContext, Handler};
use ballast_apiserver::routes::AppState;
use ballast_apiserver::watch_cache::WatchCaches;

use crate::registry::{CrdKinds, Registry};

/// The apiextensions server in front of `delegate` (the 404), on the built-in API's storage
/// and settings. Starts the definition controller on the current runtime.
pub fn server(context: DelegateContext, delegate: Handler) -> Delegate {
    let registry = Arc::new(Registry::with_services(webhook_client::Services(context.store.clone())));
    // Custom resources share the built-in API's storage; a namespace deleted through either
    // store is emptied of both's objects.
    let store = context
        .store
        .with_kinds(Arc::new(CrdKinds(registry.clone())))
        .with_namespaced_elsewhere(context.store.kinds().clone());
    let stores = controller::Stores::new(context.store.clone(), store.clone());
    let state = Arc::new(AppState {
        watch_cache: WatchCaches::new(store.storage().clone(), context.watch_cache),
        store,
        version: context.version,
        advertise_address: context.advertise_address,
        metrics: context.metrics,
        delegated: None,
        engine_probe: None,
    });
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(controller::run(stores, registry.clone()));
    }
    Delegate {
        handler: in_front_of(server::ApiextensionsServer::new(state, registry.clone()), delegate),
        apis: Some(Arc::new(server::Apis::new(registry))),
        admission: vec![Arc::new(validation::DefinitionAdmission)],
    }
}
