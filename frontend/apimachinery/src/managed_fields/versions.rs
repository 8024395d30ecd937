//! Managers recorded through other versions of a kind (kube's version converter): each
//! managedFields entry keeps the apiVersion it was written through, and its fields are
//! compared, released and pruned in that version, so a kind whose versions have different
//! fields (an HPA's `autoscaling/v1` CPU target is `autoscaling/v2`'s `cpu` metric) keeps
//! every manager's set right whichever version the next write goes through.
//!
//! [`KindVersions`] is what the field manager asks; [`VersionViews`] holds, for one write, the
//! old and new objects and their comparison in each other version, made on first need: a
//! write whose managers all share its version converts nothing.
//!
//! An entry whose version the kind is not served in is dropped by the next write, as kube
//! drops entries of versions it cannot convert to; a conversion that fails (a webhook's
//! error) fails an apply and leaves any other write without managedFields, as kube's field
//! manager does ([`KindVersions::take_failure`]).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::fieldpath::Set;
use crate::typed::{compare, Comparison, TypeSchema, TypedError};

/// The versions of one kind, as the field manager needs them.
pub trait KindVersions {
    /// The types of the kind at `api_version`; `None` when the kind is not served in it.
    fn schema(&self, api_version: &str) -> Option<Arc<TypeSchema>>;

    /// Returns `obj`, an object at `from`, converted to `to` (its `apiVersion` set to `to`);
    /// `None` when it cannot be: the kind is not served at `to`, or the conversion failed,
    /// which the implementation then keeps for [`KindVersions::take_failure`].
    fn convert(&self, obj: &Value, from: &str, to: &str) -> Option<Value>;

    /// Takes the error of the first conversion that failed since the last call (a conversion
    /// webhook's), if one did. kube's field manager tells a version the kind is not served in
    /// (its entries are dropped) from a conversion that fails: an apply then fails with the
    /// error, and any other write stores no managedFields at all.
    fn take_failure(&self) -> Option<String> {
        None
    }
}

/// One other version's view of a write.
#[derive(Debug)]
pub(crate) struct VersionView {
    /// What the write changed, seen in that version.
    pub(crate) comparison: Comparison,
    /// `modified ∪ added` of [`VersionView::comparison`].
    pub(crate) changed: Set,
}

/// The views of one write (old object → new object) in the versions of other managers.
pub(crate) struct VersionViews<'a> {
    versions: &'a dyn KindVersions,
    from: &'a str,
    old: &'a Value,
    new: &'a Value,
    /// By version; `None` for a version the objects do not convert to.
    views: HashMap<String, Option<VersionView>>,
}

impl std::fmt::Debug for VersionViews<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionViews").field("from", &self.from).field("views", &self.views).finish()
    }
}

impl<'a> VersionViews<'a> {
    /// The views of the write of `new` over `old`, both at `from`.
    pub(crate) fn new(versions: &'a dyn KindVersions, from: &'a str, old: &'a Value, new: &'a Value) -> Self {
        VersionViews { versions, from, old, new, views: HashMap::new() }
    }

    /// The view in `api_version`, made on first call; `None` when the objects do not convert.
    ///
    /// # Errors
    ///
    /// A converted object that does not fit the version's types.
    pub(crate) fn get(&mut self, api_version: &str) -> Result<Option<&VersionView>, TypedError> {
        if !self.views.contains_key(api_version) {
            let view = self.make(api_version)?;
            self.views.insert(api_version.to_string(), view);
        }
        Ok(self.views.get(api_version).and_then(Option::as_ref))
    }

    fn make(&self, api_version: &str) -> Result<Option<VersionView>, TypedError> {
        let Some(schema) = self.versions.schema(api_version) else { return Ok(None) };
        // The old object first, and the new one only if it converted: a failing webhook
        // is asked once, as kube's field manager asks it.
        let Some(old) = self.versions.convert(self.old, self.from, api_version) else { return Ok(None) };
        let Some(new) = self.versions.convert(self.new, self.from, api_version) else { return Ok(None) };
        let comparison = compare(&schema, &old, &new)?;
        let changed = comparison.modified.union(&comparison.added);
        Ok(Some(VersionView { comparison, changed }))
    }
}
