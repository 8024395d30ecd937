//! Which shard leadership a member hands to another so that the shards' leaders spread over the
//! members: with `N` members and `S` shards, each ends up leading `S / N` shards, give or take
//! one (see `engine/SHARDING.md`, "Multi-member clusters with several shards").
//!
//! Every member decides for the shards it leads only, from its own view of every shard's leader
//! (it replicates every shard, so it hears every leader's heartbeats). A member that leads at
//! least two more shards than the member leading the fewest hands one of its shards to that
//! member by raft's leader transfer; a difference of one is left alone, so two members never
//! pass a shard back and forth. Each transfer lowers the spread between the most and the least
//! loaded member or leaves it and lowers how many members sit at the extremes, so the
//! leaderships settle after a few transfers whatever the start.
//!
//! ```text
//!   3 members, 6 shards, all led by m1:  m1 6, m2 0, m3 0
//!   m1 hands shard 5 to m2 (lowest count, lowest ID)   m1 5, m2 1, m3 0
//!   m1 hands shard 4 to m3                              m1 4, m2 1, m3 1
//!   ... m1 2, m2 2, m3 2: no member leads two more than another; done
//! ```

/// The shard this member should hand over now and to whom, or None when the leaderships are
/// balanced as far as this member is concerned.
///
/// `leaders` holds every shard's leader as this member last saw it (0: none known);
/// `candidates` the members that may take a leadership (voters this member hears from,
/// itself included); `me` this member's raft ID. Shard 0's leadership is handed over last, since
/// the revision allocator lives with it and moving it leaves a gap in the revisions.
pub fn hand_over(leaders: &[u64], candidates: &[u64], me: u64) -> Option<(u32, u64)> {
    let led = |m: u64| leaders.iter().filter(|l| **l == m).count();
    let mine = led(me);
    let (to, fewest) = candidates.iter().filter(|c| **c != me).map(|c| (*c, led(*c))).min_by_key(|(c, n)| (*n, *c))?;
    if mine < fewest + 2 {
        return None;
    }
    let shard = (0..leaders.len()).rev().find(|s| leaders[*s] == me)?;
    Some((shard as u32, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies transfers chosen by each member in turn until none moves; returns the counts.
    fn settle(mut leaders: Vec<u64>, members: &[u64]) -> Vec<usize> {
        for _ in 0..100 {
            let moved = members.iter().find_map(|m| hand_over(&leaders, members, *m));
            let Some((s, to)) = moved else { break };
            leaders[s as usize] = to;
        }
        members.iter().map(|m| leaders.iter().filter(|l| *l == m).count()).collect()
    }

    #[test]
    fn six_shards_over_three_members_settle_at_two_each() {
        let members = [1, 2, 3];
        assert_eq!(hand_over(&[1; 6], &members, 1), Some((5, 2)), "the highest shard to the least loaded");
        assert_eq!(hand_over(&[1; 6], &members, 2), None, "a member decides for the shards it leads");
        assert_eq!(settle(vec![1; 6], &members), vec![2, 2, 2]);
        assert_eq!(settle(vec![3, 3, 1, 3, 3, 3], &members), vec![2, 2, 2]);
    }

    #[test]
    fn a_difference_of_one_is_left_alone() {
        let members = [1, 2, 3];
        assert_eq!(settle(vec![1; 4], &members), vec![2, 1, 1]);
        assert_eq!(hand_over(&[1, 1, 2, 3], &members, 1), None);
        assert_eq!(settle(vec![2; 8], &members), vec![3, 3, 2]);
    }

    #[test]
    fn shard_0_moves_last_and_only_to_candidates() {
        assert_eq!(hand_over(&[1, 1, 2], &[1, 2], 1), None);
        assert_eq!(hand_over(&[1, 2, 2, 2], &[1, 2, 3], 2), Some((3, 3)));
        assert_eq!(hand_over(&[1, 3, 3], &[1, 3], 1), None, "m1 leads shard 0 only");
        // A member this one does not hear from (not a candidate) is given nothing.
        assert_eq!(hand_over(&[1; 4], &[1, 2], 1), Some((3, 2)));
        assert_eq!(hand_over(&[1; 4], &[1], 1), None, "no one to hand to");
        // Unknown leaders (0) count for no member.
        assert_eq!(hand_over(&[1, 0, 1, 0], &[1, 2], 1), Some((2, 2)));
    }
}
