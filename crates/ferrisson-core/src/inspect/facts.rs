//! The facts `core/inspect` reads, and what they come to: the kind an object's layout shows,
//! its times, its owners' records.

use super::*;

/// The facts `core/inspect` returns, by name.
#[derive(Debug, Default)]
pub(super) struct Facts {
    pub(super) now: u64,
    pub(super) main_type: String,
    pub(super) pttl: i64,
    pub(super) fields: Vec<(String, String)>,
    pub(super) value: Option<String>,
    pub(super) token: Option<String>,
    pub(super) reservation: Option<(String, i64)>,
}

impl Facts {
    pub(super) fn parse(reply: Vec<Vec<String>>) -> Self {
        let mut f = Facts::default();
        let num = |s: &str| s.parse::<i64>().unwrap_or(0);
        let unum = |s: &str| s.parse::<u64>().unwrap_or(0);
        for fact in reply {
            let at = |i: usize| fact.get(i).cloned().unwrap_or_default();
            match fact.first().map(String::as_str) {
                Some("now") => f.now = unum(&at(1)),
                Some("type") => f.main_type = at(1),
                Some("pttl") => f.pttl = num(&at(1)),
                Some("field") => f.fields.push((at(1), at(2))),
                Some("value") => f.value = Some(at(1)),
                Some("token") => f.token = Some(at(1)),
                Some("reservation") => f.reservation = Some((at(1), num(&at(2)))),
                _ => {}
            }
        }
        f
    }

    pub(super) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, v)| v.as_str())
    }

    /// The kind the layout shows, and whether it is certain; `None` for nothing stored.
    pub(super) fn kind(&self, key: &str) -> Result<Option<(ObjectKind, bool)>> {
        let foreign = || Error::WrongType {
            key: key.to_owned(),
        };
        Ok(Some(match self.main_type.as_str() {
            // Nothing under the name: what a registered kind keeps beside it may outlive it
            // (a fair lock's queue, an expirable semaphore's taken permits): that kind says so.
            "none" => return Ok(None),
            "hash" => {
                if self.field("mode").is_some() {
                    // Not a lock hash of the kinds read here: perhaps a registered kind's (a
                    // read-write lock's).
                    return Err(foreign());
                } else {
                    let ok = self
                        .fields
                        .iter()
                        .all(|(f, v)| client_tag(f).is_some() && v.parse::<u64>().is_ok());
                    if !ok {
                        return Err(foreign());
                    }
                    // An idle lock hash of any kind, or a fair lock's with its queue or a
                    // spin lock's with its reservation (which those kinds, registered, say
                    // when they are sure of it).
                    (ObjectKind::Lock, self.token.is_some())
                }
            }
            "string" => {
                let value = self.value.as_deref().unwrap_or_default();
                if value.parse::<i64>().is_ok() {
                    // A bare count could be an expirable semaphore's (a registered kind, which
                    // says so when it is sure) or a latch's.
                    (ObjectKind::Semaphore, self.reservation.is_some())
                } else {
                    // Not a count: perhaps a registered kind's (the mutex's token).
                    return Err(foreign());
                }
            }
            _ => return Err(foreign()),
        }))
    }
}

/// `ms` milliseconds as a duration, `None` when not positive.
pub(super) fn positive_ms(ms: i64) -> Option<Duration> {
    u64::try_from(ms)
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
}

/// The time left until the epoch-ms `at`, seen at the epoch-ms `now`.
pub(super) fn until(at: &str, now: u64) -> Option<Duration> {
    let at = at.parse::<f64>().ok()?;
    if !at.is_finite() {
        return None;
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let at = at.max(0.0) as u64;
    Some(Duration::from_millis(at.saturating_sub(now)))
}

/// The tag that names the record of whoever stands behind an owner or permit id.
pub(super) fn owner_tag(owner_or_id: &str) -> Option<u64> {
    client_tag(owner_or_id).or_else(|| {
        // A permit id: 32 hex digits, the first 16 the taking client's tag.
        (owner_or_id.len() == 32)
            .then(|| u64::from_str_radix(owner_or_id.get(..16)?, 16).ok())
            .flatten()
    })
}

/// The record read from a hash's fields and its time to live.
pub(super) fn record_of(fields: HashMap<String, String>, pttl: i64) -> Option<ClientRecord> {
    let id = fields.get("id")?.clone();
    let text = |f: &str| fields.get(f).cloned().unwrap_or_default();
    Some(ClientRecord {
        id,
        app: text("app"),
        host: text("host"),
        pid: fields.get("pid").and_then(|p| p.parse().ok()),
        version: text("version"),
        started_at: fields
            .get("started")
            .and_then(|s| s.parse::<u64>().ok())
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
        expires_in: positive_ms(pttl),
    })
}
