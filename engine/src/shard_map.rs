//! [`ShardMap`]: which shard owns a key, and which shards a Range or Watch over a key range can
//! touch. This is the shard map of `engine/SHARDING.md`.
//!
//! A key's shard is FNV-1a 64 over `resource \0 namespace`, modulo the shard count, where kube's
//! key layout names the resource and namespace:
//!
//! * `/registry/pods/ns1/web-0`: resource `pods`, namespace `ns1`;
//! * `/registry/nodes/n1`: resource `nodes`, namespace empty (cluster-scoped);
//! * `/registry/stable.example.com/crontabs/ns/x`: a dot in the first segment names an API group,
//!   so the resource is `stable.example.com/crontabs`, namespace `ns`;
//! * `/registry/apiregistration.k8s.io/apiservices/v1.apps`: resource
//!   `apiregistration.k8s.io/apiservices`, namespace empty;
//! * `compact_rev_key`, `foo` (anything outside `/registry/`): shard 0, not hashed.
//!
//! The namespace is the segment after the resource when another `/` follows it, so every key
//! under `/registry/pods/ns1/` lands with namespace `ns1` whatever its name holds. The map does
//! not know which resources are namespaced: kube's `/registry/services/specs/<ns>/<name>` maps
//! with namespace `specs`, which puts all services on one shard. That costs balance, not
//! correctness, since placement only needs to be a function of the key.
//!
//! Pure and stateless beyond the shard count: no I/O, no allocation. The hash must stay stable
//! across releases and platforms (data directories record the shard count, not the placement),
//! which is why it is spelled out here rather than taken from `std`.

// #[PerformanceCriticalPath]
use std::cmp::Ordering;

/// The most shards a map may have: one executor thread each, so far more than any machine runs.
pub const MAX_SHARDS: u32 = 256;

/// Every kube key starts with this; anything else belongs to shard 0.
const REGISTRY: &[u8] = b"/registry/";

/// The prefix end of [`REGISTRY`]: every key in `[REGISTRY, REGISTRY_END)` starts with it.
const REGISTRY_END: &[u8] = b"/registry0";

/// Why a [`ShardMap`] could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardMapError {
    /// The shard count is outside `1..=MAX_SHARDS`.
    #[error("shard count {requested} is outside 1..={max}")]
    ShardCount {
        /// The count asked for.
        requested: u32,
        /// The largest count allowed ([`MAX_SHARDS`]).
        max: u32,
    },
}

/// The shards a key range can touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shards {
    /// Every key the range can contain belongs to this shard.
    One(u32),
    /// The range may hold keys of several shards: ask every shard and merge the answers
    /// (see [`crate::apply::range_merge`]).
    All,
}

/// The placement of keys on `N` shards, `N` fixed at bootstrap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardMap {
    shards: u32,
}

impl ShardMap {
    /// Returns the map for `shards` shards.
    ///
    /// # Errors
    /// [`ShardMapError::ShardCount`] when `shards` is 0 or above [`MAX_SHARDS`].
    ///
    /// # Examples
    /// ```
    /// use ballast_engine::shard_map::ShardMap;
    /// let map = ShardMap::new(8).expect("8 is a valid shard count");
    /// assert_eq!(map.shard_of(b"compact_rev_key"), 0);
    /// assert!(ShardMap::new(0).is_err());
    /// ```
    pub fn new(shards: u32) -> Result<Self, ShardMapError> {
        if shards == 0 || shards > MAX_SHARDS {
            return Err(ShardMapError::ShardCount { requested: shards, max: MAX_SHARDS });
        }
        Ok(Self { shards })
    }

    /// Returns the number of shards; shards are numbered `0..shard_count()`.
    pub fn shard_count(&self) -> u32 {
        self.shards
    }

    /// Returns the shard that owns `key`.
    pub fn shard_of(&self, key: &[u8]) -> u32 {
        if self.shards == 1 {
            return 0;
        }
        match Unit::of(key) {
            Some(unit) => (unit.hash() % u64::from(self.shards)) as u32,
            None => 0,
        }
    }

    /// Returns the shards a range named the etcd way can touch: `range_end` empty is the single
    /// key `key`, `"\0"` is every key `>= key`, anything else is `[key, range_end)`.
    ///
    /// The answer is sound, not exact: [`Shards::One`] means no key of the range can belong to
    /// another shard; [`Shards::All`] is returned whenever that cannot be shown from the bounds
    /// alone. One shard is proven for a single key, for a range inside one
    /// `/registry/<resource>/<namespace>/` prefix, and for a range entirely outside
    /// `/registry/`. A prefix of a resource (`/registry/pods/`) is `All`, even for a
    /// cluster-scoped resource: nothing stops a key such as `/registry/nodes/a/b` from existing,
    /// and it would map with namespace `a`.
    ///
    /// # Examples
    /// ```
    /// use ballast_engine::shard_map::{ShardMap, Shards};
    /// let map = ShardMap::new(8).expect("valid");
    /// let ns = map.shard_of(b"/registry/pods/ns1/web-0");
    /// assert_eq!(map.shards_of(b"/registry/pods/ns1/", b"/registry/pods/ns10"), Shards::One(ns));
    /// assert_eq!(map.shards_of(b"/registry/pods/", b"/registry/pods0"), Shards::All);
    /// assert_eq!(map.shards_of(b"foo", b"\0"), Shards::One(0));
    /// ```
    pub fn shards_of(&self, key: &[u8], range_end: &[u8]) -> Shards {
        if self.shards == 1 {
            return Shards::One(0);
        }
        let end = match range_end {
            [] => return Shards::One(self.shard_of(key)),
            [0] => None,
            end => Some(end),
        };
        if let Some(end) = end {
            // An empty range holds no key, so any single shard answers it (with nothing).
            if end <= key || is_successor(key, end) {
                return Shards::One(self.shard_of(key));
            }
            if end <= REGISTRY {
                return Shards::One(0);
            }
        }
        if key >= REGISTRY_END {
            return Shards::One(0);
        }
        if key < REGISTRY {
            // The range starts outside and reaches `/registry/` itself or beyond.
            return Shards::All;
        }
        // `key` starts with `/registry/` here. The range is one unit's only if it stays under
        // the unit prefix of `key`: every key between a prefix and its prefix end starts with it.
        match (end, Unit::of(key).and_then(|u| u.prefix_len)) {
            (Some(end), Some(len)) if at_most_prefix_end(end, &key[..len]) => Shards::One(self.shard_of(key)),
            _ => Shards::All,
        }
    }
}

/// Returns true when `end` is `key` followed by one zero byte: `[key, end)` holds `key` alone.
fn is_successor(key: &[u8], end: &[u8]) -> bool {
    end.len() == key.len() + 1 && end.starts_with(key) && end[key.len()] == 0
}

/// Returns true when `end <= prefix_end(prefix)` for a `prefix` ending in `/`, whose prefix end
/// is the prefix with that `/` replaced by `0` (the next byte); compared without allocating.
fn at_most_prefix_end(end: &[u8], prefix: &[u8]) -> bool {
    let stem = &prefix[..prefix.len() - 1];
    end.iter().cmp(stem.iter().chain(std::iter::once(&b'0'))) != Ordering::Greater
}

/// What a `/registry/` key hashes on, as slices of the key.
#[derive(Debug, PartialEq, Eq)]
struct Unit<'a> {
    resource: &'a [u8],
    namespace: &'a [u8],
    /// The length of `/registry/<resource>/<namespace>/` when the key holds that whole prefix
    /// (its namespace is followed by `/`): every key with this prefix maps to the same unit.
    prefix_len: Option<usize>,
}

impl<'a> Unit<'a> {
    /// Parses `key`; None when it is outside `/registry/` (shard 0).
    fn of(key: &'a [u8]) -> Option<Self> {
        let rest = key.strip_prefix(REGISTRY)?;
        let first = segment(rest);
        let resource_len = match rest.get(first.len() + 1..) {
            // A dot names an API group: `<group>/<resource>`, as kube stores CRDs.
            Some(after) if first.contains(&b'.') => first.len() + 1 + segment(after).len(),
            _ => first.len(),
        };
        let resource = &rest[..resource_len];
        let (namespace, prefix_len) = match rest.get(resource_len + 1..) {
            Some(tail) if segment(tail).len() < tail.len() => {
                let ns = segment(tail);
                (ns, Some(REGISTRY.len() + resource_len + 1 + ns.len() + 1))
            }
            // Nothing, or one last segment: a cluster-scoped object's name, not a namespace.
            _ => (&[][..], None),
        };
        Some(Self { resource, namespace, prefix_len })
    }

    /// FNV-1a 64 over `resource \0 namespace`.
    fn hash(&self) -> u64 {
        let h = fnv1a64(FNV_OFFSET, self.resource);
        fnv1a64(fnv1a64(h, &[0]), self.namespace)
    }
}

/// Returns `bytes` up to (not including) its first `/`, or all of it.
fn segment(bytes: &[u8]) -> &[u8] {
    match bytes.iter().position(|&b| b == b'/') {
        Some(i) => &bytes[..i],
        None => bytes,
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Continues an FNV-1a 64 hash from state `h` over `bytes`.
fn fnv1a64(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::mvcc::KeyRange;

    fn map(n: u32) -> ShardMap {
        ShardMap::new(n).expect("valid shard count")
    }

    fn unit(key: &str) -> Option<(&str, &str)> {
        Unit::of(key.as_bytes())
            .map(|u| (std::str::from_utf8(u.resource).expect("utf8"), std::str::from_utf8(u.namespace).expect("utf8")))
    }

    #[test]
    fn shard_count_is_checked() {
        assert_eq!(ShardMap::new(0), Err(ShardMapError::ShardCount { requested: 0, max: MAX_SHARDS }));
        assert!(ShardMap::new(MAX_SHARDS + 1).is_err());
        assert_eq!(map(1).shard_count(), 1);
        assert_eq!(map(MAX_SHARDS).shard_count(), MAX_SHARDS);
    }

    #[test]
    fn fnv1a64_matches_published_vectors() {
        assert_eq!(fnv1a64(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(FNV_OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
        // The hash runs over `resource \0 namespace` as one byte string.
        let u = Unit::of(b"/registry/pods/ns1/x").expect("registry key");
        assert_eq!(u.hash(), fnv1a64(FNV_OFFSET, b"pods\0ns1"));
    }

    #[test]
    fn placement_is_pinned() {
        // Placement is persistent: a change here would strand existing data on the wrong shard.
        let m = map(8);
        let got: Vec<u32> =
            ["/registry/pods/default/a", "/registry/pods/kube-system/a", "/registry/nodes/n1", "/registry/nodes/n2"]
                .iter()
                .map(|k| m.shard_of(k.as_bytes()))
                .collect();
        let want: Vec<u32> = [&b"pods\0default"[..], b"pods\0kube-system", b"nodes\0", b"nodes\0"]
            .iter()
            .map(|s| (fnv1a64(FNV_OFFSET, s) % 8) as u32)
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn kube_keys_parse_into_resource_and_namespace() {
        assert_eq!(unit("/registry/pods/ns1/web-0"), Some(("pods", "ns1")));
        assert_eq!(unit("/registry/pods/ns1/"), Some(("pods", "ns1")));
        assert_eq!(unit("/registry/pods/ns1/a/b/c"), Some(("pods", "ns1")));
        assert_eq!(unit("/registry/nodes/n1"), Some(("nodes", "")));
        assert_eq!(unit("/registry/namespaces/ns1"), Some(("namespaces", "")));
        assert_eq!(unit("/registry/stable.example.com/crontabs/ns/x"), Some(("stable.example.com/crontabs", "ns")));
        assert_eq!(
            unit("/registry/apiregistration.k8s.io/apiservices/v1.apps"),
            Some(("apiregistration.k8s.io/apiservices", ""))
        );
        // Documented: the map does not know services are stored under `specs/`.
        assert_eq!(unit("/registry/services/specs/ns/name"), Some(("services", "specs")));
        assert_eq!(unit("/registry/pods"), Some(("pods", "")));
        assert_eq!(unit("/registry/"), Some(("", "")));
        assert_eq!(unit("/registry/a.b"), Some(("a.b", "")));
        assert_eq!(unit("/registry/a.b/"), Some(("a.b/", "")));
        assert_eq!(unit("compact_rev_key"), None);
        assert_eq!(unit("foo"), None);
        assert_eq!(unit("/registry"), None);
    }

    #[test]
    fn keys_outside_registry_and_a_single_shard_go_to_shard_zero() {
        let m = map(16);
        for key in ["compact_rev_key", "foo", "", "/registry", "/registry0", "\u{7f}"] {
            assert_eq!(m.shard_of(key.as_bytes()), 0, "{key}");
        }
        let one = map(1);
        assert_eq!(one.shard_of(b"/registry/pods/ns1/x"), 0);
        assert_eq!(one.shards_of(b"\0", b"\0"), Shards::One(0));
    }

    #[test]
    fn objects_of_one_namespace_share_a_shard() {
        let m = map(16);
        let s = m.shard_of(b"/registry/pods/ns1/a");
        assert_eq!(m.shard_of(b"/registry/pods/ns1/b"), s);
        assert_eq!(m.shard_of(b"/registry/pods/ns1/"), s);
        let crd = m.shard_of(b"/registry/stable.example.com/crontabs/ns/x");
        assert_eq!(m.shard_of(b"/registry/stable.example.com/crontabs/ns/y"), crd);
        let nodes = m.shard_of(b"/registry/nodes/n1");
        assert_eq!(m.shard_of(b"/registry/nodes/n2"), nodes);
        // Namespaces spread: 64 namespaces on 16 shards do not all land on one.
        let spread: std::collections::BTreeSet<u32> =
            (0..64).map(|i| m.shard_of(format!("/registry/pods/ns{i}/a").as_bytes())).collect();
        assert!(spread.len() > 8, "{spread:?}");
    }

    #[test]
    fn ranges_kube_sends() {
        let m = map(16);
        let ns1 = m.shard_of(b"/registry/pods/ns1/a");
        let n1 = m.shard_of(b"/registry/nodes/n1");
        // GET: one key, also spelled `[k, k\0)`.
        assert_eq!(m.shards_of(b"/registry/nodes/n1", b""), Shards::One(n1));
        assert_eq!(m.shards_of(b"/registry/nodes/n1", b"/registry/nodes/n1\0"), Shards::One(n1));
        // LIST in one namespace, and its continuation pages.
        assert_eq!(m.shards_of(b"/registry/pods/ns1/", b"/registry/pods/ns10"), Shards::One(ns1));
        assert_eq!(m.shards_of(b"/registry/pods/ns1/a\0", b"/registry/pods/ns10"), Shards::One(ns1));
        // A CRD in one namespace.
        let crd = m.shard_of(b"/registry/stable.example.com/crontabs/ns/x");
        assert_eq!(
            m.shards_of(b"/registry/stable.example.com/crontabs/ns/", b"/registry/stable.example.com/crontabs/ns0"),
            Shards::One(crd)
        );
        // LIST across namespaces, of a cluster-scoped resource, of everything.
        assert_eq!(m.shards_of(b"/registry/pods/", b"/registry/pods0"), Shards::All);
        assert_eq!(m.shards_of(b"/registry/nodes/", b"/registry/nodes0"), Shards::All);
        assert_eq!(m.shards_of(b"/registry/", b"/registry0"), Shards::All);
        assert_eq!(m.shards_of(b"\0", b"\0"), Shards::All);
        // Ending past the namespace's prefix end reaches other namespaces.
        assert_eq!(m.shards_of(b"/registry/pods/ns1/", b"/registry/pods/ns100"), Shards::All);
        // Without the `/` after the namespace, `/registry/pods/ns1` itself (namespace empty) is in.
        assert_eq!(m.shards_of(b"/registry/pods/ns1", b"/registry/pods/ns10"), Shards::All);
    }

    #[test]
    fn ranges_outside_registry() {
        let m = map(16);
        assert_eq!(m.shards_of(b"compact_rev_key", b""), Shards::One(0));
        assert_eq!(m.shards_of(b"foo", b"\0"), Shards::One(0));
        assert_eq!(m.shards_of(b"foo", b"fop"), Shards::One(0));
        assert_eq!(m.shards_of(b"/a", b"/registry/"), Shards::One(0));
        assert_eq!(m.shards_of(b"/registry0", b"\0"), Shards::One(0));
        // Straddling either end of `/registry/` reaches registry keys.
        assert_eq!(m.shards_of(b"/a", b"/registry/\0"), Shards::All);
        assert_eq!(m.shards_of(b"/a", b"\0"), Shards::All);
        assert_eq!(m.shards_of(b"/registry/zzz/", b"/registry1"), Shards::All);
        assert_eq!(m.shards_of(b"/registry/zzz/ns/", b"\0"), Shards::All);
        // An empty range holds nothing; any one shard answers it.
        assert!(matches!(m.shards_of(b"/registry/pods/", b"/a"), Shards::One(_)));
    }

    /// Keys from a small alphabet around the boundaries the map cares about: `/`, `.`, the
    /// `/registry/` prefix and its neighbours, and bytes either side of `/`.
    fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
        let head = prop::sample::select(vec![
            &b"/registry/"[..],
            b"/registry",
            b"/registry0",
            b"/registry.",
            b"/registry/a.b/",
            b"/registry/a/",
            b"",
        ]);
        let tail = proptest::collection::vec(prop::sample::select(&b"/.ab0\0\xff"[..]), 0..8);
        (head, tail).prop_map(|(h, t)| [h, &t[..]].concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        // Soundness: when the map answers One(s), every key of the range maps to s. Probes are
        // drawn at the range's start and just below its end, where a wrong answer would show.
        #[test]
        fn one_shard_answers_are_sound(
            n in prop::sample::select(vec![2u32, 3, 7, 256]),
            key in key_strategy(),
            end_kind in 0u8..4,
            end in key_strategy(),
            suffixes in proptest::collection::vec(key_strategy(), 1..12),
            others in proptest::collection::vec(key_strategy(), 0..12),
        ) {
            let m = map(n);
            let range_end = match end_kind {
                0 => Vec::new(),
                1 => vec![0],
                _ => end.clone(),
            };
            let kr = KeyRange::new(key.clone().into(), range_end.clone().into());
            let mut probes = vec![key.clone()];
            for s in &suffixes {
                probes.push([&key[..], s].concat());
                // Below the end: its last byte lowered, then extended.
                if let Some((&last, stem)) = end.split_last() {
                    if last > 0 {
                        probes.push([stem, &[last - 1], s].concat());
                    }
                }
            }
            probes.extend(others);
            if let Shards::One(s) = m.shards_of(&key, &range_end) {
                let unit = |p: &[u8]| Unit::of(p).map(|u| (u.resource.to_vec(), u.namespace.to_vec()));
                let inside: Vec<&Vec<u8>> = probes.iter().filter(|p| kr.contains(p)).collect();
                for p in &inside {
                    prop_assert_eq!(m.shard_of(p), s, "key {:?} in range {:?}", p, kr);
                    // Stronger than the shard check, which a hash collision can pass: every proof
                    // is about units, so the range's keys share one unit (or none, outside).
                    prop_assert_eq!(unit(p), unit(inside[0]), "key {:?} in range {:?}", p, kr);
                }
            }
        }
    }
}
