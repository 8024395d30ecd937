//! [`PatchError`]: why a patch did not apply.

/// Why a patch did not apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatchError {
    /// The body is not a patch of its declared format.
    #[error("{0}")]
    Malformed(String),
    /// A JSON patch with more operations than [`super::json_patch::MAX_OPERATIONS`].
    #[error("too many operations: {0}")]
    TooManyOperations(usize),
    /// The patch is well formed but does not apply to this object.
    #[error("{0}")]
    Failed(String),
    /// The patched object would nest deeper than [`super::MAX_RESULT_DEPTH`] levels.
    #[error("the patched object nests {0} levels deep, more than the {max} allowed", max = super::nesting::MAX_RESULT_DEPTH)]
    TooDeep(usize),
}
