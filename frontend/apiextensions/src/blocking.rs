//! Long synchronous work inside request handling (an object's CEL rules, a conversion webhook
//! call the generic store makes synchronously): on a multi-threaded runtime the worker first
//! hands its queued tasks to another thread (`block_in_place`), so that other requests, and the
//! client's own connection, which must keep answering HTTP/2 pings, go on meanwhile.

use tokio::runtime::{Handle, RuntimeFlavor};

/// The current runtime, when it is multi-threaded (the only kind `block_in_place` works on).
pub(crate) fn multi_threaded() -> Option<Handle> {
    Handle::try_current().ok().filter(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Runs `f` holding up no other task: off the worker on a multi-threaded runtime, else inline.
pub(crate) fn off_the_runtime<R>(f: impl FnOnce() -> R) -> R {
    match multi_threaded() {
        Some(_) => tokio::task::block_in_place(f),
        None => f(),
    }
}
