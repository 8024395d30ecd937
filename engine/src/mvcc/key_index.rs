//! [`KeyIndex`]: the revision history of one key, as generations.
//!
//! A generation runs from a key's creation to its deletion (tombstone). Worked example:
//!
//! ```text
//! put(1.0); put(2.0); tombstone(3.0); put(4.0); tombstone(5.0)
//!   generations: {1.0, 2.0, 3.0(t)}, {4.0, 5.0(t)}, {}
//! compact(2): keeps 2.0 (the newest revision <= 2 in the generation holding 2)
//!   generations: {2.0, 3.0(t)}, {4.0, 5.0(t)}, {}
//! compact(4): the first generation ended at 3 <= 4 and is dropped; 4.0 is kept
//!   generations: {4.0, 5.0(t)}, {}
//! compact(5): only the tombstone 5.0 is left; a lone tombstone is dropped too
//!   generations: {}   (the key is empty and leaves the index)
//! ```
//!
//! `get(at)` finds the generation alive at `at` and the newest revision `<= at` in it; a read at
//! a revision where the key was deleted or not yet created finds nothing. This follows etcd's
//! `key_index.go` exactly, because Range/Watch answers depend on it.

use std::collections::HashSet;

use super::revision::Revision;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Generation {
    /// Number of puts in this generation (the version of its newest revision).
    ver: i64,
    /// The revision that created the key in this generation.
    created: Revision,
    /// Revisions in this generation, ascending; the last is a tombstone unless this is the
    /// newest generation.
    revs: Vec<Revision>,
}

/// What [`KeyIndex::get`] finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// The revision holding the key's value at the asked revision.
    pub modified: Revision,
    /// The revision that created the key (in this generation).
    pub created: Revision,
    /// The key's version at `modified`.
    pub version: i64,
}

/// The generations of one key. Invariant: at least one generation; only the last may be empty.
///
/// The newest state (`live`, `created`, `version` with `modified`) is kept inline as well, so
/// reads at the current revision, which are most reads and every `count`, never follow the
/// generations' heap pointers: walking 100k keys is then bound by the map, not by cache misses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyIndex {
    modified: Revision,
    live: bool,
    created: Revision,
    version: i64,
    generations: Vec<Generation>,
}

impl Default for KeyIndex {
    fn default() -> Self {
        Self {
            modified: Revision::default(),
            live: false,
            created: Revision::default(),
            version: 0,
            generations: vec![Generation::default()],
        }
    }
}

impl KeyIndex {
    /// Records a put at `rev`.
    ///
    /// # Panics
    /// Panics if `rev` is not above the key's last modification: revisions only grow.
    pub fn put(&mut self, rev: Revision) {
        assert!(rev > self.modified, "invariant: revisions only grow ({rev:?} after {:?})", self.modified);
        let g = self.generations.last_mut().expect("invariant: a key index has a generation");
        if g.revs.is_empty() {
            g.created = rev;
        }
        g.revs.push(rev);
        g.ver += 1;
        (self.created, self.version, self.live) = (g.created, g.ver, true);
        self.modified = rev;
    }

    /// Rebuilds the newest state of a key from a stored record (restart path), keeping the
    /// record's own creation revision and version.
    pub fn restore_put(&mut self, created: Revision, modified: Revision, version: i64) {
        let g = self.generations.last_mut().expect("invariant: a key index has a generation");
        if g.revs.is_empty() {
            g.created = created;
        }
        g.revs.push(modified);
        g.ver = version;
        (self.created, self.version, self.live) = (g.created, g.ver, true);
        self.modified = modified;
    }

    /// Records a deletion at `rev` and opens a new, empty generation. Returns false (and changes
    /// nothing) when the key is not alive.
    pub fn tombstone(&mut self, rev: Revision) -> bool {
        if self.generations.last().is_none_or(|g| g.revs.is_empty()) {
            return false;
        }
        self.put(rev);
        self.generations.push(Generation::default());
        self.live = false;
        true
    }

    /// Returns the key's state at main revision `at`, or None if it was not alive then.
    pub fn get(&self, at: i64) -> Option<Found> {
        if at >= self.modified.main {
            // Reads at or after the last change (most reads) see the newest state: no search.
            return self.live.then_some(Found {
                modified: self.modified,
                created: self.created,
                version: self.version,
            });
        }
        let g = self.find_generation(at)?;
        let n = g.revs.iter().rposition(|r| r.main <= at)?;
        Some(Found { modified: g.revs[n], created: g.created, version: g.ver - (g.revs.len() - n - 1) as i64 })
    }

    /// Returns true when the key is alive at its newest revision.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Returns true when no revision is left.
    pub fn is_empty(&self) -> bool {
        self.generations.len() == 1 && self.generations[0].revs.is_empty()
    }

    fn find_generation(&self, at: i64) -> Option<&Generation> {
        let last = self.generations.len() - 1;
        for (i, g) in self.generations.iter().enumerate().rev() {
            let (Some(first), Some(newest)) = (g.revs.first(), g.revs.last()) else { continue };
            if i != last && newest.main <= at {
                // This generation ended (tombstone) at or before `at`: the key was deleted.
                return None;
            }
            if first.main <= at {
                return Some(g);
            }
        }
        None
    }

    /// Drops every revision not needed to answer reads at or after main revision `at`, adding
    /// the revisions `<= at` that must stay to `keep`.
    pub fn compact(&mut self, at: i64, keep: &mut HashSet<Revision>) {
        if self.is_empty() {
            return;
        }
        // The first generation that is still alive at `at` or was created after it.
        let mut gi = 0;
        while gi < self.generations.len() - 1 {
            let tomb = self.generations[gi].revs.last().map_or(i64::MIN, |r| r.main);
            if tomb > at {
                break;
            }
            gi += 1;
        }
        let last = self.generations.len() - 1;
        let g = &mut self.generations[gi];
        if let Some(n) = g.revs.iter().rposition(|r| r.main <= at) {
            keep.insert(g.revs[n]);
            g.revs.drain(..n);
        }
        // A generation reduced to its tombstone answers nothing any more.
        if g.revs.len() == 1 && gi != last && g.revs[0].main <= at {
            keep.remove(&g.revs[0]);
            gi += 1;
        }
        self.generations.drain(..gi);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(main: i64) -> Revision {
        Revision::new(main, 0)
    }

    fn example() -> KeyIndex {
        let mut ki = KeyIndex::default();
        ki.put(r(1));
        ki.put(r(2));
        assert!(ki.tombstone(r(3)));
        ki.put(r(4));
        assert!(ki.tombstone(r(5)));
        ki
    }

    #[test]
    fn get_follows_generations() {
        let ki = example();
        assert_eq!(ki.get(0), None);
        assert_eq!(ki.get(1).map(|f| (f.modified, f.version)), Some((r(1), 1)));
        assert_eq!(ki.get(2).map(|f| (f.modified, f.created, f.version)), Some((r(2), r(1), 2)));
        assert_eq!(ki.get(3), None, "deleted at 3");
        assert_eq!(ki.get(4).map(|f| (f.modified, f.created, f.version)), Some((r(4), r(4), 1)));
        assert_eq!(ki.get(9), None);
        assert!(!ki.is_live());
        assert!(!ki.clone().tombstone(r(6)), "tombstone of a dead key changes nothing");
    }

    #[test]
    fn compaction_walk_through() {
        let mut ki = example();
        let mut keep = HashSet::new();
        ki.compact(2, &mut keep);
        assert_eq!(keep, HashSet::from([r(2)]));
        assert_eq!(ki.get(2).map(|f| f.modified), Some(r(2)));
        assert_eq!(ki.get(4).map(|f| f.modified), Some(r(4)));

        let mut keep = HashSet::new();
        ki.compact(4, &mut keep);
        assert_eq!(keep, HashSet::from([r(4)]));
        assert_eq!(ki.get(4).map(|f| f.modified), Some(r(4)));

        let mut keep = HashSet::new();
        ki.compact(5, &mut keep);
        assert!(keep.is_empty(), "a lone tombstone is not kept");
        assert!(ki.is_empty());
    }

    #[test]
    fn compaction_keeps_live_value() {
        let mut ki = KeyIndex::default();
        ki.put(r(2));
        ki.put(r(4));
        ki.put(r(6));
        let mut keep = HashSet::new();
        ki.compact(5, &mut keep);
        assert_eq!(keep, HashSet::from([r(4)]));
        assert_eq!(ki.get(5).map(|f| (f.modified, f.version, f.created)), Some((r(4), 2, r(2))));
        assert_eq!(ki.get(6).map(|f| f.version), Some(3));
        let mut keep = HashSet::new();
        ki.compact(100, &mut keep);
        assert_eq!(keep, HashSet::from([r(6)]));
        assert!(ki.is_live());
    }
}
