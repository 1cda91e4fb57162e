//! Watching an object's release messages ([`Client::watch_changes`]).

use super::*;

/// The channel the synchronizer of `kind` at `key` publishes its releases on (a fair lock's
/// waiters have a channel each; a rate limiter has none).
pub(super) fn wake_channel(kind: ObjectKind, key: &str) -> Option<String> {
    use crate::keys::prefixed;
    Some(match kind {
        ObjectKind::Lock => super::kinds::lock_channel(key),
        ObjectKind::Semaphore => prefixed("redisson_sc", key),
        ObjectKind::Registered(kind) => (kind.channel?)(key),
    })
}

impl ObjectInfo {
    /// The channels a change of this object is announced on, as its kind's releases publish
    /// them: the release channel of a lock, a semaphore or a latch (opening, or armed again);
    /// a fair lock's releases by this library publish on its channel prefix too, beside the
    /// next waiter's own channel. Empty for a rate limiter and for nothing stored.
    /// Acquisitions send no message: a watcher subscribes to these to look again at once
    /// after a release, and looks again on a period for the rest.
    pub fn wake_channels(&self) -> Vec<String> {
        match self.kind {
            Some(kind) => wake_channel(kind, &self.key).into_iter().collect(),
            None => Vec::new(),
        }
    }
}

/// The release messages of one object, for a watcher ([`Client::watch_changes`]): it wakes on
/// every message on the object's channels and on every reconnect of the client's subscriber
/// connection, beside the object's waiters of this client and never in their place.
///
/// Dropping it unsubscribes (once no waiter of the client is on the channel either).
pub struct ChangeWatch {
    subscriptions: Vec<crate::pubsub::Subscription>,
}

impl std::fmt::Debug for ChangeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeWatch")
            .field("channels", &self.subscriptions.len())
            .finish()
    }
}

impl ChangeWatch {
    /// Whether it watches anything: an object whose kind publishes no release (a rate
    /// limiter), or nothing stored, has no channel.
    pub fn is_watching(&self) -> bool {
        !self.subscriptions.is_empty()
    }

    /// Waits up to `within` for the server to confirm the subscriptions: from then on no
    /// message is missed. Returns whether they all were.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub async fn confirmed(&self, within: Duration) -> bool {
        let all = self.subscriptions.iter().map(|s| s.confirmed(within));
        futures::future::join_all(all).await.into_iter().all(|c| c)
    }

    /// Waits until the object may have changed (a release message on one of its channels, or
    /// a reconnect, since the last call), or `within` has passed (`false`; also at once when
    /// nothing is watched). Messages that arrived meanwhile count as one.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a message that arrives after the future is dropped wakes the next call.
    pub async fn changed(&self, within: Duration) -> bool {
        if self.subscriptions.is_empty() {
            tokio::time::sleep(within).await;
            return false;
        }
        let waits = self.subscriptions.iter().map(|s| Box::pin(s.wait(within)));
        let (woken, _, _) = futures::future::select_all(waits).await;
        !matches!(woken, crate::pubsub::Woken::TimedOut)
    }
}

impl Client {
    /// Watches the release messages of the object `info` describes (see
    /// [`ObjectInfo::wake_channels`]) on the client's subscriber connection, wherever it runs
    /// (one server, Sentinel, Cluster with sharded pub/sub): a watcher reads the object again
    /// at each [`ChangeWatch::changed`], so that a state a release ends is seen however short
    /// it was. Acquisitions send no message: a watcher also reads on a period of its own.
    pub fn watch_changes(&self, info: &ObjectInfo) -> ChangeWatch {
        let policy: crate::pubsub::WakePolicy = match info.kind {
            Some(ObjectKind::Semaphore) => crate::pubsub::permits_message_policy,
            // A watcher looks again at every message of a kind whose messages it cannot read.
            Some(ObjectKind::Registered(_)) => |_| crate::pubsub::Wake::All,
            _ => crate::pubsub::lock_message_policy,
        };
        let subscriptions = info
            .wake_channels()
            .iter()
            .map(|channel| self.hub().observe(channel, policy))
            .collect();
        ChangeWatch { subscriptions }
    }
}
