//! Revisions and their encoding as history keys.
//!
//! A revision is `(main, sub)`: `main` is the store revision a write transaction created, `sub`
//! numbers the changes inside that transaction. History records in `Cf::Kv` are keyed by the
//! revision in big-endian so a forward scan walks history in commit order, with one trailing
//! byte telling a put (`p`) from a tombstone (`t`):
//!
//! ```text
//! put a=1 (rev 2)        -> 00..02 00..00 'p'   KeyValue{a, create 2, mod 2, ver 1}
//! txn put b, del a (3)   -> 00..03 00..00 'p'   KeyValue{b, ...}
//!                           00..03 00..01 't'   KeyValue{a}
//! ```

/// A store revision: the transaction's main revision and the change's index inside it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Revision {
    /// The store revision of the write transaction.
    pub main: i64,
    /// The position of the change within that transaction, from 0.
    pub sub: i64,
}

impl Revision {
    /// Returns the revision `(main, sub)`.
    pub const fn new(main: i64, sub: i64) -> Self {
        Self { main, sub }
    }
}

/// Length of an encoded history key.
pub const REV_KEY_LEN: usize = 17;
const PUT_MARK: u8 = b'p';
const TOMBSTONE_MARK: u8 = b't';

/// Encodes the history key of `rev`.
pub fn encode_key(rev: Revision, tombstone: bool) -> [u8; REV_KEY_LEN] {
    let mut out = [0u8; REV_KEY_LEN];
    out[..8].copy_from_slice(&(rev.main as u64).to_be_bytes());
    out[8..16].copy_from_slice(&(rev.sub as u64).to_be_bytes());
    out[16] = if tombstone { TOMBSTONE_MARK } else { PUT_MARK };
    out
}

/// Returns the smallest history key of main revision `main`; a scan bound.
pub fn main_bound(main: i64) -> [u8; 8] {
    (main.max(0) as u64).to_be_bytes()
}

/// Decodes a history key into its revision and whether it is a tombstone.
pub fn decode_key(key: &[u8]) -> Option<(Revision, bool)> {
    if key.len() != REV_KEY_LEN {
        return None;
    }
    let main = u64::from_be_bytes(key[..8].try_into().ok()?) as i64;
    let sub = u64::from_be_bytes(key[8..16].try_into().ok()?) as i64;
    match key[16] {
        PUT_MARK => Some((Revision::new(main, sub), false)),
        TOMBSTONE_MARK => Some((Revision::new(main, sub), true)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_in_revision_order_and_round_trip() {
        let revs = [Revision::new(2, 0), Revision::new(2, 1), Revision::new(3, 0), Revision::new(256, 0)];
        let keys: Vec<_> = revs.iter().map(|r| encode_key(*r, r.sub == 1)).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert_eq!(decode_key(&keys[1]), Some((Revision::new(2, 1), true)));
        assert_eq!(decode_key(&keys[3]), Some((Revision::new(256, 0), false)));
        assert_eq!(decode_key(b"short"), None);
        assert!(main_bound(3).as_slice() > keys[1].as_slice());
        assert!(main_bound(3).as_slice() <= keys[2].as_slice());
    }
}
