//! Applier tests on the in-memory backend: the revision model and txn semantics.
