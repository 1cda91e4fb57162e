//! Kinds that their own crates teach inspection ([`KindInspection`]): [`Client::inspect`],
//! [`Client::list_objects`], [`Client::watch_changes`] and the `ferrisson` command-line tool
//! learn a kind from the crate that defines it, with no edit in this crate. The layouts this
//! crate reads itself (`core/inspect`) are the kinds it ships with ([`ObjectKind::ALL`]).

use futures::future::BoxFuture;

use super::*;

/// What a synchronizer crate tells inspection about its kind: its name, its layout's main key
/// and derived keys, the script that reads an object of it, and how the facts that script
/// replies make an [`ObjectInfo`]. A crate registers one `static` of it with
/// `ferrisson_core::__engine::inventory::submit!`; every binary that links the crate then
/// knows the kind ([`ObjectKind::known`]).
///
/// The script takes the object's main key as `KEYS[1]` (every key it reads derives from it, in
/// its slot), the most members to list ([`INSPECT_LIMIT`]) as `ARGV[1]`, and `ARGV[2]` `1`
/// when the caller named the kind ([`Client::inspect_as`]): a layout another kind shares
/// (a bare count, say) is then the kind's. It changes nothing. It replies `false` when the
/// key holds a layout that is not its kind's (or, not named, one it only could be), else facts
/// as `core/inspect` does, each a list of strings whose first names it: `{'now', ms}` (the
/// server's clock), `{'type', t}` (the main key's type; `none`: nothing stored) and
/// `{'pttl', ms}` first, then the kind's own. Made `Script::with_prelude` of
/// [`INSPECT_PRELUDE`](crate::__engine::INSPECT_PRELUDE), it starts with
/// `inspect_head(KEYS[1])`, which reads those three, and adds its facts with `inspect_fact`.
pub struct KindInspection {
    /// The kind's name, as [`ObjectKind::as_str`] and `--kind` take it (kebab-case).
    pub name: &'static str,
    /// `a` or `an`, before the name.
    pub article: &'static str,
    /// Whether it is a lock: a force unlock ends its holds.
    pub lock: bool,
    /// The Redis type of its main key (`hash`, `string`, `zset`, …), which a listing scans for.
    pub main_type: &'static str,
    /// The suffixes of the keys it derives with `suffixed(name, …)`: not main keys, which a
    /// listing leaves out.
    pub derived: &'static [&'static str],
    /// The markers of the keys it derives per holder inside the object's slot
    /// (`{name}:<owner>:<marker>:…`, as a read-write lock's `rwlock_timeout`): not main keys
    /// either.
    pub derived_inside: &'static [&'static str],
    /// Its release channel for the object at `key` (`None`: no channel), which a watcher
    /// listens on ([`ObjectInfo::wake_channels`]).
    pub channel: Option<fn(&str) -> String>,
    /// The script that reads one object (see above).
    pub script: &'static Script,
    /// Makes the script's facts the object's state: its holders, waiters, fencing token and
    /// [`details`](ObjectInfo::details), and [`kind_certain`](ObjectInfo::kind_certain) false
    /// where the layout could be anything's (a listing leaves such objects out). Who stands
    /// behind each owner, the subscribers and the times are filled in by the core.
    pub read: fn(&KindFacts, &mut ObjectInfo),
    /// Frees an object of the kind whoever holds it (its handle's `force_unlock`), for the
    /// command-line tool; `None` for a kind that is not a lock.
    pub force_unlock: Option<ObjectCall>,
    /// Deletes an object of the kind (its handle's [`SyncObject::delete`](crate::SyncObject::delete)),
    /// for the command-line tool.
    pub delete: ObjectCall,
}

/// A call on the object named `name` (after the client's namespace) through its kind's handle:
/// whether there was something to do.
pub type ObjectCall = for<'a> fn(&'a Client, &'a str) -> ObjectFuture<'a>;

/// What an [`ObjectCall`] returns.
pub type ObjectFuture<'a> = BoxFuture<'a, Result<bool>>;

/// A kind's [`KindInspection::delete`] through its handle, `made` for the object:
/// `delete_through(Latch::new(client, name))`.
pub fn delete_through<'a, T: crate::SyncObject + 'a>(made: Result<T>) -> ObjectFuture<'a> {
    Box::pin(async move { made?.delete().await })
}

/// A lock kind's [`KindInspection::force_unlock`] through its handle, `made` for the object:
/// `force_unlock_through(FairLock::new(client, name))`.
pub fn force_unlock_through<'a, T: crate::Lock + 'a>(made: Result<T>) -> ObjectFuture<'a> {
    Box::pin(async move { made?.force_unlock().await })
}

inventory::collect!(KindInspection);

impl std::fmt::Debug for KindInspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindInspection")
            .field("name", &self.name)
            .field("main_type", &self.main_type)
            .finish_non_exhaustive()
    }
}

/// A kind is its name: two registrations of one name are one kind.
impl PartialEq for KindInspection {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for KindInspection {}

impl std::hash::Hash for KindInspection {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

/// Every kind registered by the crates linked into this binary, sorted by name, each name once
/// (the ones [`ObjectKind::ALL`] names left out). Read once: the registrations are fixed when
/// the program starts.
pub(super) fn registered() -> &'static [&'static KindInspection] {
    static KINDS: std::sync::OnceLock<Vec<&'static KindInspection>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let mut kinds: Vec<&'static KindInspection> = inventory::iter::<KindInspection>
            .into_iter()
            .filter(|k| ObjectKind::ALL.iter().all(|b| b.as_str() != k.name))
            .collect();
        kinds.sort_by_key(|k| k.name);
        kinds.dedup_by_key(|k| k.name);
        kinds
    })
}

/// The facts a kind's inspection script replied ([`KindInspection::script`]).
#[derive(Debug, Clone, Default)]
pub struct KindFacts {
    rows: Vec<Vec<String>>,
}

impl KindFacts {
    /// Every fact named `name`, in the order replied: its values after the name.
    pub fn all<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a [String]> {
        self.rows
            .iter()
            .filter(move |row| row.first().is_some_and(|n| n == name))
            .map(|row| row.get(1..).unwrap_or_default())
    }

    /// The first value of the first fact named `name`.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.all(name).next()?.first().map(String::as_str)
    }

    /// [`value`](Self::value) as an integer.
    pub fn number(&self, name: &str) -> Option<i64> {
        self.value(name)?.parse().ok()
    }

    /// `ms`, a count of milliseconds the script replied (a PTTL, say), as a duration: `None`
    /// unless it is a positive number.
    pub fn duration(&self, ms: &str) -> Option<Duration> {
        positive_ms(ms.parse().ok()?)
    }

    /// The server's clock when the script ran, in ms since the epoch (`now`).
    pub fn now(&self) -> u64 {
        self.number("now")
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0)
    }

    /// The time left until the epoch-ms `at`, as of [`now`](Self::now) (`None`: not a time).
    pub fn until(&self, at: &str) -> Option<Duration> {
        until(at, self.now())
    }

    /// The lock's fencing counter, `{'token', v}` (`None`: none).
    pub fn fencing_token(&self) -> Option<u64> {
        self.number("token").and_then(|t| u64::try_from(t).ok())
    }

    /// Every `{'field', owner, count}` fact as an exclusive hold of `info`'s lock hash (the
    /// `RLock` layout every lock kind of it shares), under the hash's lease, sorted by owner.
    pub fn exclusive_holders(&self, info: &mut ObjectInfo) {
        for row in self.all("field") {
            let [owner, count] = row else { continue };
            let count = count.parse().unwrap_or(0);
            info.holders.push(Holder::new(
                owner.clone(),
                HoldMode::Exclusive,
                count,
                info.ttl,
            ));
        }
        info.holders.sort_by(|a, b| a.owner.cmp(&b.owner));
    }
}

/// The channel releases of the lock hash at `key` publish on, `redisson_lock__channel:{<key>}`:
/// what a watcher of any lock kind of that layout listens on ([`KindInspection::channel`]).
pub fn lock_channel(key: &str) -> String {
    crate::keys::prefixed("redisson_lock__channel", key)
}

impl Client {
    /// The first registered kind of main key type `main_type` (by name; `none`, nothing
    /// under the name: every kind) whose script claims `key` (`certain`: only a claim it is
    /// sure of).
    pub(super) async fn registered_claim(
        &self,
        key: &str,
        main_type: &str,
        certain: bool,
    ) -> Result<Option<ObjectInfo>> {
        // Every candidate asked at once (one round trip on the multiplexed connection, not one
        // per kind); the first by name that claims it wins.
        let asked = registered()
            .iter()
            .filter(|kind| main_type == "none" || kind.main_type == main_type)
            .map(|&kind| self.inspect_registered(key, kind, false));
        for info in futures::future::join_all(asked).await {
            if let Some(info) = info?
                && info.kind.is_some()
                && (info.kind_certain || !certain)
            {
                return Ok(Some(info));
            }
        }
        Ok(None)
    }

    /// Reads `key` as `kind` with the kind's own script: `None` when the key holds a layout
    /// that is not the kind's. `named`: the caller said the kind, which makes it certain.
    pub(super) async fn inspect_registered(
        &self,
        key: &str,
        kind: &'static KindInspection,
        named: bool,
    ) -> Result<Option<ObjectInfo>> {
        let call = ScriptCall::new(kind.script, &[key])
            .arg(INSPECT_LIMIT)
            .arg(if named { "1" } else { "0" });
        let reply: Option<Vec<Vec<String>>> = self.eval_read(&call).await.map_err(|e| match e {
            Error::Redis(e) => crate::error::map_redis_error(e, key),
            e => e,
        })?;
        let Some(rows) = reply else {
            return Ok(None);
        };
        // Beyond the three facts every reply starts with, a kind replies facts of its own
        // even when nothing is under the name, when what it keeps beside it outlives it.
        let own_facts = rows.len() > 3;
        let facts = KindFacts { rows };
        let mut info =
            ObjectInfo::empty(self, key, facts.number("pttl").unwrap_or(-2), facts.now());
        if facts.value("type").is_none_or(|t| t == "none") && !own_facts {
            return Ok(Some(info));
        }
        info.kind = Some(ObjectKind::Registered(kind));
        (kind.read)(&facts, &mut info);
        info.kind_certain |= named;
        Ok(Some(info))
    }
}
