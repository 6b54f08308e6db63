//! Links: how a message leaves a client or a shard.
//!
//! Takes a message; gives it to an in-process channel or to a TCP writer
//! task ([`crate::tcp`]). The client and server code only sees [`Outbound`],
//! so the same code runs in one process (tests) and across processes.

use crossbeam_channel::Sender;

use crate::error::SspError;

/// Where messages of type `M` go. Sending never blocks (unbounded queues).
pub trait Outbound<M>: Send + Sync {
    /// Queues `msg` for delivery, in order with earlier sends.
    ///
    /// # Errors
    /// [`SspError::Disconnected`] when the other end has gone.
    fn send(&self, msg: M) -> Result<(), SspError>;
}

/// An in-process link: a crossbeam channel, tagged with who listens.
pub struct ChannelLink<M> {
    /// The receiving end's inbox.
    pub tx: Sender<M>,
    /// Who listens ("shard 3", "client 0"), for errors.
    pub peer: String,
}

impl<M: Send> Outbound<M> for ChannelLink<M> {
    fn send(&self, msg: M) -> Result<(), SspError> {
        self.tx.send(msg).map_err(|_| SspError::Disconnected {
            peer: self.peer.clone(),
            why: "send on a closed channel".into(),
        })
    }
}

/// A link that tags every message with a value before sending it on
/// (a TCP connection to a server process carries `(ShardId, ToServer)`).
pub struct TaggedLink<T, M> {
    /// The tag added to every message.
    pub tag: T,
    /// The underlying link.
    pub inner: std::sync::Arc<dyn Outbound<(T, M)>>,
}

impl<T: Copy + Send + Sync, M> Outbound<M> for TaggedLink<T, M> {
    fn send(&self, msg: M) -> Result<(), SspError> {
        self.inner.send((self.tag, msg))
    }
}
