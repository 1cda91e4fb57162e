//! Late copies: a call whose connection failed with its request on the way is resent on a new
//! connection, and the first copy, held back by the proxy, reaches Redis after the resend ran
//! (after the call returned, and often after what came next: a release, another acquire). A
//! late copy of every kind's acquire and release takes nothing and gives nothing back twice
//! (docs/protocol.md, "[ext] Retry records").
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;
use crate::lost_replies::lossy_client;

use std::time::Duration;

use common::{RedisServer, eventually, unique_name};
use ferrisson::{Client, Lock, Owner};
use ferrisson_testkit::FaultProxy;

/// A server, a proxy in front of it, a client straight to it and one through the proxy (with
/// [`lossy_client`]'s settings), and a fresh object name: the set-up of the late-copy tests.
struct Late {
    _server: RedisServer,
    proxy: FaultProxy,
    direct: Client,
    client: Client,
    name: String,
}

impl Late {
    async fn start(prefix: &str) -> Self {
        let server = RedisServer::spawn();
        let proxy = FaultProxy::start(server.port());
        let direct = common::client(&server.url()).await;
        let client = lossy_client(&proxy).await;
        Self {
            _server: server,
            proxy,
            direct,
            client,
            name: unique_name(prefix),
        }
    }
}

/// Runs `call` with the first request naming `key` held back by the proxy (the client sees its
/// connection fail with nothing heard, and resends on a new one), checks that one was held, and
/// returns the call's result; the held copy is still on its way ([`deliver_late`]).
async fn with_late_copy<T>(
    proxy: &FaultProxy,
    key: &str,
    call: impl std::future::Future<Output = T>,
) -> T {
    let held = proxy.requests_held();
    proxy.hold_next_request(key);
    let result = call.await;
    proxy.hold_no_request();
    assert_eq!(
        proxy.requests_held(),
        held + 1,
        "the proxy held back no request of the call"
    );
    result
}

/// Lets the held copy reach Redis, and waits until Redis has answered it (it ran).
pub(crate) async fn deliver_late(proxy: &FaultProxy) {
    let replies = proxy.late_replies();
    proxy.deliver_held();
    eventually(Duration::from_secs(10), "the late copy ran", || async {
        proxy.late_replies() > replies
    })
    .await;
}

/// A copy of a semaphore call that reaches Redis after the client resent the call on a new
/// connection, and after the call returned, changes nothing: a release gives its permits back
/// once (also after more calls of the client, which must not reuse its record slot), an
/// acquire takes them once, and a try that took nothing takes nothing later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_calls_reaching_redis_after_their_resend_count_once() {
    let Late {
        _server,
        proxy,
        direct,
        client,
        name,
    } = Late::start("late-sem").await;
    let counted = ferrisson_semaphore::Semaphore::new(&direct, &name).unwrap();
    counted.try_set_permits(3).await.unwrap();
    let semaphore = ferrisson_semaphore::Semaphore::new(&client, &name).unwrap();

    // A release, its first copy late.
    let permits = semaphore.acquire().await.unwrap();
    with_late_copy(&proxy, &name, permits.release())
        .await
        .unwrap();
    assert_eq!(counted.available_permits().await.unwrap(), 3);
    // More calls meanwhile, which must not take the late copy's slot in the record.
    for _ in 0..3 {
        semaphore.acquire().await.unwrap().release().await.unwrap();
    }
    deliver_late(&proxy).await;
    assert_eq!(
        counted.available_permits().await.unwrap(),
        3,
        "a late copy of a release gave its permit back a second time"
    );

    // An acquire, its first copy late.
    let permits = with_late_copy(&proxy, &name, semaphore.acquire())
        .await
        .unwrap();
    assert_eq!(counted.available_permits().await.unwrap(), 2);
    deliver_late(&proxy).await;
    assert_eq!(
        counted.available_permits().await.unwrap(),
        2,
        "a late copy of an acquire took its permit a second time"
    );
    permits.release().await.unwrap();

    // An acquire, its first copy late, arriving after its permit was released.
    let permits = with_late_copy(&proxy, &name, semaphore.acquire())
        .await
        .unwrap();
    permits.release().await.unwrap();
    deliver_late(&proxy).await;
    assert_eq!(
        counted.available_permits().await.unwrap(),
        3,
        "a late copy of an acquire took a permit after its release"
    );

    // A try in vain, its first copy late: it arrives once permits are free again.
    let all = counted.acquire_many(3).await.unwrap();
    let none = with_late_copy(&proxy, &name, semaphore.try_acquire())
        .await
        .unwrap();
    assert!(none.is_none(), "a try took a permit while none was free");
    all.release().await.unwrap();
    deliver_late(&proxy).await;
    assert_eq!(
        counted.available_permits().await.unwrap(),
        3,
        "a late copy of a try in vain took a permit nobody holds"
    );
}

/// The same for the permit-expirable semaphore: a late copy of an acquire takes nothing while
/// its permits are held, and a late copy of a release gives back nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expirable_semaphore_calls_reaching_redis_after_their_resend_count_once() {
    let Late {
        _server,
        proxy,
        direct,
        client,
        name,
    } = Late::start("late-xsem").await;
    let counted = ferrisson::ExpirableSemaphore::new(&direct, &name).unwrap();
    counted.try_set_permits(3).await.unwrap();
    let semaphore = ferrisson::ExpirableSemaphore::new(&client, &name).unwrap();

    let permit = with_late_copy(&proxy, &name, semaphore.acquire())
        .await
        .unwrap();
    assert_eq!(counted.available_permits().await.unwrap(), 2);
    deliver_late(&proxy).await;
    assert_eq!(
        counted.available_permits().await.unwrap(),
        2,
        "a late copy of an acquire took its permit a second time"
    );

    with_late_copy(&proxy, &name, permit.release())
        .await
        .unwrap();
    assert_eq!(counted.available_permits().await.unwrap(), 3);
    deliver_late(&proxy).await;
    assert_eq!(
        counted.available_permits().await.unwrap(),
        3,
        "a late copy of a release gave its permit back a second time"
    );
    assert_eq!(counted.acquired_permits().await.unwrap(), 0);

    // An acquire, its first copy late, arriving after the permit was released: it would take
    // it anew (the permit's id is free again) for nobody until its lease ended.
    let permit = with_late_copy(&proxy, &name, semaphore.acquire())
        .await
        .unwrap();
    permit.release().await.unwrap();
    deliver_late(&proxy).await;
    assert_eq!(
        (
            counted.available_permits().await.unwrap(),
            counted.acquired_permits().await.unwrap()
        ),
        (3, 0),
        "a late copy of an acquire took a permit after its release"
    );
}

/// A late copy of a reentrant hold's unlock, reaching Redis after its resend ran, takes no
/// second hold off the owner: the owner, bound to its handle, still holds once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_copy_of_an_unlock_releases_once() {
    let Late {
        _server,
        proxy,
        direct,
        client,
        name,
    } = Late::start("late-lock").await;
    let lock = ferrisson::ReentrantLock::new(&client, &name).unwrap();
    let owner = client.new_owner();
    let bound = lock.owned_by(owner.clone());
    let first = bound.lock().await.unwrap();
    let second = bound.lock().await.unwrap();
    with_late_copy(&proxy, &name, second.unlock())
        .await
        .unwrap();
    let seen = ferrisson::ReentrantLock::new(&direct, &name).unwrap();
    assert_eq!(seen.hold_count_of(&owner).await.unwrap(), 1);
    deliver_late(&proxy).await;
    assert_eq!(
        seen.hold_count_of(&owner).await.unwrap(),
        1,
        "a late copy of an unlock took a second hold off its owner"
    );
    first.unlock().await.unwrap();
    assert!(!seen.is_locked().await.unwrap());
}

/// A late copy of `make`'s lock's acquire takes nothing, whether it reaches Redis after the
/// hold its resend took was released (it would take the lock for nobody) or while that hold is
/// still held ([`late_acquire_while_held_takes_nothing`]).
async fn late_acquires_take_nothing<L: Lock>(prefix: &str, make: impl Fn(&Client, &str) -> L) {
    let Late {
        _server,
        proxy,
        direct,
        client,
        name,
    } = Late::start(prefix).await;
    let lock = make(&client, &name);
    let guard = with_late_copy(&proxy, &name, lock.lock()).await.unwrap();
    guard.unlock().await.unwrap();
    deliver_late(&proxy).await;
    let other = make(&direct, &name);
    let taken = other.try_lock().await.unwrap();
    assert!(
        taken.is_some(),
        "{prefix}: a late copy of an acquire took the lock after its hold was released"
    );
    taken.unwrap().unlock().await.unwrap();
    late_acquire_while_held_takes_nothing(
        Late {
            _server,
            proxy,
            direct,
            client,
            name,
        },
        make,
    )
    .await;
}

/// A late copy of `make`'s lock's acquire that reaches Redis while the hold its resend took is
/// still held takes nothing (it would re-enter the hold, or queue a waiter that never comes):
/// once the hold is released, another client takes the lock at once.
async fn late_acquire_while_held_takes_nothing<L: Lock>(
    late: Late,
    make: impl Fn(&Client, &str) -> L,
) {
    let Late {
        _server,
        proxy,
        direct,
        client,
        name,
    } = late;
    let lock = make(&client, &name);
    let guard = with_late_copy(&proxy, &name, lock.lock()).await.unwrap();
    deliver_late(&proxy).await;
    guard.unlock().await.unwrap();
    let taken = make(&direct, &name).try_lock().await.unwrap();
    assert!(
        taken.is_some(),
        "a late copy of an acquire that reached Redis while its hold was held left something \
         behind its release"
    );
    taken.unwrap().unlock().await.unwrap();
}

/// Every lock kind: a late copy of its acquire takes nothing, after the release or while held
/// (the unfenced `Mutex` only while held: its one-command first try reads no marks, see
/// docs/protocol.md, "[ext] Retry records").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_copy_of_every_lock_kinds_acquire_takes_nothing() {
    use ferrisson::{FairLock, FasterMultiLock, Mutex, NonReentrantLock, ReadWriteLock};
    use ferrisson::{ReentrantLock, SpinLock};
    late_acquires_take_nothing("late-acq-lock", |c, n| ReentrantLock::new(c, n).unwrap()).await;
    late_acquires_take_nothing("late-acq-flock", |c, n| {
        ReentrantLock::fenced(c, n).unwrap()
    })
    .await;
    late_acquires_take_nothing("late-acq-nrlock", |c, n| {
        NonReentrantLock::new(c, n).unwrap()
    })
    .await;
    late_acquires_take_nothing("late-acq-spin", |c, n| SpinLock::new(c, n).unwrap()).await;
    late_acquires_take_nothing("late-acq-fair", |c, n| FairLock::new(c, n).unwrap()).await;
    late_acquires_take_nothing("late-acq-read", |c, n| {
        ReadWriteLock::new(c, n).unwrap().read_lock()
    })
    .await;
    late_acquires_take_nothing("late-acq-write", |c, n| {
        ReadWriteLock::new(c, n).unwrap().write_lock()
    })
    .await;
    late_acquires_take_nothing("late-acq-fml", |c, n| {
        FasterMultiLock::new(c, n, ["a", "b"]).unwrap()
    })
    .await;
    late_acquires_take_nothing("late-acq-fmutex", |c, n| Mutex::fenced(c, n).unwrap()).await;
    late_acquire_while_held_takes_nothing(Late::start("late-acq-mutex").await, |c, n| {
        Mutex::new(c, n).unwrap()
    })
    .await;
}

/// A late copy of `make`'s lock's release, reaching Redis after its resend freed the lock,
/// frees nothing taken since: neither another client's hold nor a new hold of the same bound
/// owner (which the record tells from the released one). While such a hold lasts, a third
/// client's `conflicting` lock cannot be taken. `make` binds its handle to the owner it is
/// given, if any. Without `records` (the `Mutex`, whose layout keeps no record of releases),
/// only another client's hold is checked: see docs/protocol.md, "[ext] Retry records", for the
/// same owner's.
async fn late_releases_free_nothing<L: Lock, P: Lock>(
    prefix: &str,
    make: impl Fn(&Client, &str, Option<Owner>) -> L,
    conflicting: impl Fn(&Client, &str) -> P,
    records: bool,
) {
    let Late {
        _server,
        proxy,
        direct,
        client,
        name,
    } = Late::start(prefix).await;
    let third = common::client(&_server.url()).await;
    let probe = conflicting(&third, &name);
    let bound = make(&client, &name, Some(client.new_owner()));
    let cases: &[bool] = if records { &[false, true] } else { &[false] };
    for &same_owner in cases {
        let guard = bound.lock().await.unwrap();
        with_late_copy(&proxy, &name, guard.unlock()).await.unwrap();
        let taken = if same_owner {
            bound.lock().await.unwrap()
        } else {
            make(&direct, &name, None)
                .try_lock()
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{prefix}: the lock is not free after its unlock"))
        };
        deliver_late(&proxy).await;
        assert!(
            probe.try_lock().await.unwrap().is_none(),
            "{prefix}: a late copy of a release freed the hold taken after it (same owner: \
             {same_owner})"
        );
        taken.unlock().await.unwrap();
        probe
            .try_lock()
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{prefix}: the lock is not free after the holder's unlock"))
            .unlock()
            .await
            .unwrap();
    }
}

/// A kind's `make` for [`late_releases_free_nothing`]: `$new(client, name)`, bound to the
/// owner given.
macro_rules! bindable {
    ($new:expr) => {
        |c: &Client, n: &str, owner: Option<Owner>| {
            let lock = $new(c, n).unwrap();
            match owner {
                Some(owner) => lock.owned_by(owner),
                None => lock,
            }
        }
    };
}

/// [`late_releases_free_nothing`] for a kind whose handles `$new(client, name)` makes, checked
/// against another handle of the kind.
macro_rules! late_releases_of {
    ($prefix:literal, $new:expr, $records:literal) => {
        late_releases_free_nothing(
            $prefix,
            bindable!($new),
            |c: &Client, n: &str| $new(c, n).unwrap(),
            $records,
        )
        .await
    };
}

/// Every lock kind: a late copy of its release frees nothing taken since (the `Mutex`: nothing
/// another owner took).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_copy_of_every_lock_kinds_release_frees_nothing() {
    use ferrisson::{FairLock, FasterMultiLock, Mutex, NonReentrantLock, ReadWriteLock};
    use ferrisson::{ReentrantLock, SpinLock};
    late_releases_of!("late-rel-lock", ReentrantLock::new, true);
    late_releases_of!("late-rel-flock", ReentrantLock::fenced, true);
    late_releases_of!("late-rel-nrlock", NonReentrantLock::new, true);
    late_releases_of!("late-rel-spin", SpinLock::new, true);
    late_releases_of!("late-rel-fair", FairLock::new, true);
    late_releases_of!(
        "late-rel-fml",
        |c, n| FasterMultiLock::new(c, n, ["a", "b"]),
        true
    );
    late_releases_of!("late-rel-fmutex", Mutex::fenced, false);
    late_releases_of!("late-rel-mutex", Mutex::new, false);
    // A read-write lock's sides, each against a writer.
    let rw = |c: &Client, n: &str, owner: Option<Owner>| {
        let lock = ReadWriteLock::new(c, n).unwrap();
        match owner {
            Some(owner) => lock.owned_by(owner),
            None => lock,
        }
    };
    let writer = |c: &Client, n: &str| ReadWriteLock::new(c, n).unwrap().write_lock();
    late_releases_free_nothing(
        "late-rel-read",
        |c, n, o| rw(c, n, o).read_lock(),
        writer,
        true,
    )
    .await;
    late_releases_free_nothing(
        "late-rel-write",
        |c, n, o| rw(c, n, o).write_lock(),
        writer,
        true,
    )
    .await;
}

/// An acquire whose caller leaves while its first copy is held back (the client waits 300 ms
/// before it sends the call again): the client's clean-up must leave no hold behind, however
/// the held copy and the clean-up meet in Redis, and must not take a hold its owner had
/// before. `make` names a lock of `client` bound to `owner`; with `reentrant`, the owner holds
/// it once already.
async fn abandoned_acquires_leave_nothing<L: Lock + Send + Sync + 'static>(
    prefix: &str,
    make: impl Fn(&Client, &str, &Owner) -> L,
    reentrant: bool,
) {
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let direct = common::client(&server.url()).await;
    let client = crate::lost_replies::slow_retry_client(&proxy, Duration::from_millis(300)).await;
    let name = unique_name(prefix);
    let owner = client.new_owner();
    let first = if reentrant {
        Some(make(&client, &name, &owner).lock().await.unwrap())
    } else {
        None
    };
    let held = proxy.requests_held();
    proxy.hold_next_request(&name);
    let lock = make(&client, &name, &owner);
    let acquiring = tokio::spawn(async move { drop(lock.lock().await) });
    eventually(
        Duration::from_secs(10),
        "the acquire's first copy held back",
        || async { proxy.requests_held() > held },
    )
    .await;
    // Within the client's 300 ms pause before its resend: the caller leaves.
    acquiring.abort();
    let _ = acquiring.await;
    proxy.hold_no_request();
    // The clean-up has marked the try (no copy of it takes anything from then on) before the
    // held copy arrives; a copy arriving first is the other order, which the clean-up also
    // undoes (it then finds the hold the copy took, and releases it).
    let mut con = server.connection();
    eventually(
        Duration::from_secs(10),
        "the abandoned acquire marked undone",
        || {
            let marks: Vec<String> =
                redis::Commands::keys(&mut con, format!("*{name}*:undone:*")).unwrap();
            async move { !marks.is_empty() }
        },
    )
    .await;
    deliver_late(&proxy).await;
    let seen = make(&direct, &name, &owner);
    let expected = u32::from(reentrant);
    eventually(
        Duration::from_secs(10),
        "the abandoned acquire cleaned up",
        || async { seen.hold_count_of(&owner).await.unwrap() == expected },
    )
    .await;
    if let Some(first) = first {
        first.unlock().await.unwrap();
    }
    let other = make(&direct, &name, &direct.new_owner());
    let taken = other.try_lock().await.unwrap();
    assert!(taken.is_some(), "{prefix}: the lock was left held");
    taken.unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_lock_acquire_leaves_nothing_behind() {
    let lock = |c: &Client, n: &str, o: &Owner| {
        ferrisson::ReentrantLock::new(c, n)
            .unwrap()
            .owned_by(o.clone())
    };
    abandoned_acquires_leave_nothing("abandoned-lock", lock, false).await;
    abandoned_acquires_leave_nothing("abandoned-relock", lock, true).await;
    abandoned_acquires_leave_nothing(
        "abandoned-fmutex",
        |c, n, o| ferrisson::Mutex::fenced(c, n).unwrap().owned_by(o.clone()),
        false,
    )
    .await;
    abandoned_acquires_leave_nothing(
        "abandoned-fair",
        |c, n, o| ferrisson::FairLock::new(c, n).unwrap().owned_by(o.clone()),
        false,
    )
    .await;
}
