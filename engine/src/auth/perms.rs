//! Key-range permission checks: does the union of a user's granted ranges cover a request's
//! range?
//!
//! Ranges follow etcd's conventions. A permission or request with an empty `range_end` names
//! one key; `range_end` "\0" names every key from `key` on. A one-key request is allowed when
//! any granted range holds the key; a range request only when the granted ranges together
//! cover all of `[key, range_end)`, even if no key exists there yet.
//!
//! Worked example: a role granted READ on `[/a/, /a0)` (`--prefix /a/`) and on `[/b, /c)`.
//! * `get /a/x` (the point `/a/x`) is allowed;
//! * `get /a/ --prefix` (`[/a/, /a0)`) is allowed: the first grant covers it;
//! * `get /a --prefix` (`[/a, /b)`) is denied: `/a` itself and `/a.` are in no grant;
//! * `get /a/ /c` (`[/a/, /c)`) is denied: `[/a0, /b)` is in no grant.

use ballast_proto::authpb::{permission::Type as PermType, Role, User};

/// One end of a range: a key, or past every key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum End {
    Key(Vec<u8>),
    Infinite,
}

/// The half-open interval `[key, range_end)` a permission or request names.
fn interval(key: &[u8], range_end: &[u8]) -> (Vec<u8>, End) {
    match range_end {
        [] => {
            // A point: [key, key + "\0").
            let mut next = key.to_vec();
            next.push(0);
            (key.to_vec(), End::Key(next))
        }
        [0] => (key.to_vec(), End::Infinite),
        end => (key.to_vec(), End::Key(end.to_vec())),
    }
}

/// Whether `typ` grants what `wanted` asks (READWRITE grants both).
fn grants(typ: i32, wanted: PermType) -> bool {
    match PermType::try_from(typ) {
        Ok(PermType::Readwrite) => true,
        Ok(t) => t == wanted,
        Err(_) => false,
    }
}

/// Returns true when the roles of `user` (looked up with `role`) grant `wanted` on
/// `[key, range_end)`.
pub fn permitted<'a>(
    user: &User,
    role: impl Fn(&str) -> Option<&'a Role>,
    key: &[u8],
    range_end: &[u8],
    wanted: PermType,
) -> bool {
    let mut granted: Vec<(Vec<u8>, End)> = user
        .roles
        .iter()
        .filter_map(|r| role(r))
        .flat_map(|r| r.key_permission.iter())
        .filter(|p| grants(p.perm_type, wanted))
        .map(|p| interval(&p.key, &p.range_end))
        .collect();
    if range_end.is_empty() {
        // A point is allowed when any grant holds it.
        return granted.iter().any(|(begin, end)| {
            begin.as_slice() <= key
                && match end {
                    End::Key(e) => key < e.as_slice(),
                    End::Infinite => true,
                }
        });
    }
    let (want_begin, want_end) = interval(key, range_end);
    if let End::Key(e) = &want_end {
        if e <= &want_begin {
            return true; // an empty range reads nothing
        }
    }
    granted.sort();
    // Walk the grants in order, extending the covered prefix of the wanted range.
    let mut covered_to = End::Key(want_begin);
    for (begin, end) in granted {
        let End::Key(cursor) = &covered_to else { break };
        if begin.as_slice() > cursor.as_slice() {
            break; // a gap before this grant
        }
        if end > covered_to {
            covered_to = end;
        }
    }
    covered_to >= want_end
}

#[cfg(test)]
mod tests {
    use ballast_proto::authpb::Permission;

    use super::*;

    fn role(perms: &[(&str, &str, PermType)]) -> Role {
        Role {
            name: "r".into(),
            key_permission: perms
                .iter()
                .map(|(k, e, t)| Permission {
                    perm_type: *t as i32,
                    key: k.as_bytes().to_vec().into(),
                    range_end: e.as_bytes().to_vec().into(),
                })
                .collect(),
        }
    }

    fn check(r: &Role, key: &str, end: &str, t: PermType) -> bool {
        let user = User { roles: vec!["r".into()], ..Default::default() };
        permitted(&user, |_| Some(r), key.as_bytes(), end.as_bytes(), t)
    }

    #[test]
    fn the_worked_example_of_the_module_doc() {
        let r = role(&[("/a/", "/a0", PermType::Read), ("/b", "/c", PermType::Read)]);
        assert!(check(&r, "/a/x", "", PermType::Read));
        assert!(check(&r, "/a/", "/a0", PermType::Read));
        assert!(!check(&r, "/a", "/b", PermType::Read));
        assert!(!check(&r, "/a/", "/c", PermType::Read));
        assert!(!check(&r, "/a/x", "", PermType::Write), "read does not grant write");
    }

    #[test]
    fn adjacent_grants_cover_a_range_together_and_from_key_needs_an_open_grant() {
        let r = role(&[("a", "m", PermType::Readwrite), ("m", "\0", PermType::Write)]);
        assert!(check(&r, "b", "z", PermType::Write));
        assert!(check(&r, "b", "\0", PermType::Write), "[b, inf) is covered by [a, m) + [m, inf)");
        assert!(!check(&r, "b", "\0", PermType::Read), "[m, inf) grants write only");
        assert!(!check(&r, "", "\0", PermType::Write), "the empty key is in no grant");
        let single = role(&[("k", "", PermType::Read)]);
        assert!(check(&single, "k", "", PermType::Read));
        assert!(!check(&single, "k", "l", PermType::Read), "a point grant does not cover [k, l)");
        assert!(check(&single, "k", "k\0", PermType::Read), "but covers [k, k\\0)");
    }
}
