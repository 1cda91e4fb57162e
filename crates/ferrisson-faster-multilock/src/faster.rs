//! The faster multi-lock: a kind of the engine's ([`HoldKind`]) whose hold is a set of values.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use ferrisson_core::__engine::{
    ClientEngine, HoldKind, KeyShape, LeaseSpec, LockHandle, LockKind, LockNames, LockType,
    ObjectKeys, RELEASE_PRELUDE, ReleaseArgs, Released, Script, ScriptCall, Taken, TryArgs,
    Waiting, Wake, hold_guard, keys::prefixed, release, time::millis,
};
use ferrisson_core::{Backoff, Client, Error, HoldGuard, LossReason, Owner, Result};

macro_rules! script {
    ($name:ident, $op:literal, $prelude:expr, $file:literal) => {
        pub(crate) static $name: Script = Script::with_prelude($op, $prelude, include_str!($file));
    };
}
script!(
    PRELUDE,
    "faster_multilock/prelude",
    &RELEASE_PRELUDE,
    "../lua/prelude.lua"
);
script!(
    ACQUIRE,
    "faster_multilock/acquire",
    &PRELUDE,
    "../lua/acquire.lua"
);
script!(
    RELEASE,
    "faster_multilock/release",
    &PRELUDE,
    "../lua/release.lua"
);
script!(
    RENEW,
    "faster_multilock/renew",
    &PRELUDE,
    "../lua/renew.lua"
);
script!(
    STATE,
    "faster_multilock/state",
    &PRELUDE,
    "../lua/state.lua"
);
script!(
    FORCE,
    "faster_multilock/force_release",
    &PRELUDE,
    "../lua/force_release.lua"
);

/// The most distinct values one [`FasterMultiLock`] takes. Every call of a hold names them
/// all, and Redis runs nothing else meanwhile: at this many, an acquire took the server 2.7 to
/// 4.4 ms in the `faster-multilock` bench scenario (Redisson's own script 6.2 ms), under the 10
/// ms that Redis counts as slow by default; at 10,000 it took some 60 ms (docs/benchmarks.md).
pub const MAX_VALUES: usize = 1_000;

/// A release's wake-up mask ([`crate`] docs, "Wake-ups") is this flag plus the freed values' bits.
const MASK_FLAG: u64 = 1 << 52;

/// Redisson's field for a value encoded by its `StringCodec` (the value's UTF-8): its 128-bit
/// HighwayHash under Redisson's key, as two big-endian words in base64 without the padding.
pub fn redisson_field(value: &str) -> String {
    use highway::{HighwayHash, HighwayHasher, Key};
    const KEY: [u64; 4] = [
        0x9e37_79b9_7f4a_7c15,
        0xf39c_c060_5ced_c834,
        0x1082_276b_f3a2_7251,
        0xf86c_6a11_d0c1_8e95,
    ];
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let [high, low] = HighwayHasher::new(Key(KEY)).hash128(value.as_bytes());
    let bytes = [high.to_be_bytes(), low.to_be_bytes()].concat();
    let mut field = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| n << 8 | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            field.push(char::from(B64[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    field
}

/// A value's bit in a release's wake-up mask (the scripts' `fml_bit`).
fn bit(field: &str) -> u64 {
    let byte = |i| u64::from(field.as_bytes().get(i).copied().unwrap_or(0));
    1 << ((byte(0) * 256 + byte(1)) % 52)
}

/// The group channel's messages: Redisson's `0` (a release that names nothing) wakes every
/// waiter; ferrisson's `1` is for Redisson's waiters, and the mask after it wakes ours.
fn wake_policy(payload: &[u8]) -> Wake {
    match std::str::from_utf8(payload)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(1) => Wake::None,
        Some(n) if n >= MASK_FLAG => Wake::Matching(n - MASK_FLAG),
        _ => Wake::All,
    }
}

/// Many values of one group locked all at once, in one hash and one script call: Redisson's
/// `RFasterMultiLock` (`getFasterMultiLock(group, values)`). See the [crate] docs.
#[derive(Clone, Debug)]
pub struct FasterMultiLock(LockHandle<Group>);

/// A group's hash, and the values a handle locks in it.
#[derive(Debug, Clone)]
pub struct Group {
    names: LockNames,
    channel: String,
    /// The values' fields, sorted and distinct: one argument each for the acquire and the
    /// release (`fml_args`), one hold argument after the owner for the rest
    /// ([`hold_arg`](Self::hold_arg)).
    fields: Arc<[String]>,
    interest: u64,
}

/// The fields of `values`, sorted and distinct.
fn fields_of<V: AsRef<str>>(values: impl IntoIterator<Item = V>) -> Result<Vec<String>> {
    let mut fields: Vec<String> = values
        .into_iter()
        .map(|v| redisson_field(v.as_ref()))
        .collect();
    fields.sort_unstable();
    fields.dedup();
    if fields.is_empty() || fields.len() > MAX_VALUES {
        return Err(Error::InvalidArgument(format!(
            "a faster multi-lock takes 1 to {MAX_VALUES} distinct values, got {}",
            fields.len()
        )));
    }
    Ok(fields)
}

impl Group {
    fn with_fields(names: LockNames, fields: &[&str]) -> Self {
        Self {
            channel: prefixed("redisson_lock__channel", &names.key),
            interest: fields.iter().fold(0, |mask, f| mask | bit(f)),
            fields: fields.iter().map(|f| (*f).to_owned()).collect(),
            names,
        }
    }

    /// The hold argument of `owner` (`"<owner> <field> <field> ..."`, `fml_hold`): what the
    /// watchdog's renewal, the state read and the force release take.
    fn hold_arg(&self, owner: &str) -> String {
        let mut arg = String::with_capacity(owner.len() + 23 * self.fields.len());
        arg.push_str(owner);
        for field in self.fields.iter() {
            arg.push(' ');
            arg.push_str(field);
        }
        arg
    }

    fn state(&self, owner: &str) -> impl Future<Output = Result<[i64; 3]>> + Send + '_ {
        let call = ScriptCall::new(&STATE, &[&self.names.key]).arg(self.hold_arg(owner));
        async move { self.names.client.eval(&call).await }
    }
}

impl FasterMultiLock {
    /// A handle to `values` of the group `group` (after the client's namespace prefix): each
    /// value as Redisson's `StringCodec` encodes it, duplicates counted once.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `group` is empty, or for no values or more than
    /// [`MAX_VALUES`].
    pub fn new<V: AsRef<str>>(
        client: &Client,
        group: &str,
        values: impl IntoIterator<Item = V>,
    ) -> Result<Self> {
        let fields = fields_of(values)?;
        let names = LockNames::new(client, group, false, true)?;
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        Ok(Self(LockHandle::new(Group::with_fields(names, &fields))))
    }

    /// Frees every value of the group `group`, whoever holds it; whether any was held (the
    /// command-line tool's force unlock).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, [`Error::WrongType`] when the key holds no
    /// group, [`Error::Unreachable`].
    pub async fn force_unlock_group(client: &Client, group: &str) -> Result<bool> {
        Self::whole_group(client, group)?
            .0
            .kind()
            .force_unlock()
            .await
    }

    /// A handle to the group `group` itself, naming no value: what the command-line tool
    /// force-unlocks and deletes (never taken: it names nothing to take).
    pub(crate) fn whole_group(client: &Client, group: &str) -> Result<Self> {
        let names = LockNames::new(client, group, false, false)?;
        Ok(Self(LockHandle::new(Group::with_fields(names, &[]))))
    }

    /// This lock, acquired and queried as `owner` (re-entry: each value's hold count grows).
    pub fn owned_by(&self, owner: Owner) -> Self {
        Self(self.0.owned_by(owner))
    }

    /// `values` of this lock, to unlock from a hold of it while the hold keeps the others
    /// ([`Part::unlock`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no values, or a value this lock does not take.
    pub fn part<V: AsRef<str>>(&self, values: impl IntoIterator<Item = V>) -> Result<Part> {
        let kind = self.0.kind();
        let part = fields_of(values)?;
        let all: Vec<&str> = kind.fields.iter().map(String::as_str).collect();
        if part.iter().any(|f| all.binary_search(&f.as_str()).is_err()) {
            return Err(Error::InvalidArgument(format!(
                "a value to unlock is not one of this lock's on `{}`",
                kind.names.key
            )));
        }
        let part: Vec<&str> = part.iter().map(String::as_str).collect();
        let kept: Vec<&str> = all
            .into_iter()
            .filter(|f| part.binary_search(f).is_err())
            .collect();
        Ok(Part {
            owner: self.0.owner().cloned(),
            unlocked: Arc::new(Group::with_fields(kind.names.clone(), &part)),
            kept: (!kept.is_empty())
                .then(|| Arc::new(Group::with_fields(kind.names.clone(), &kept))),
        })
    }
}

/// Values of a [`FasterMultiLock`] to unlock from a hold while it keeps the others
/// ([`FasterMultiLock::part`]).
#[derive(Debug, Clone)]
pub struct Part {
    /// The owner the lock's handle is bound to, which [`rest`](Part::rest)'s is bound to too.
    owner: Option<Owner>,
    unlocked: Arc<Group>,
    kept: Option<Arc<Group>>,
}

impl Part {
    /// The lock of the values a hold keeps after [`unlock`](Self::unlock) (`None`: none): the
    /// kept guard's values, to unlock a further part of them; bound to the owner the part's
    /// lock was bound to.
    pub fn rest(&self) -> Option<FasterMultiLock> {
        let kept = self.kept.as_deref()?;
        let rest = FasterMultiLock(LockHandle::new(kept.clone()));
        Some(match &self.owner {
            Some(owner) => rest.owned_by(owner.clone()),
            None => rest,
        })
    }

    /// Unlocks these values of the hold `guard` (taken through the lock this part is of) in
    /// one call, and returns the guard of the values it keeps (those of [`rest`](Self::rest)): renewed by the watchdog, or
    /// ending with its fixed lease, as before; `None` when no value is kept.
    ///
    /// # Cancel safety
    ///
    /// As [`HoldGuard::unlock`]'s for the values unlocked; the guard of the values kept, when
    /// the future is dropped before it returns it, releases them too.
    ///
    /// # Errors
    ///
    /// As [`HoldGuard::unlock`]'s; the values kept are released too.
    pub async fn unlock(&self, guard: HoldGuard) -> Result<Option<HoldGuard>> {
        let (Some(kept), Some(deadline), None) =
            (&self.kept, guard.lease_deadline(), guard.loss_reason())
        else {
            // Every value, or a hold lost already (its unlock says so).
            return guard.unlock().await.map(|()| None);
        };
        let (owner, token, client) = (guard.owner().clone(), guard.token(), &kept.names.client);
        let Some((_, Taken::Hold { lease, .. })) = guard.into_handed() else {
            return Err(Error::LeaseLost(LossReason::ClientShutDown));
        };
        let renew = lease.is_renewed();
        let lost = lease.end().lost;
        // The values kept keep the hold's deadline, in a fresh entry of the watchdog's: a
        // renewed hold with the client's lease, sent that long before the deadline; a fixed one
        // (or a deadline too early for the clock to go back a lease) with what is left of it.
        let now = ferrisson_core::__engine::Instant::now();
        let (lease, sent_at) = match deadline.checked_sub(client.config().lease()) {
            Some(sent_at) if renew => (client.config().lease(), sent_at.min(now)),
            _ => (deadline.saturating_duration_since(now), now),
        };
        let spec = LeaseSpec {
            script: &RENEW,
            key: kept.names.key.clone(),
            owner: kept.hold_field(&owner),
            lease,
            renew,
            sent_at,
        };
        let kept = hold_guard(kept.clone(), owner.clone(), client.hold_lease(spec), token);
        let released = release(&self.unlocked, &owner, None, false).await?;
        if let Some(reason) = lost {
            // Lost just before it was split: the guard of the rest goes (releasing what is
            // left), and the caller hears what it would have from `unlock`.
            drop(kept);
            return Err(Error::LeaseLost(reason));
        }
        match released {
            Released::NotOwner => Err(Error::NotOwner(format!(
                "`{}` values are not all held by {owner}",
                kept.key()
            ))),
            _ => Ok(Some(kept)),
        }
    }
}

impl LockType for FasterMultiLock {
    type Kind = Group;

    fn handle(&self) -> &LockHandle<Group> {
        &self.0
    }
}

impl LockKind for Group {
    async fn force_unlock(&self) -> Result<bool> {
        let call = ScriptCall::new(&FORCE, &[&self.names.key])
            .arg(self.names.client.config().publish_command().as_str())
            .arg(self.hold_arg("-"));
        Ok(self.names.client.eval::<i64>(&call).await? > 0)
    }

    async fn hold_count_of(&self, owner: &Owner) -> Result<u32> {
        Ok(u32::try_from(self.state(owner.as_str()).await?[0]).unwrap_or(0))
    }

    async fn held_for(&self) -> Result<Option<Option<Duration>>> {
        let [_, held, pttl] = self.state("-").await?;
        Ok((held == 1).then(|| u64::try_from(pttl).ok().map(Duration::from_millis)))
    }

    fn object_keys(&self) -> ObjectKeys<'_> {
        ObjectKeys::new(&self.names.client, KeyShape::Lock, vec![&self.names.key])
            .waking(&self.channel, "0")
    }

    fn release_channel(&self) -> Option<&str> {
        Some(&self.channel)
    }
}

impl HoldKind for Group {
    fn names(&self) -> &LockNames {
        &self.names
    }

    fn kind_name(&self) -> &'static str {
        "faster_multilock"
    }

    fn renew_script(&self) -> &'static Script {
        &RENEW
    }

    fn hold_field(&self, owner: &Owner) -> Arc<str> {
        self.hold_arg(owner.as_str()).into()
    }

    fn waiting(&self, _owner: &Owner) -> Waiting<'_> {
        Waiting {
            channel: Cow::Borrowed(&self.channel),
            policy: wake_policy,
            recheck: Backoff::fixed(self.names.client.config().lease()),
            spin: None,
            interest: self.interest,
        }
    }

    fn try_call(&self, args: &TryArgs<'_>) -> ScriptCall {
        let call = ScriptCall::new(&ACQUIRE, &[&self.names.key, self.names.undone_key()])
            .arg(millis(args.lease));
        let call = if args.retry {
            call.arg(args.believed)
        } else {
            call.arg("")
        };
        call.arg(args.seq)
            .arg(args.owner.as_str())
            .arg(&*self.fields)
    }

    fn release_call(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        let call = ScriptCall::new(&RELEASE, &[&self.names.key, self.names.record_key()])
            .arg(self.names.client.config().publish_command().as_str())
            .arg(args.renew_lease.map_or(0, millis));
        let call = match args.record {
            Some(record) => record.args_flagged(call, &self.names.client, args.retry, ""),
            // Only a handle of the whole group (`whole_group`) has no record, and it names no
            // value to take, so it is never released.
            None => call.arg("").arg("").arg(""),
        };
        call.arg(self.interest)
            .arg(args.owner.as_str())
            .arg(&*self.fields)
    }
}
