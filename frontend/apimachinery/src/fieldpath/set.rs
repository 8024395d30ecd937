//! Sets of field paths, as trees: the fields a manager owns, or the fields two objects differ
//! in.
//!
//! A set holds its *members* (paths that end here) and its *children* (paths that go on below
//! an element). `.spec.replicas` and `.spec.template.metadata.labels.app` as a set:
//!
//! ```text
//! children: spec -> { members: [replicas]
//!                     children: template -> { children: metadata -> { children: labels -> { members: [app] } } } }
//! ```
//!
//! The set operations are kube's, including one asymmetry: [`Set::difference`] removes members
//! and descends into children present in both, but a member of the right side does not remove
//! the left side's children under it (owning `.spec` is not owning `.spec.replicas`).

use std::collections::{BTreeMap, BTreeSet};

use super::{Path, PathElement};

/// A set of paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    /// Paths that end at one of these elements.
    pub members: BTreeSet<PathElement>,
    /// Paths that go on below one of these elements. Never holds an empty set.
    pub children: BTreeMap<PathElement, Set>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Set {
        Set::default()
    }

    /// Whether the set holds no path.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds `path` (the empty path adds nothing).
    pub fn insert(&mut self, path: &[PathElement]) {
        // Elements already present are not copied: sets are built path by path, most of whose
        // elements the set already has.
        match path {
            [] => {}
            [last] => {
                if !self.members.contains(last) {
                    self.members.insert(last.clone());
                }
            }
            [first, rest @ ..] => match self.children.get_mut(first) {
                Some(child) => child.insert(rest),
                None => {
                    let mut child = Set::new();
                    child.insert(rest);
                    self.children.insert(first.clone(), child);
                }
            },
        }
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// The child set under `element`, if any.
    pub fn child(&self, element: &PathElement) -> Option<&Set> {
        self.children.get(element)
    }

    /// Returns the paths in both sets.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.union_in_place(other);
        out
    }

    /// Adds every path of `other`.
    pub fn union_in_place(&mut self, other: &Set) {
        self.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            match self.children.get_mut(pe) {
                Some(mine) => mine.union_in_place(child),
                None => {
                    self.children.insert(pe.clone(), child.clone());
                }
            }
        }
    }

    /// Adds every path of `other`, taking it.
    pub fn union_in_place_owned(&mut self, other: Set) {
        if self.is_empty() {
            *self = other;
            return;
        }
        self.members.extend(other.members);
        for (pe, child) in other.children {
            match self.children.get_mut(&pe) {
                Some(mine) => mine.union_in_place_owned(child),
                None => {
                    self.children.insert(pe, child);
                }
            }
        }
    }

    /// Returns the paths of `self` that are not in `other` (see the module doc for the one
    /// asymmetry).
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            let rest = match other.children.get(pe) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                children.insert(pe.clone(), rest);
            }
        }
        Set { members, children }
    }

    /// Whether a path is in both sets (what a non-empty [`Set::intersection`] says, without
    /// building it).
    pub fn intersects(&self, other: &Set) -> bool {
        let (few, many) = if self.members.len() <= other.members.len() {
            (&self.members, &other.members)
        } else {
            (&other.members, &self.members)
        };
        few.iter().any(|m| many.contains(m))
            || self.children.iter().any(|(pe, child)| other.children.get(pe).is_some_and(|o| child.intersects(o)))
    }

    /// Takes the paths of `other` out of `self`: [`Set::difference`] without a copy.
    pub fn remove_in_place(&mut self, other: &Set) {
        self.members.retain(|m| !other.members.contains(m));
        self.children.retain(|pe, child| {
            if let Some(theirs) = other.children.get(pe) {
                child.remove_in_place(theirs);
            }
            !child.is_empty()
        });
    }

    /// Returns the paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            if let Some(theirs) = other.children.get(pe) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    children.insert(pe.clone(), both);
                }
            }
        }
        Set { members, children }
    }

    /// Calls `f` with every path: this level's members first, then each child's paths, in
    /// element order (kube's iteration order, which orders conflict causes).
    pub fn for_each_path(&self, f: &mut impl FnMut(&Path)) {
        let mut prefix = Vec::new();
        self.walk(&mut prefix, f);
    }

    fn walk(&self, prefix: &mut Vec<PathElement>, f: &mut impl FnMut(&Path)) {
        for m in &self.members {
            prefix.push(m.clone());
            f(prefix);
            prefix.pop();
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.walk(prefix, f);
            prefix.pop();
        }
    }

    /// Returns every path, in [`Set::for_each_path`] order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.for_each_path(&mut |p| out.push(p.to_vec()));
        out
    }

    /// Returns the set without the paths that start with one of `prefixes` (kube's reset
    /// fields: a subresource never owns what it cannot write).
    pub fn without_prefixes(&self, prefixes: &[&[PathElement]]) -> Set {
        let mut out = self.clone();
        for prefix in prefixes {
            out.remove_prefix(prefix);
        }
        out
    }

    fn remove_prefix(&mut self, prefix: &[PathElement]) {
        match prefix {
            [] => {}
            [last] => {
                self.members.remove(last);
                self.children.remove(last);
            }
            [first, rest @ ..] => {
                if let Some(child) = self.children.get_mut(first) {
                    child.remove_prefix(rest);
                    if child.is_empty() {
                        self.children.remove(first);
                    }
                }
            }
        }
    }

    /// Returns the set with only the paths under `prefix` (which stays part of them).
    pub fn with_prefix_only(&self, prefix: &[PathElement]) -> Set {
        match prefix {
            [] => self.clone(),
            [first, rest @ ..] => {
                let mut out = Set::new();
                if rest.is_empty() && self.members.contains(first) {
                    out.members.insert(first.clone());
                }
                if let Some(child) = self.children.get(first) {
                    let inner = child.with_prefix_only(rest);
                    if !inner.is_empty() {
                        out.children.insert(first.clone(), inner);
                    }
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str) -> PathElement {
        PathElement::Field(name.into())
    }

    fn set(paths: &[&[&str]]) -> Set {
        let mut s = Set::new();
        for p in paths {
            let path: Vec<PathElement> = p.iter().map(|n| f(n)).collect();
            s.insert(&path);
        }
        s
    }

    #[test]
    fn operations_follow_kube() {
        let a = set(&[&["spec", "replicas"], &["spec", "paused"], &["metadata", "labels", "app"]]);
        let b = set(&[&["spec", "replicas"], &["spec"]]);
        assert_eq!(a.union(&b).paths().len(), 4);
        // Owning `.spec` does not take `.spec.paused` away.
        assert_eq!(a.difference(&b), set(&[&["spec", "paused"], &["metadata", "labels", "app"]]));
        assert_eq!(a.intersection(&b), set(&[&["spec", "replicas"]]));
        let mut taken = a.clone();
        taken.remove_in_place(&b);
        assert_eq!(taken, a.difference(&b));
        assert!(a.has(&[f("spec"), f("paused")]) && !a.has(&[f("spec")]));
        assert_eq!(a.without_prefixes(&[&[f("spec")]]), set(&[&["metadata", "labels", "app"]]));
        assert_eq!(a.with_prefix_only(&[f("spec")]), set(&[&["spec", "replicas"], &["spec", "paused"]]));
        let order: Vec<String> =
            b.paths().iter().map(|p| p.iter().map(ToString::to_string).collect::<String>()).collect();
        assert_eq!(order, [".spec", ".spec.replicas"]);
    }
}
