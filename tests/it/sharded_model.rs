//! Property: an engine with eight shards and one with one shard, given the same sequence of
//! operations, answer every one the same (revisions, values, versions, `more`, `count`, errors).
//! Writes stay inside one namespace (single-shard, as Kubernetes' are); reads also span
//! namespaces, so merged Ranges are compared with one store's answers too.
//!
//! Both servers run for the whole test and every case's operations go to both in the same order,
//! so their states stay equal across cases (shrinking included).

use std::fmt::Write as _;

use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::harness::{Server, Target};

#[derive(Clone, Debug)]
enum Op {
    Put {
        ns: u8,
        name: u8,
        value: u8,
    },
    Delete {
        ns: u8,
        name: u8,
    },
    DeleteNamespace {
        ns: u8,
    },
    /// kube's update: compare the key's mod revision with `rev`, put on success, read on failure.
    Cas {
        ns: u8,
        name: u8,
        rev: i64,
        value: u8,
    },
    Get {
        ns: u8,
        name: u8,
        revision: i64,
    },
    ListNamespace {
        ns: u8,
        limit: i64,
    },
    ListAll {
        limit: i64,
        revision: i64,
        sort: u8,
        keys_only: bool,
        count_only: bool,
    },
    Compact {
        back: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let ns = 0u8..6;
    let name = 0u8..4;
    prop_oneof![
        4 => (ns.clone(), name.clone(), any::<u8>()).prop_map(|(ns, name, value)| Op::Put { ns, name, value }),
        1 => (ns.clone(), name.clone()).prop_map(|(ns, name)| Op::Delete { ns, name }),
        1 => ns.clone().prop_map(|ns| Op::DeleteNamespace { ns }),
        2 => (ns.clone(), name.clone(), 0i64..30, any::<u8>()).prop_map(|(ns, name, rev, value)| Op::Cas { ns, name, rev, value }),
        1 => (ns.clone(), name, 0i64..30).prop_map(|(ns, name, revision)| Op::Get { ns, name, revision }),
        1 => (ns, 0i64..4).prop_map(|(ns, limit)| Op::ListNamespace { ns, limit }),
        2 => (0i64..8, 0i64..30, 0u8..7, any::<bool>(), any::<bool>()).prop_map(|(limit, revision, sort, keys_only, count_only)| {
            Op::ListAll { limit, revision, sort, keys_only, count_only }
        }),
        1 => (0i64..10).prop_map(|back| Op::Compact { back }),
    ]
}

fn key(ns: u8, name: u8) -> String {
    format!("/registry/pods/ns{ns}/p{name}")
}

fn describe_kvs(out: &mut String, kvs: &[etcd_client::KeyValue]) {
    for kv in kvs {
        let _ = write!(
            out,
            " [{} {:?} c{} m{} v{} l{}]",
            kv.key_str().unwrap_or("?"),
            kv.value(),
            kv.create_revision(),
            kv.mod_revision(),
            kv.version(),
            kv.lease()
        );
    }
}

fn describe_err(e: &etcd_client::Error) -> String {
    match e {
        etcd_client::Error::GRpcStatus(s) => format!("error {:?} {}", s.code(), s.message()),
        other => format!("error {other}"),
    }
}

/// Applies `op` and describes the answer: everything a client can see but the member and
/// cluster IDs and the raft term.
async fn apply(c: &mut etcd_client::Client, op: &Op) -> String {
    let mut out = String::new();
    match op {
        Op::Put { ns, name, value } => {
            match c.put(key(*ns, *name), vec![*value], Some(PutOptions::new().with_prev_key())).await {
                Ok(r) => {
                    let _ = write!(out, "put r{}", r.header().map_or(0, |h| h.revision()));
                    describe_kvs(&mut out, r.prev_key().into_iter().cloned().collect::<Vec<_>>().as_slice());
                }
                Err(e) => out = describe_err(&e),
            }
        }
        Op::Delete { ns, name } => match c.delete(key(*ns, *name), Some(DeleteOptions::new().with_prev_key())).await {
            Ok(r) => {
                let _ = write!(out, "del r{} n{}", r.header().map_or(0, |h| h.revision()), r.deleted());
                describe_kvs(&mut out, r.prev_kvs());
            }
            Err(e) => out = describe_err(&e),
        },
        Op::DeleteNamespace { ns } => {
            match c.delete(format!("/registry/pods/ns{ns}/"), Some(DeleteOptions::new().with_prefix())).await {
                Ok(r) => {
                    let _ = write!(out, "delns r{} n{}", r.header().map_or(0, |h| h.revision()), r.deleted());
                }
                Err(e) => out = describe_err(&e),
            }
        }
        Op::Cas { ns, name, rev, value } => {
            let k = key(*ns, *name);
            let txn = Txn::new()
                .when([Compare::mod_revision(k.as_str(), CompareOp::Equal, *rev)])
                .and_then([TxnOp::put(k.as_str(), vec![*value], None)])
                .or_else([TxnOp::get(k.as_str(), None)]);
            match c.txn(txn).await {
                Ok(r) => {
                    let _ = write!(out, "txn r{} ok{}", r.header().map_or(0, |h| h.revision()), r.succeeded());
                    for resp in r.op_responses() {
                        if let etcd_client::TxnOpResponse::Get(g) = resp {
                            describe_kvs(&mut out, g.kvs());
                        }
                    }
                }
                Err(e) => out = describe_err(&e),
            }
        }
        Op::Get { ns, name, revision } => {
            match c.get(key(*ns, *name), Some(GetOptions::new().with_revision(*revision))).await {
                Ok(r) => {
                    let _ = write!(out, "get r{} n{}", r.header().map_or(0, |h| h.revision()), r.count());
                    describe_kvs(&mut out, r.kvs());
                }
                Err(e) => out = describe_err(&e),
            }
        }
        Op::ListNamespace { ns, limit } => {
            let opts = GetOptions::new().with_prefix().with_limit(*limit);
            match c.get(format!("/registry/pods/ns{ns}/"), Some(opts)).await {
                Ok(r) => {
                    let _ =
                        write!(out, "list r{} more{} n{}", r.header().map_or(0, |h| h.revision()), r.more(), r.count());
                    describe_kvs(&mut out, r.kvs());
                }
                Err(e) => out = describe_err(&e),
            }
        }
        Op::ListAll { limit, revision, sort, keys_only, count_only } => {
            let mut opts = GetOptions::new().with_prefix().with_limit(*limit).with_revision(*revision);
            let (target, order) = match sort {
                0 => (SortTarget::Key, SortOrder::None),
                1 => (SortTarget::Key, SortOrder::Descend),
                2 => (SortTarget::Version, SortOrder::Ascend),
                3 => (SortTarget::Create, SortOrder::Descend),
                4 => (SortTarget::Mod, SortOrder::Ascend),
                5 => (SortTarget::Value, SortOrder::Descend),
                _ => (SortTarget::Mod, SortOrder::Descend),
            };
            opts = opts.with_sort(target, order);
            if *keys_only {
                opts = opts.with_keys_only();
            }
            if *count_only {
                opts = opts.with_count_only();
            }
            match c.get("/registry/pods/", Some(opts)).await {
                Ok(r) => {
                    // A read at the current revision reports it; one at a past revision reports
                    // the current one too (etcd's header), which is what both must agree on.
                    let _ =
                        write!(out, "all r{} more{} n{}", r.header().map_or(0, |h| h.revision()), r.more(), r.count());
                    describe_kvs(&mut out, r.kvs());
                }
                Err(e) => out = describe_err(&e),
            }
        }
        Op::Compact { back } => {
            let current = match c.get("none", None).await {
                Ok(r) => r.header().map_or(0, |h| h.revision()),
                Err(e) => return describe_err(&e),
            };
            match c.compact((current - back).max(1), None).await {
                Ok(r) => {
                    let _ = write!(out, "compact r{}", r.header().map_or(0, |h| h.revision()));
                }
                Err(e) => out = describe_err(&e),
            }
        }
    }
    out
}

#[test]
fn eight_shards_answer_like_one() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let (one, eight) =
        rt.block_on(async { (Server::start(Target::Ballast).await, Server::start(Target::BallastSharded).await) });
    let (c1, c8) = rt.block_on(async { (one.client().await, eight.client().await) });
    let mut runner = TestRunner::new(Config { cases: 48, failure_persistence: None, ..Config::default() });
    let result = runner.run(&proptest::collection::vec(op(), 1..40), |ops| {
        // Clients are handles to one connection each; the runner's closure may not mutate them.
        let (mut c1, mut c8) = (c1.clone(), c8.clone());
        rt.block_on(async {
            for (i, op) in ops.iter().enumerate() {
                let a = apply(&mut c1, op).await;
                let b = apply(&mut c8, op).await;
                prop_assert_eq!(&a, &b, "op {} of {:?}", i, ops);
            }
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
