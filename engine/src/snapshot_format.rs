//! The snapshot archive's first line, in a file of its own: the archive's writer
//! (`api::maintenance`) and its reader ([`crate::snapshot`]) both name it, and the reader's
//! module reaches the server's start-up code, which serves the writer.

/// The archive's first line.
pub const MAGIC: &[u8] = b"BALLAST-SNAPSHOT 1\n";
