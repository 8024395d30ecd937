//! [`Link`]: the plain raft connection to one peer as the shard threads and the peer's sender
//! thread share it, so that a shard thread can write its round's frame itself.
//!
//! Handing every parcel to the sender thread costs a thread wake-up per raft message at the
//! sending member, on the path of every round: the leader's append and the follower's answer
//! each wait for a thread that is usually asleep. So a shard thread writes its frame to the
//! socket itself when it can do so at once: the socket is plain TCP (a TLS session's state
//! belongs to the thread), nobody else is writing (`try_lock`, never a wait), and nothing is
//! queued for the thread (`queued`), which keeps each shard's messages in order. The write never
//! blocks: what the socket does not take at once stays in [`LinkState::rest`] and the thread is
//! woken to write it before anything else. Everything else (TLS, a busy link, a broken
//! connection) takes the queue as before, and only the thread dials, keeps alive and reports a
//! broken connection.
//!
//! A frame carrying forwarded writes is written only to a connection the peer has not closed
//! ([`closed_by_peer`]): a write into a socket whose peer already died is taken by the kernel
//! all the same, and the writer could then only say that its write may have been applied,
//! where in fact it never left. Checked so, a write to a leader killed a moment before fails
//! as not sent and is sent again to the next leader.

use std::io::{self, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use nix::errno::Errno;
use nix::sys::socket::{recv, MsgFlags};
use parking_lot::Mutex;

/// One peer's raft connection as the writers share it.
#[derive(Debug, Default)]
pub(super) struct Link {
    state: Mutex<LinkState>,
    /// Parcels handed to the sender thread and not yet written or dropped: while any is, a shard
    /// thread's frame must go behind them.
    queued: AtomicUsize,
    /// Frames shard threads wrote whole themselves.
    written: AtomicU64,
}

/// What the writers of one connection share, under [`Link::state`].
#[derive(Debug, Default)]
struct LinkState {
    /// The plain connection's socket while it is up (a clone of the sender thread's).
    sock: Option<TcpStream>,
    /// Whether the socket is in non-blocking mode (shard threads' writes) rather than blocking
    /// with the write timeout (the sender thread's).
    nonblocking: bool,
    /// The end of a frame a shard thread could not write at once; the sender thread writes it
    /// before its next frame.
    rest: Vec<u8>,
}

/// What [`Link::try_write`] did with a frame.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Direct {
    /// The socket took all of it.
    Written,
    /// Part of it is left for the sender thread, which must be woken.
    Left,
    /// Nothing was written: the frame must take the queue.
    Refused,
    /// Nothing was written: the frame guards writes and the peer has closed the connection.
    Closed,
}

/// True when the peer has closed the plain connection `sock` (or it failed). Nothing travels
/// toward the dialling member on a raft connection, so whatever there is to read is its end; a
/// peer that died has its kernel close the socket at once, so this is known before the next
/// write.
fn closed_by_peer(sock: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match recv(sock.as_raw_fd(), &mut byte, MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT) {
        Ok(_) => true,
        Err(Errno::EAGAIN | Errno::EINTR) => false,
        Err(_) => true,
    }
}

impl Link {
    /// Writes the frame `make` returns to the socket from the calling (shard) thread, if that
    /// can be done now without waiting and without passing a queued parcel. `make` runs only
    /// when the write is to happen. With `guard`, not to a connection the peer has closed.
    pub(super) fn try_write(&self, guard: bool, make: impl FnOnce() -> Vec<u8>) -> Direct {
        let Some(mut st) = self.state.try_lock() else { return Direct::Refused };
        if st.sock.is_none() || !st.rest.is_empty() || self.queued.load(Ordering::Acquire) != 0 {
            return Direct::Refused;
        }
        if guard && st.sock.as_ref().is_some_and(closed_by_peer) {
            return Direct::Closed;
        }
        if !st.nonblocking {
            let switched = st.sock.as_ref().map(|s| s.set_nonblocking(true));
            if !matches!(switched, Some(Ok(()))) {
                return Direct::Refused;
            }
            st.nonblocking = true;
        }
        let frame = make();
        let mut at = 0;
        let sock = st.sock.as_ref().expect("checked above");
        while at < frame.len() {
            match (&*sock).write(&frame[at..]) {
                Ok(0) => break,
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Full, or broken: the sender thread's blocking write finds out which.
                Err(_) => break,
            }
        }
        if at == frame.len() {
            self.written.fetch_add(1, Ordering::Relaxed);
            return Direct::Written;
        }
        st.rest = frame[at..].to_vec();
        Direct::Left
    }

    /// Counts a parcel handed to the sender thread.
    pub(super) fn queued(&self) {
        self.queued.fetch_add(1, Ordering::AcqRel);
    }

    /// Counts `n` parcels written or dropped by the sender thread (or never queued).
    pub(super) fn done(&self, n: usize) {
        self.queued.fetch_sub(n, Ordering::AcqRel);
    }

    /// Returns how many frames shard threads wrote whole themselves.
    #[cfg(test)]
    pub(super) fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Returns true while the sender thread lends a connection.
    #[cfg(test)]
    pub(super) fn attached(&self) -> bool {
        self.state.lock().sock.is_some()
    }

    /// Lends the plain connection's socket to the shard threads (the sender thread, once
    /// connected).
    pub(super) fn attach(&self, sock: TcpStream) {
        let mut st = self.state.lock();
        *st = LinkState { sock: Some(sock), nonblocking: false, rest: Vec::new() };
    }

    /// Takes the socket back when the connection ends (the sender thread); a frame's unwritten
    /// end goes with it.
    pub(super) fn detach(&self) {
        *self.state.lock() = LinkState::default();
    }

    /// True when the peer has closed the lent plain connection ([`closed_by_peer`]); false
    /// for a TLS connection, which is not lent (its peer sends TLS records back).
    pub(super) fn peer_closed(&self) -> bool {
        self.state.lock().sock.as_ref().is_some_and(closed_by_peer)
    }

    /// Runs `write` (the sender thread's) on `conn` with the link held, after the end of a
    /// frame a shard thread left, with the socket back in blocking mode.
    ///
    /// # Errors
    /// What the writes returned.
    pub(super) fn write_with<W: Write + ?Sized>(
        &self,
        conn: &mut W,
        write: impl FnOnce(&mut W) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut st = self.state.lock();
        if st.nonblocking {
            if let Some(sock) = &st.sock {
                sock.set_nonblocking(false)?;
            }
            st.nonblocking = false;
        }
        if !st.rest.is_empty() {
            let rest = std::mem::take(&mut st.rest);
            conn.write_all(&rest)?;
        }
        write(conn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let out = TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
        let (inn, _) = listener.accept().expect("accept");
        (out, inn)
    }

    #[test]
    fn a_shard_writes_only_an_attached_idle_link_and_in_queue_order() {
        let (out, mut inn) = pair();
        let link = Link::default();
        assert_eq!(link.try_write(false, || b"a".to_vec()), Direct::Refused, "no connection yet");
        link.attach(out.try_clone().expect("clone"));
        assert_eq!(link.try_write(false, || b"b".to_vec()), Direct::Written);
        link.queued();
        assert_eq!(link.try_write(false, || unreachable!("not built while a parcel is queued")), Direct::Refused);
        let mut conn = out.try_clone().expect("clone");
        link.write_with(&mut conn, |c| c.write_all(b"c")).expect("the thread writes");
        link.done(1);
        assert_eq!(link.try_write(false, || b"d".to_vec()), Direct::Written);
        let mut got = [0; 3];
        inn.read_exact(&mut got).expect("three bytes");
        assert_eq!(&got, b"bcd");
        link.detach();
        assert_eq!(link.try_write(false, || b"e".to_vec()), Direct::Refused, "detached");
    }

    #[test]
    fn what_a_full_socket_leaves_goes_first_from_the_thread() {
        let (out, mut inn) = pair();
        let link = Link::default();
        link.attach(out.try_clone().expect("clone"));
        // Far more than the socket buffers hold while nobody reads.
        let big: Vec<u8> = (0..64 << 20).map(|i: u32| i as u8).collect();
        assert_eq!(link.try_write(false, || big.clone()), Direct::Left);
        assert_eq!(link.try_write(false, || b"x".to_vec()), Direct::Refused, "the rest goes first");
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            inn.read_to_end(&mut got).expect("read");
            got
        });
        let mut conn = out.try_clone().expect("clone");
        link.write_with(&mut conn, |c| c.write_all(b"tail")).expect("blocking write");
        link.detach();
        drop((conn, out));
        let got = reader.join().expect("reader");
        assert_eq!(got.len(), big.len() + 4);
        assert!(got[..big.len()] == big[..] && &got[big.len()..] == b"tail", "the frame whole, then the next");
    }
}
