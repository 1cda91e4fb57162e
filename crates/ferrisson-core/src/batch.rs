//! Coalescing: script calls that a client's tasks make at the same time go to Redis as one call
//! per script (and, on a cluster, per slot), the script's batch form
//! ([`ScriptCall::batch_command`]), which runs them one after the other in one script run.
//!
//! Each `EVALSHA` costs the server a few microseconds before the script's first command, and
//! the client a request of its own; 64 tasks locking and unlocking distinct keys pay that 128
//! times per round trip, and the batch form pays it once. The calls' outcomes are those of the
//! same calls made one after the other: each call's reply (or error) is its own.
//!
//! A single dispatcher task sends the calls. It sends whatever has arrived as soon as fewer
//! than [`WINDOW`] flights are out, so that a lone call goes out at once (one task hop later)
//! and calls that arrive while flights are out wait for the next one, growing it.

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use redis::{RedisResult, Value};
use tokio::sync::{mpsc, oneshot};

use crate::connection::Connection;
use crate::script::{Script, ScriptCall};

/// How many flights (sets of calls sent together) may be out at once.
const WINDOW: usize = 2;

/// The most calls in one batch: a batch runs as one script, which holds the server for its
/// whole run (a few microseconds per call).
const MAX_CALLS: usize = 128;

struct Pending {
    call: ScriptCall,
    reply: oneshot::Sender<RedisResult<Value>>,
    /// The latest moment the call may be sent ([`crate::connection::sending_by`]).
    by: Option<tokio::time::Instant>,
}

impl Pending {
    /// Whether the call is still to be sent: its caller waits for it, and it is in time. A
    /// call too late is answered so, and not sent.
    fn keep(&mut self) -> bool {
        if self.reply.is_closed() {
            return false;
        }
        if let Err(late) = crate::connection::in_time(self.by) {
            let (tx, _) = oneshot::channel();
            let reply = std::mem::replace(&mut self.reply, tx);
            let _ = reply.send(Err(late));
            return false;
        }
        true
    }
}

/// The handle to a client's dispatcher: cheap to clone; the dispatcher ends once every handle
/// is gone and the calls out have been answered.
#[derive(Clone)]
pub(crate) struct Batcher {
    tx: Option<mpsc::UnboundedSender<Pending>>,
    conn: Connection,
}

impl Batcher {
    /// Starts the dispatcher of `conn`, or, with `enabled` false, a batcher that sends every
    /// call alone.
    pub(crate) fn start(conn: Connection, enabled: bool) -> Self {
        let tx = enabled.then(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(dispatch(conn.clone(), rx));
            tx
        });
        Self { tx, conn }
    }

    /// Runs `call`, in a batch with the calls of other tasks made meanwhile: `EVALSHA` (of the
    /// batch form when there are several), `EVAL` of the source on `NOSCRIPT`.
    pub(crate) async fn eval(&self, call: &ScriptCall) -> RedisResult<Value> {
        let Some(tx) = &self.tx else {
            return self.conn.eval(call).await;
        };
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            call: call.clone(),
            reply,
            by: crate::connection::send_by(),
        };
        if tx.send(pending).is_err() {
            return self.conn.eval(call).await;
        }
        match answer.await {
            Ok(result) => result,
            // The dispatcher is gone (the runtime shuts down): the call may have been sent.
            Err(_) => Err(redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the client's dispatcher stopped before the call was answered",
            ))),
        }
    }
}

async fn dispatch(conn: Connection, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let cluster = conn.is_cluster();
    let mut flights: FuturesUnordered<BoxFuture<'static, ()>> = FuturesUnordered::new();
    let mut queue: Vec<Pending> = Vec::new();
    let mut open = true;
    loop {
        tokio::select! {
            biased;
            Some(()) = flights.next(), if !flights.is_empty() => {}
            received = rx.recv(), if open => match received {
                Some(pending) => queue.push(pending),
                None => open = false,
            },
            else => break,
        }
        while let Ok(pending) = rx.try_recv() {
            queue.push(pending);
        }
        if flights.len() < WINDOW && !queue.is_empty() {
            let groups = group(std::mem::take(&mut queue), cluster);
            let conn = conn.clone();
            // `join_all` polls the runs in order the first time, which hands them to the
            // connection in order: Redis receives them as they were queued.
            flights.push(Box::pin(async move {
                futures::future::join_all(groups.into_iter().map(|g| send(&conn, g))).await;
            }));
        }
    }
}

/// Calls that may share a batch: one script, key count and argument count, and on a cluster
/// one slot.
type GroupKey = ((*const Script, usize, usize), u16);

/// Splits the calls, in the order they came, into runs of calls that may share a batch, of at
/// most [`MAX_CALLS`] each. Only calls next to each other share one: the runs go out in order,
/// so Redis runs every call after the calls queued before it, as it would without coalescing
/// (a cancelled acquire's clean-up, queued behind the acquire, must run after it).
fn group(queue: Vec<Pending>, cluster: bool) -> Vec<Vec<Pending>> {
    let mut runs: Vec<(GroupKey, Vec<Pending>)> = Vec::new();
    for pending in queue {
        let slot = if cluster {
            crate::keys::hash_slot(pending.call.keys().next().unwrap_or_default())
        } else {
            0
        };
        let key = (pending.call.shape(), slot);
        // A plain command has no batch form, and a tracked call's arming goes right before it:
        // each goes alone (the connection pipelines it with the runs beside it).
        let alone = pending.call.goes_alone();
        match runs.last_mut() {
            Some((last, calls))
                if !alone
                    && *last == key
                    && calls.len() < MAX_CALLS
                    && calls.first().is_some_and(|c| !c.call.goes_alone()) =>
            {
                calls.push(pending)
            }
            _ => runs.push((key, vec![pending])),
        }
    }
    runs.into_iter().map(|(_, calls)| calls).collect()
}

/// Sends one group: alone, the call itself; several, the batch form; and answers each call.
async fn send(conn: &Connection, mut calls: Vec<Pending>) {
    // A call whose caller has gone (its reply channel closed) before it is sent, or before
    // `NOSCRIPT` makes it go again as `EVAL`, is not sent: it has not run, and the caller's
    // clean-up (an undo queued behind it) may have run already, which the call must not
    // follow.
    calls.retain_mut(Pending::keep);
    if calls.len() == 1 {
        if let Some(pending) = calls.pop() {
            let result = conn
                .eval_if_wanted(&pending.call, || !pending.reply.is_closed(), pending.by)
                .await;
            let _ = pending.reply.send(result);
        }
        return;
    }
    if calls.is_empty() {
        return;
    }
    let loads = conn.loads_before(calls[0].call.script(), true).await;
    // A cluster's loads were waited for: callers may have left, and calls run out of time.
    calls.retain_mut(Pending::keep);
    if calls.is_empty() {
        return;
    }
    let refs: Vec<&ScriptCall> = calls.iter().map(|p| &p.call).collect();
    let result = conn
        .query_loaded(loads, &ScriptCall::batch_command(&refs, false), true)
        .await;
    drop(refs);
    let result = match result {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            calls.retain_mut(Pending::keep);
            if calls.is_empty() {
                return;
            }
            let script = calls[0].call.script().name();
            tracing::info!(
                script,
                "the server lacks the script's batch form (restarted, failed over or flushed): sending it with EVAL"
            );
            crate::metrics::script_reloaded(script);
            let refs: Vec<&ScriptCall> = calls.iter().map(|p| &p.call).collect();
            conn.query_raw(&ScriptCall::batch_command(&refs, true))
                .await
        }
        other => other,
    };
    match result.and_then(|value| split(value, calls.len())) {
        Ok(replies) => {
            for (pending, reply) in calls.into_iter().zip(replies) {
                let _ = pending.reply.send(reply);
            }
        }
        Err(e) => {
            for pending in calls {
                let _ = pending.reply.send(Err(e.clone()));
            }
        }
    }
}

/// Each call's reply out of a batch's: `{reply}`, `{}` for nil, or the call's error.
fn split(value: Value, calls: usize) -> RedisResult<Vec<RedisResult<Value>>> {
    let Value::Array(items) = value else {
        return Err(protocol_error(format!(
            "a batch of {calls} script calls answered {value:?}"
        )));
    };
    if items.len() != calls {
        return Err(protocol_error(format!(
            "a batch of {calls} script calls answered {} replies",
            items.len()
        )));
    }
    Ok(items
        .into_iter()
        .map(|item| match item {
            Value::Array(mut one) if one.len() <= 1 => {
                one.pop().unwrap_or(Value::Nil).extract_error()
            }
            other => other.extract_error(),
        })
        .collect())
}

fn protocol_error(message: String) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected batch reply",
        message,
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    static TEST: Script = Script::new("test/keep", "-- operation: test/keep\nreturn 1\n");

    fn pending(
        by: Option<tokio::time::Instant>,
    ) -> (Pending, oneshot::Receiver<RedisResult<Value>>) {
        let (reply, answer) = oneshot::channel();
        let call = ScriptCall::new(&TEST, &["k"]);
        (Pending { call, reply, by }, answer)
    }

    #[tokio::test]
    async fn a_call_past_its_send_deadline_is_answered_not_sent() {
        let now = tokio::time::Instant::now();
        let (mut late, answer) = pending(Some(now));
        assert!(!late.keep(), "a call at its deadline is not sent");
        let error = answer.await.unwrap().unwrap_err();
        assert!(error.to_string().contains("not sent"), "{error}");
        let (mut timely, _answer) = pending(Some(now + std::time::Duration::from_secs(60)));
        assert!(timely.keep());
        let (mut unbounded, _answer) = pending(None);
        assert!(unbounded.keep());
        let (mut left, answer) = pending(None);
        drop(answer);
        assert!(!left.keep(), "a call whose caller left is not sent");
    }
}
