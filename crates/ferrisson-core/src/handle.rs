//! The one lock handle: every lock kind's type is a [`LockHandle`] of its [`LockKind`] (the
//! kind's keys, scripts and waiting), and implements [`Lock`] and [`SyncObject`] through it
//! ([`LockType`]): acquiring, hold counts, force unlock, the object calls and watching for a
//! release are written here once.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::error::Result;
use crate::guard::HoldGuard;
use crate::kind::HoldKind;
use crate::lock::{Lock, LockWatch, until_unlocked};
use crate::object::{ObjectKeys, ObjectLayout};
use crate::options::AcquireOptions;
use crate::owner::Owner;

/// What a lock kind supplies besides its acquire and release ([`HoldKind`]): the calls that
/// differ between kinds. Everything else a [`Lock`] does is written once over them.
pub trait LockKind: HoldKind {
    /// Frees the lock whoever holds it, waking its waiters; whether it was held
    /// ([`Lock::force_unlock`]).
    fn force_unlock(&self) -> impl Future<Output = Result<bool>> + Send;

    /// How many holds `owner` has (0: none) ([`Lock::hold_count_of`]): by default the count
    /// under the owner's [hold field](HoldKind::hold_field) of the lock's hash (Redisson's
    /// `RLock` layout, and the read-write lock's); a kind of another layout says how.
    fn hold_count_of(&self, owner: &Owner) -> impl Future<Output = Result<u32>> + Send {
        let field = self.hold_field(owner);
        async move {
            use crate::client::ClientEngine;
            self.client().hash_count(self.lock_key(), &field).await
        }
    }

    /// The kind's keys ([`ObjectLayout::object_keys`](crate::object::ObjectLayout::object_keys)).
    fn object_keys(&self) -> ObjectKeys<'_>;

    /// The channel every release of this kind is published on for any listener, which a
    /// watcher ([`Lock::wait_unlocked`]) listens on; `None`: its releases publish nothing every
    /// client hears (the spin lock's), and a watcher polls.
    fn release_channel(&self) -> Option<&str> {
        None
    }

    /// The longest a watcher listening on [`release_channel`](Self::release_channel) sleeps
    /// before it looks again, for a kind that some releases free without a message there (the
    /// fair lock: Redisson's releases wake the head waiter alone); `None`: every release
    /// publishes there, and the holder's lease bounds the sleep.
    fn watch_recheck(&self) -> Option<Duration> {
        None
    }

    /// Whether the lock (a read-write lock's side: that side) is held, and for how long its
    /// key lives: `None` when not held, else its remaining TTL (`None` inside: no expiry). One
    /// read, refusing someone else's data ([`Lock::is_locked`], and what a watcher looks at).
    fn held_for(&self) -> impl Future<Output = Result<Option<Option<Duration>>>> + Send {
        let keys = self.object_keys();
        async move {
            let state = crate::object::object_state(&keys, "").await?;
            Ok(state.exists.then(|| state.ttl()))
        }
    }

    /// What a watcher ([`Lock::wait_unlocked`]) looks at before each sleep: what
    /// [`held_for`](Self::held_for) says, after asking for the next release's message where a
    /// kind's releases publish only when someone said it waits (the lean mutex's waiter mark).
    fn watch_look(&self) -> impl Future<Output = Result<Option<Option<Duration>>>> + Send {
        self.held_for()
    }
}

/// A handle to a lock of kind `K`: the kind's state, shared by every clone, and the owner the
/// handle acquires and asks as (`None`: a fresh owner per acquisition, see [`Owner`]).
pub struct LockHandle<K> {
    kind: Arc<K>,
    owner: Option<Owner>,
}

impl<K> Clone for LockHandle<K> {
    fn clone(&self) -> Self {
        Self {
            kind: self.kind.clone(),
            owner: self.owner.clone(),
        }
    }
}

impl<K: LockKind> std::fmt::Debug for LockHandle<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(self.kind.kind_name())
            .field("key", self.kind.lock_key())
            .field("fenced", &self.kind.fenced())
            .field("owner", &self.owner)
            .finish()
    }
}

impl<K: LockKind> LockHandle<K> {
    /// A handle to `kind`, with no owner of its own.
    pub fn new(kind: K) -> Self {
        Self {
            kind: Arc::new(kind),
            owner: None,
        }
    }

    /// The kind's state.
    pub fn kind(&self) -> &Arc<K> {
        &self.kind
    }

    /// The owner this handle acquires and asks as, when it has one of its own.
    pub fn owner(&self) -> Option<&Owner> {
        self.owner.as_ref()
    }

    /// This handle bound to `owner`.
    #[must_use]
    pub fn owned_by(&self, owner: Owner) -> Self {
        Self {
            kind: self.kind.clone(),
            owner: Some(owner),
        }
    }

    /// As [`Lock::wait_unlocked`], but a look that fails on the connection ends the watch at
    /// once with its error instead of waiting the outage out: for a caller that watches
    /// between tries of its own and applies the outage rule to those (a RedLock's rounds).
    pub fn watch_unlocked(&self) -> impl Future<Output = Result<()>> + Send + '_ {
        watch(&*self.kind, true)
    }

    /// This handle's owner over another state of the kind (a spin lock with another backoff).
    #[must_use]
    pub fn with_kind(&self, kind: K) -> Self {
        Self {
            kind: Arc::new(kind),
            owner: self.owner.clone(),
        }
    }
}

/// A lock kind's type: a [`LockHandle`] of its kind, through which it is a [`Lock`] and a
/// [`SyncObject`](crate::SyncObject). The type adds its constructors and what is its own (a spin lock's backoff).
pub trait LockType: Send + Sync + 'static {
    /// The kind.
    type Kind: LockKind;

    /// The handle.
    fn handle(&self) -> &LockHandle<Self::Kind>;
}

impl<T: LockType> ObjectLayout for T {
    fn object_keys(&self) -> ObjectKeys<'_> {
        self.handle().kind.object_keys()
    }
}

impl<T: LockType> LockWatch for T {
    fn watch_unlocked(&self) -> impl Future<Output = Result<()>> + Send {
        self.handle().watch_unlocked()
    }

    fn hold_lock(&self) -> crate::guard::HoldLock {
        crate::guard::HoldLock::new(self.handle().kind.clone())
    }
}

impl<T: LockType> Lock for T {
    fn client(&self) -> &Client {
        self.handle().kind.client()
    }

    fn key(&self) -> &str {
        self.handle().kind.lock_key()
    }

    fn owner(&self) -> Option<&Owner> {
        self.handle().owner()
    }

    fn acquire(
        &self,
        options: AcquireOptions,
    ) -> impl Future<Output = Result<Option<HoldGuard>>> + Send {
        let handle = self.handle();
        crate::kind::acquire(&handle.kind, handle.owner.as_ref(), options)
    }

    fn force_unlock(&self) -> impl Future<Output = Result<bool>> + Send {
        self.handle().kind.force_unlock()
    }

    async fn hold_count(&self) -> Result<u32> {
        let handle = self.handle();
        let owner = Owner::for_query(handle.owner.as_ref(), "hold_count")?;
        handle.kind.hold_count_of(owner).await
    }

    fn hold_count_of(&self, owner: &Owner) -> impl Future<Output = Result<u32>> + Send {
        self.handle().kind.hold_count_of(owner)
    }

    async fn is_locked(&self) -> Result<bool> {
        Ok(self.handle().kind.held_for().await?.is_some())
    }

    fn wait_unlocked(&self) -> impl Future<Output = Result<()>> + Send {
        watch(&*self.handle().kind, false)
    }
}

/// [`Lock::wait_unlocked`] over the kind's look, release channel and re-check.
fn watch<K: LockKind>(kind: &K, fail_fast: bool) -> impl Future<Output = Result<()>> + Send + '_ {
    until_unlocked(
        kind.client(),
        || kind.watch_look(),
        kind.release_channel(),
        kind.watch_recheck(),
        fail_fast,
    )
}
