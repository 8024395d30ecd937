//! What the server spends checking one custom resource against a large definition: the work a
//! create or update of a `DatabaseCluster` (`testdata/large-crd.yaml`, about 8,700 schema lines
//! with an embedded pod template and CEL rules) does beyond a schemaless one: pruning, defaulting,
//! schema validation and the CEL rules (with the transition rules on update).
//!
//! ```sh
//! cargo bench -p ballast-apiextensions --bench validate
//! ```
//!
//! Prints one JSON line: the median over rounds of the per-object time, create and update.

// A benchmark measures elapsed time.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use ballast_apiextensions::registry::CustomResourceStrategy;
use ballast_apiextensions::schema::prune_root;
use ballast_apiserver::registry::strategy::Strategy;
use serde_json::Value;

const CRD: &str = include_str!("../testdata/large-crd.yaml");
const OBJECT: &str = include_str!("../testdata/large-object.yaml");

/// Rounds, and objects per round: the median round's mean is reported.
const ROUNDS: usize = 21;
const PER_ROUND: usize = 200;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // On a thread with the stack the server's runtime threads have, as the server checks rules.
    std::thread::Builder::new()
        .stack_size(ballast_apiextensions::RULES_THREAD_STACK)
        .spawn(run)
        .expect("bench thread")
        .join()
        .expect("bench");
}

fn run() {
    let crd: Value = serde_yaml_ng::from_str(CRD).expect("large-crd.yaml");
    let object: Value = serde_yaml_ng::from_str(OBJECT).expect("large-object.yaml");
    let schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
    let built = Instant::now();
    let strategy = CustomResourceStrategy::new(Some(schema.clone()), true);
    let build_time = built.elapsed();
    let mut obj = object.as_object().expect("object").clone();

    // Sanity: the fixture is valid, so every round does the whole walk and no error path.
    strategy.prepare_for_create(&mut obj);
    let errs = strategy.validate(&obj);
    assert!(errs.is_empty(), "the fixture object is valid: {errs:?}");

    let mut create = Vec::new();
    let mut update = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..PER_ROUND {
            let mut o = object.as_object().expect("object").clone();
            let pruned = prune_root(&schema, &mut o);
            strategy.prepare_for_create(&mut o);
            let errs = strategy.validate(&o);
            std::hint::black_box((pruned, errs));
        }
        create.push(start.elapsed() / PER_ROUND as u32);
        let start = Instant::now();
        for _ in 0..PER_ROUND {
            let mut o = object.as_object().expect("object").clone();
            let pruned = prune_root(&schema, &mut o);
            strategy.prepare_for_update(&mut o, &obj);
            let errs = strategy.validate_update(&o, &obj);
            std::hint::black_box((pruned, errs));
        }
        update.push(start.elapsed() / PER_ROUND as u32);
    }
    // The clone of the object each iteration starts from, measured alone, is subtracted.
    let mut clones = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..PER_ROUND {
            std::hint::black_box(object.as_object().expect("object").clone());
        }
        clones.push(start.elapsed() / PER_ROUND as u32);
    }
    let clone = median(clones);
    let us = |d: Duration| d.saturating_sub(clone).as_secs_f64() * 1e6;
    println!(
        "{{\"bench\":\"validate_large\",\"schema_lines\":{},\"object_json_bytes\":{},\"create_us\":{:.1},\"update_us\":{:.1},\"strategy_build_ms\":{:.2}}}",
        CRD.lines().count(),
        object.to_string().len(),
        us(median(create)),
        us(median(update)),
        build_time.as_secs_f64() * 1e3
    );
}
