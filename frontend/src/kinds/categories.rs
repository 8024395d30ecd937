//! The discovery categories rows put their kinds in (`kubectl get all` lists the first).

/// The category every "get all" kind is in.
pub(crate) const ALL_CATEGORY: &[&str] = &["all"];
/// The category of API-extension kinds.
pub(crate) const API_EXTENSIONS: &[&str] = &["api-extensions"];
