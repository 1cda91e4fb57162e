//! A kind that its own crate teaches inspection (`KindInspection`, registered with
//! `inventory::submit!`): `Client::inspect`, `inspect_as`, `list_objects`, `ObjectInfo::wake_channels` and
//! `ObjectKind`'s names learn it with no edit in the core. The kind here is a test fixture: a
//! group of values locked in one hash (value → owner, and `<value>:<owner>:expire_time` → the
//! epoch ms its lease ends), the shape Redisson's faster multi-lock keeps.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common::{TestRedis, client, unique_name};
use ferrisson::{
    Error, HoldMode, Holder, KindFacts, KindInspection, ObjectInfo, ObjectKind, Party,
};
use ferrisson_core::__engine::{ClientEngine, INSPECT_PRELUDE, Script, inventory};
use futures::{FutureExt, StreamExt};
use redis::Commands;
use std::time::Duration;

static READ_GROUP: Script = Script::with_prelude(
    "test/read_group",
    &INSPECT_PRELUDE,
    r#"
local out, kind = inspect_head(KEYS[1])
if kind == 'none' then
  return out
end
if kind ~= 'hash' then
  return false
end
local all = redis.call('hgetall', KEYS[1])
local fields = {}
for i = 1, #all, 2 do
  fields[all[i]] = all[i + 1]
end
for field, value in pairs(fields) do
  local of, owner = string.match(field, '^([^:]+):(.+):expire_time$')
  if of then
    if fields[of] ~= owner then
      return false
    end
  else
    local expiry = fields[field .. ':' .. value .. ':expire_time']
    if not expiry then
      return false
    end
    inspect_fact(out, 'value', field, value, expiry)
  end
end
return out
"#,
);

fn read_group(facts: &KindFacts, info: &mut ObjectInfo) {
    let mut values: Vec<&[String]> = facts.all("value").collect();
    values.sort();
    for row in values {
        let [value, owner, expiry] = row else {
            continue;
        };
        info.holders.push(Holder::new(
            owner.clone(),
            HoldMode::Exclusive,
            1,
            facts.until(expiry),
        ));
        info.details
            .push(("value".into(), format!("{value} by {owner}")));
    }
}

fn delete_group<'a>(
    client: &'a ferrisson::Client,
    name: &'a str,
) -> futures::future::BoxFuture<'a, ferrisson::Result<bool>> {
    async move {
        let key = format!("{}{name}", client.config().namespace());
        let removed: i64 = client.query(redis::cmd("DEL").arg(key)).await?;
        Ok(removed == 1)
    }
    .boxed()
}

fn group_channel(key: &str) -> String {
    format!("test_group__channel:{{{key}}}")
}

const GROUP: KindInspection = KindInspection {
    name: "test-group",
    article: "a",
    lock: true,
    main_type: "hash",
    derived: &["group_extra"],
    derived_inside: &[],
    channel: Some(group_channel),
    script: &READ_GROUP,
    read: read_group,
    force_unlock: None,
    delete: delete_group,
};

inventory::submit! { GROUP }

#[tokio::test]
async fn a_registered_kind_is_inspected_listed_and_named_with_no_edit_in_the_core() {
    let redis = TestRedis::any();
    let url = redis.url();
    let client = client(&url).await;
    client.refresh_record().await.unwrap();
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let prefix = unique_name("registered");
    let name = format!("{prefix}:order-7");
    let owner = client.new_owner();
    let expiry = {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut con).unwrap();
        secs * 1000 + micros / 1000 + 30_000
    };
    let _: () = redis::cmd("HSET")
        .arg(&name)
        .arg("item-1")
        .arg(owner.as_str())
        .arg(format!("item-1:{}:expire_time", owner.as_str()))
        .arg(expiry)
        .arg("item-2")
        .arg(owner.as_str())
        .arg(format!("item-2:{}:expire_time", owner.as_str()))
        .arg(expiry)
        .query(&mut con)
        .unwrap();
    // A key the kind derives from the name: not an object of its own.
    let _: () = con
        .set(format!("{{{name}}}:group_extra"), "derived")
        .unwrap();

    // Found from the layout, with the holders' client named by its record.
    let info = client.inspect(&name).await.unwrap();
    let kind = info.kind.expect("a kind");
    assert_eq!(kind.as_str(), "test-group");
    assert!(kind.is_lock() && info.kind_certain);
    assert_eq!(kind, ObjectKind::Registered(&GROUP));
    assert_eq!(info.holders.len(), 2);
    for holder in &info.holders {
        assert_eq!(holder.owner, owner.as_str());
        let lease = holder.lease_left.expect("a lease");
        assert!(lease > Duration::from_secs(20) && lease <= Duration::from_secs(30));
        match &holder.party {
            Party::Ferrisson(record) => assert_eq!(record.id, client.id()),
            other => panic!("the holder's client was not named: {other:?}"),
        }
    }
    assert_eq!(
        info.details,
        vec![
            ("value".to_owned(), format!("item-1 by {}", owner.as_str())),
            ("value".to_owned(), format!("item-2 by {}", owner.as_str())),
        ]
    );
    assert!(
        info.summary().contains("held exclusive by"),
        "{}",
        info.summary()
    );
    assert_eq!(
        info.wake_channels(),
        vec![format!("test_group__channel:{{{name}}}")]
    );

    // Its name parses, and names it for inspect_as.
    let parsed: ObjectKind = "test-group".parse().unwrap();
    assert_eq!(parsed, kind);
    assert!(ObjectKind::known().contains(&kind));
    let again = client.inspect_as(&name, parsed).await.unwrap();
    let owners = |i: &ObjectInfo| {
        i.holders
            .iter()
            .map(|h| h.owner.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(owners(&again), owners(&info));
    assert_eq!(again.details, info.details);
    // Another kind's layout is not this kind.
    let lock_name = format!("{prefix}:a-lock");
    let _: () = con.hset(&lock_name, owner.as_str(), 1).unwrap();
    match client.inspect_as(&lock_name, parsed).await {
        Err(Error::InvalidArgument(message)) => assert!(message.contains("test-group")),
        other => panic!("a lock's hash read as the group: {other:?}"),
    }
    // A hash of neither layout is no synchronizer's.
    let foreign = format!("{prefix}:foreign");
    let _: () = con.hset(&foreign, "name", "x").unwrap();
    assert!(matches!(
        client.inspect(&foreign).await,
        Err(Error::WrongType { .. })
    ));
    // Nothing stored: no kind.
    let gone = client
        .inspect_as(&format!("{prefix}:gone"), parsed)
        .await
        .unwrap();
    assert_eq!(gone.kind, None);

    // A listing finds the group and the lock, not the derived key nor the foreign hash.
    let listed: Vec<ObjectInfo> = client
        .list_objects(&format!("{prefix}*"))
        .map(Result::unwrap)
        .collect()
        .await;
    let mut names: Vec<(String, &str)> = listed
        .iter()
        .map(|i| (i.name.clone(), i.kind.map_or("none", |k| k.as_str())))
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![(lock_name.clone(), "lock"), (name.clone(), "test-group")]
    );

    // Deleted through the kind's own call.
    assert!((GROUP.delete)(&client, &name).await.unwrap());
    assert_eq!(client.inspect(&name).await.unwrap().kind, None);
}
