//! Integration tests of the frontend against stock etcd and the Ballast engine, driven by real clients: kubectl (with
//! the generated admin kubeconfig) and a raw HTTPS client for refusals kubectl cannot show.
//!
//! Every test starts its own etcd and frontend on free loopback ports and stops them at the end.

// These tests drive real processes and measure real elapsed time (deadlines, timeouts).
#![allow(clippy::disallowed_methods)]

mod aggregation;
mod apply;
mod auth;
mod chain;
mod crd;
mod crd_cel_comprehensions;
mod crd_cel_cost;
mod crd_conversion;
mod crd_schema_rules;
mod crd_served;
mod extension_server;
mod harness;
mod kinds;
mod kube_rs;
mod kubectl;
mod lifecycle;
mod list;
mod not_found;
mod openapi;
mod patch;
mod protobuf;
mod python_client;
mod raw;
mod reset_fields;
mod service_accounts;
mod storage;
mod table;
mod watch;
