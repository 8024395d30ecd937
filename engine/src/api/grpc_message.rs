//! The gRPC framing the hand-written paths share ([`super::unary`] and [`super::watch_grpc`]):
//! a message's 5-byte prefix, the response content type and the OK trailers, as tonic writes
//! them.

use bytes::BufMut;
use http::{HeaderMap, HeaderValue};

/// A message's prefix: a compression flag and a big-endian length.
pub(super) const PREFIX: usize = 5;

/// The `content-type` of every gRPC response.
pub(super) const CONTENT_TYPE: HeaderValue = HeaderValue::from_static("application/grpc");

/// Writes the prefix of an uncompressed message of `len` bytes.
pub(super) fn put_prefix(buf: &mut impl BufMut, len: usize) {
    buf.put_u8(0);
    // gRPC's length is 32 bits; no Ballast response comes near it (requests are limited to
    // --max-request-bytes, and a watch response holds at most one revision's events).
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
}

/// The trailers of a call that succeeded: `grpc-status: 0`.
pub(super) fn ok_trailers() -> HeaderMap {
    let mut trailers = HeaderMap::with_capacity(1);
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    trailers
}
