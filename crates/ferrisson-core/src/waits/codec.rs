//! A wait as the client's record keeps it: field `wait:<id>`, the value a sequence of
//! netstrings (`<length>:<bytes>,`), so that keys and owners of any bytes fit: the version
//! `1`, the task, when the wait began (epoch ms), the kind, the key, the waiting owner, the
//! permits asked for, the semaphore's limit (empty when none), then four items per hold of
//! the task: kind, key, owner (empty for permits), permits.

/// The prefix of a wait's field in a client's record.
pub(crate) const FIELD_PREFIX: &str = "wait:";

/// A hold of a waiting task, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordedHold {
    pub kind: String,
    pub key: String,
    pub owner: Option<String>,
    pub permits: u64,
}

/// A wait, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordedWait {
    pub id: u64,
    pub task: String,
    pub since_ms: u64,
    pub kind: String,
    pub key: String,
    pub owner: Option<String>,
    pub permits: Option<u32>,
    pub limit: Option<u32>,
    pub holds: Vec<RecordedHold>,
}

fn put(out: &mut String, item: &str) {
    out.push_str(&item.len().to_string());
    out.push(':');
    out.push_str(item);
    out.push(',');
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

impl RecordedWait {
    /// The record's field.
    pub(crate) fn field(&self) -> String {
        format!("{FIELD_PREFIX}{}", self.id)
    }

    /// The record's value.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        for item in [
            "1",
            &self.task,
            &self.since_ms.to_string(),
            &self.kind,
            &self.key,
            self.owner.as_deref().unwrap_or(""),
            &opt(self.permits),
            &opt(self.limit),
        ] {
            put(&mut out, item);
        }
        for hold in &self.holds {
            put(&mut out, &hold.kind);
            put(&mut out, &hold.key);
            put(&mut out, hold.owner.as_deref().unwrap_or(""));
            put(&mut out, &hold.permits.to_string());
        }
        out
    }

    /// The wait in field `field` with value `value`; `None` for another field or a value
    /// this version cannot read.
    pub(crate) fn decode(field: &str, value: &str) -> Option<Self> {
        let id = field.strip_prefix(FIELD_PREFIX)?.parse().ok()?;
        let items = items(value)?;
        let (head, holds) = items.split_at_checked(8)?;
        let [version, task, since, kind, key, owner, permits, limit] = head else {
            return None;
        };
        if *version != "1" || holds.len() % 4 != 0 {
            return None;
        }
        let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        let holds = holds
            .chunks_exact(4)
            .map(|h| {
                Some(RecordedHold {
                    kind: (*h.first()?).to_owned(),
                    key: (*h.get(1)?).to_owned(),
                    owner: text(h.get(2)?),
                    permits: h.get(3)?.parse().ok()?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            id,
            task: (*task).to_owned(),
            since_ms: since.parse().ok()?,
            kind: (*kind).to_owned(),
            key: (*key).to_owned(),
            owner: text(owner),
            permits: permits.parse().ok(),
            limit: limit.parse().ok(),
            holds,
        })
    }
}

/// The netstrings of `value`, `None` when it is not a sequence of them.
fn items(mut value: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    while !value.is_empty() {
        let (len, rest) = value.split_once(':')?;
        let len: usize = len.parse().ok()?;
        let item = rest.get(..len)?;
        value = rest.get(len..)?.strip_prefix(',')?;
        out.push(item);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_reads_back_as_written_whatever_its_keys_hold() {
        let wait = RecordedWait {
            id: 42,
            task: "17".into(),
            since_ms: 1_700_000_000_000,
            kind: "fair_lock".into(),
            key: "odd:,key 9:{x}\n".into(),
            owner: Some("c0ffee:3".into()),
            permits: None,
            limit: None,
            holds: vec![
                RecordedHold {
                    kind: "lock".into(),
                    key: "a,b:c".into(),
                    owner: Some("c0ffee:1".into()),
                    permits: 0,
                },
                RecordedHold {
                    kind: "semaphore".into(),
                    key: "s".into(),
                    owner: None,
                    permits: 3,
                },
            ],
        };
        assert_eq!(wait.field(), "wait:42");
        let back = RecordedWait::decode(&wait.field(), &wait.encode());
        assert_eq!(back, Some(wait.clone()));
        let semaphore = RecordedWait {
            owner: None,
            permits: Some(2),
            limit: Some(5),
            holds: vec![],
            ..wait
        };
        assert_eq!(
            RecordedWait::decode(&semaphore.field(), &semaphore.encode()),
            Some(semaphore)
        );
    }

    #[test]
    fn other_fields_and_bad_values_are_no_waits() {
        assert_eq!(RecordedWait::decode("app", "1:1,"), None);
        assert_eq!(RecordedWait::decode("wait:1", "garbage"), None);
        assert_eq!(RecordedWait::decode("wait:1", "1:2,"), None);
        assert_eq!(RecordedWait::decode("wait:x", ""), None);
        assert_eq!(RecordedWait::decode("wait:1", "99:1,"), None);
    }
}
