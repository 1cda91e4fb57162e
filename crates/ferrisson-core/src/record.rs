//! A client's record of its calls on one object **\[ext\]** (`lua/core/record_prelude.lua`):
//! which of them ran, in one key per client and object, so that a call resent after a lost
//! reply counts once and a call whose caller left is undone once, without a fresh latch key
//! per call (creating and expiring those cost Redis more than the calls' own work).
//!
//! A call takes a *slot* (a field of the record's hash) and a sequence number the client never
//! hands out twice; the slot goes back to the client only once the call's outcome is settled
//! (answered, or resent and undone), so a slot's value names one call at a time. The record
//! has as many fields as the client ever had calls in flight at once on the object.
//!
//! A call sent more than once (resent after a lost reply, or undone) may have a copy still on
//! its way on a connection the client gave up on, which Redis can run after the resend did:
//! every copy reads its slot and does nothing once the slot names its call, so such a slot goes
//! back only after [`CallRecord::ttl`] (the record's own TTL), when no copy can still arrive.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use crate::client::{Client, ClientEngine};
use crate::script::ScriptCall;

use crate::record_slots::Slots;

/// One client's record on one object.
#[derive(Debug, Clone)]
pub struct CallRecord {
    key: String,
    slots: Arc<Slots>,
}

/// A call recorded in a [`CallRecord`]: its slot and sequence number. The slot goes back when
/// this is dropped: keep it for as long as the call may be sent again or undone.
#[derive(Debug)]
pub struct RecordedCall {
    slots: Arc<Slots>,
    /// The slot (the record's field).
    pub slot: u32,
    /// The call's sequence number.
    pub seq: u64,
    /// Whether the call asks Redis to set the record's TTL (flag `e`).
    pub refresh: bool,
    /// Whether the call was sent again or undone: a copy of it may still reach Redis.
    resent: AtomicBool,
    /// How long such a slot rests before another call uses it: the record's TTL.
    rest: Duration,
}

impl Drop for RecordedCall {
    fn drop(&mut self) {
        let mut state = self.slots.0.lock().unwrap_or_else(PoisonError::into_inner);
        if self.resent.load(Ordering::Relaxed) {
            // No instant that far ahead: the slot is never used again.
            if let Some(until) = Instant::now().checked_add(self.rest) {
                state.resting.push_back((until, self.slot));
            }
        } else {
            state.free.push(self.slot);
        }
    }
}

impl CallRecord {
    /// `client`'s record on the object at `object_key`: `suffixed(key, "record")`, `:` and
    /// the client id.
    pub fn new(client: &Client, object_key: &str) -> Self {
        let key = client.client_latch(&crate::keys::suffixed(object_key, "record"));
        let slots = client.inner.record_pools.slots(&key);
        Self { key, slots }
    }

    /// The record's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The client's id in 32 hex digits, which ends the record's key: the permit scripts
    /// derive the record and the undone marks from the object's name and it.
    pub fn client_hex(&self) -> &str {
        self.key
            .get(self.key.len().saturating_sub(32)..)
            .unwrap_or_default()
    }

    /// How long the record and the marks live after a call sets their TTL: twice the retry
    /// window, so that a call that asked at most half of it before lasts past every resend.
    pub fn ttl(client: &Client) -> Duration {
        client.retry_window().saturating_mul(2)
    }

    /// Starts a call: a free slot, a fresh sequence number, and whether the call sets the
    /// record's TTL (on a slot the client never used, and when no call did in the last half
    /// retry window).
    pub fn start(&self, client: &Client) -> RecordedCall {
        let now = Instant::now();
        let (slot, refresh) = {
            let mut state = self.slots.0.lock().unwrap_or_else(PoisonError::into_inner);
            while let Some(&(until, slot)) = state.resting.front() {
                if until > now {
                    break;
                }
                state.resting.pop_front();
                state.free.push(slot);
            }
            let (slot, fresh) = match state.free.pop() {
                Some(slot) => (slot, false),
                None => {
                    let slot = state.next;
                    state.next = slot.saturating_add(1);
                    (slot, true)
                }
            };
            let due = state
                .refreshed
                .is_none_or(|at| now.saturating_duration_since(at) >= client.retry_window() / 2);
            if due {
                state.refreshed = Some(now);
            }
            (slot, due || fresh)
        };
        RecordedCall {
            slots: self.slots.clone(),
            slot,
            seq: client.next_seq(),
            refresh,
            resent: AtomicBool::new(false),
            rest: CallRecord::ttl(client),
        }
    }
}

impl RecordedCall {
    /// `call` with the record's arguments after its own: the slot and the sequence number,
    /// then the flags ([`flags`](Self::flags)) when there are any.
    pub fn args(&self, call: ScriptCall, client: &Client, resend: bool) -> ScriptCall {
        let call = call.arg(self.slot).arg(self.seq);
        let flags = self.flags(client, resend, false, "");
        if flags.is_empty() {
            call
        } else {
            call.arg(flags)
        }
    }

    /// As [`args`](Self::args), the flags always given (`""` for none), the kind's own
    /// `extra` ones after the record's, so that more arguments can follow.
    pub fn args_flagged(
        &self,
        call: ScriptCall,
        client: &Client,
        resend: bool,
        extra: &str,
    ) -> ScriptCall {
        self.with_flags(call, self.flags(client, resend, false, extra))
    }

    /// `call` with the slot, the sequence number and `flags`.
    fn with_flags(&self, call: ScriptCall, flags: String) -> ScriptCall {
        call.arg(self.slot).arg(self.seq).arg(flags)
    }

    /// The record's arguments of one of a call's two forms made up front (for
    /// [`send`](Self::send) and [`send_through`](Self::send_through)): the first send's
    /// ([`args_flagged`](Self::args_flagged), not a resend), or with `resend` the resend's,
    /// made before it is known to be needed: flagged `r`, but the call is noted as sent again
    /// only when it is sent.
    pub fn form_args(
        &self,
        call: ScriptCall,
        client: &Client,
        resend: bool,
        extra: &str,
    ) -> ScriptCall {
        let mut flags = self.flags(client, false, false, extra);
        if resend {
            flags.insert(0, 'r');
        }
        self.with_flags(call, flags)
    }

    /// As [`args`](Self::args) for the undo of the call: the flags always carry the TTL,
    /// which the undone marks take too.
    pub fn undo_args(&self, call: ScriptCall, client: &Client) -> ScriptCall {
        self.sent_again();
        self.with_flags(call, self.flags(client, false, true, ""))
    }

    /// Sends the recorded call as `ClientEngine::eval` does (retried on a broken connection,
    /// asked again while a lost reply leaves it unknown), with both of its forms made up front:
    /// `first` for the first attempt, `resend` (its arguments from
    /// [`form_args`](Self::form_args)) for every one after it, which notes the slot as
    /// sent again. The engine sends it without calling back into the synchronizer.
    ///
    /// # Errors
    ///
    /// As `ClientEngine::eval`.
    pub async fn send<T: redis::FromRedisValue>(
        &self,
        client: &Client,
        first: &ScriptCall,
        resend: &ScriptCall,
    ) -> crate::error::Result<T> {
        let (reply, synced) = client
            .settle(|n| {
                let call = if n == 0 {
                    first
                } else {
                    self.sent_again();
                    resend
                };
                client.eval_once_synced(call)
            })
            .await?;
        crate::client::warn_unsynced(first, synced);
        Ok(reply)
    }

    /// Sends a recorded call that must reach Redis once even if its caller leaves (a release),
    /// as [`send`](Self::send) does, with both of its forms made up front. Dropped while the
    /// call may have run, or left with its outcome unknown, it is sent again in the background
    /// (`resend`, as work [`Client::shutdown`] waits for) under the same slot, which stays taken
    /// until then: Redis runs it once. The one way every kind's recorded release is sent.
    ///
    /// # Cancel safety
    ///
    /// Dropped at any point, the call still runs once (unless Redis stays unreachable for
    /// the resend's retries, which is logged).
    ///
    /// # Errors
    ///
    /// As `ClientEngine::eval`.
    pub async fn send_through<T: redis::FromRedisValue>(
        self: &Arc<Self>,
        client: &Client,
        first: &ScriptCall,
        resend: &ScriptCall,
    ) -> crate::error::Result<T> {
        let again = crate::guard::CleanupGuard::new(client, || {
            let (recorded, client, resend) = (self.clone(), client.clone(), resend.clone());
            async move {
                recorded.sent_again();
                if let Err(e) = client.eval::<redis::Value>(&resend).await {
                    let key = resend.keys().next().unwrap_or_default().to_owned();
                    tracing::warn!(script = resend.script().name(), %key, error = %e, "resending an abandoned call failed");
                }
            }
        });
        let reply = self.send(client, first, resend).await;
        again.settle(&reply);
        reply
    }

    /// Notes that the call is sent again (or undone): a copy sent before may still reach
    /// Redis after this one, so the slot rests before another call uses it.
    fn sent_again(&self) {
        self.resent.store(true, Ordering::Relaxed);
    }

    /// The call's flags: `r` a resend, `e<ms>` set the record's TTL (when the call refreshes
    /// it, or `ttl`), then `extra`.
    pub fn flags(&self, client: &Client, resend: bool, ttl: bool, extra: &str) -> String {
        let mut flags = String::new();
        if resend {
            self.sent_again();
            flags.push('r');
        }
        if self.refresh || ttl {
            flags.push('e');
            flags.push_str(&crate::time::millis(CallRecord::ttl(client)).to_string());
        }
        flags.push_str(extra);
        flags
    }
}
