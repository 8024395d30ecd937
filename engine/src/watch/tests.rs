//! Watch hub tests on the in-memory backend.
