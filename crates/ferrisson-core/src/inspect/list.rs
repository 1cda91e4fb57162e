//! Listing every object ([`Client::list_objects`]).

use super::*;

impl Client {
    /// Every synchronizer object whose key matches `pattern` (glob-style, as `SCAN MATCH`
    /// takes it; the client's namespace is put before it), found with `SCAN … TYPE` on the
    /// server (on every primary of a cluster), a page at a time: memory stays bounded
    /// however many keys there are. Keys a synchronizer derives from its name (queues, leases
    /// of read holds, tokens, records, …) and keys of other data are left out; a plain
    /// integer string shows as a semaphore whose kind is not certain.
    ///
    /// Read-only, like [`inspect`](Self::inspect), which reads each object found.
    pub fn list_objects(&self, pattern: &str) -> impl Stream<Item = Result<ObjectInfo>> + '_ {
        let pattern = format!("{}{pattern}", self.config().namespace());
        let scan = futures::stream::once(self.inner.conn.scan_nodes())
            .map(move |nodes| match nodes {
                Ok(nodes) => scan_keys(self, nodes, pattern.clone()).boxed(),
                Err(e) => futures::stream::once(async move { Err(Error::Redis(e)) }).boxed(),
            })
            .flatten();
        scan.map(move |key| async move {
            match key {
                Ok(key) => match self.inspect_key(key, None).await {
                    Ok(info) if info.kind.is_some() && listed(&info) => Some(Ok(info)),
                    Ok(_) | Err(Error::WrongType { .. }) => None,
                    Err(e) => Some(Err(e)),
                },
                Err(e) => Some(Err(e)),
            }
        })
        .buffered(16)
        .filter_map(futures::future::ready)
    }
}

/// Whether a listing shows an object: not one a registered kind merely could be (a string of
/// any content could be a mutex's token). A count whose kind is not certain is listed as a
/// semaphore.
pub(super) fn listed(info: &ObjectInfo) -> bool {
    info.kind_certain || !matches!(info.kind, Some(ObjectKind::Registered(_)))
}

/// The suffixes of the keys synchronizers derive with `suffixed(name, …)` (the registered
/// kinds name theirs too: [`KindInspection::derived`]).
pub(super) const DERIVED: [&str; 8] = [
    "value",
    "permits",
    "intent",
    "record",
    "count_latch",
    "timeout",
    "epoch",
    "undone",
];

/// Whether `key` is one a synchronizer derives from another's name rather than a main key.
pub(crate) fn is_derived(key: &str) -> bool {
    if key.starts_with("redisson_") || key.starts_with("ferrisson_") {
        return true;
    }
    if key.starts_with(RECORD_PREFIX) {
        return true;
    }
    if kinds::registered().iter().any(|kind| {
        kind.derived_inside
            .iter()
            .any(|marker| key.contains(&format!(":{marker}:")))
    }) {
        return true;
    }
    match key.rfind("}:") {
        Some(at) => {
            let rest = &key[at + 2..];
            let first = rest.split(':').next().unwrap_or_default();
            DERIVED.contains(&first)
                || kinds::registered()
                    .iter()
                    .any(|kind| kind.derived.contains(&first))
        }
        None => false,
    }
}

/// The keys matching `pattern` of the types synchronizers use (registered kinds' too), node by
/// node, page by page.
pub(super) fn scan_keys<'a>(
    client: &'a Client,
    nodes: Vec<crate::connection::Node>,
    pattern: String,
) -> impl Stream<Item = Result<String>> + 'a {
    // The types of the layouts read here, and those of the registered kinds.
    let mut types = vec!["hash", "string"];
    for kind in kinds::registered() {
        if !types.contains(&kind.main_type) {
            types.push(kind.main_type);
        }
    }
    let passes: Vec<(crate::connection::Node, &'static str)> = nodes
        .into_iter()
        .flat_map(|n| types.iter().map(move |t| (n.clone(), *t)))
        .collect();
    futures::stream::iter(passes)
        .map(move |(node, kind)| scan_pages(client, node, pattern.clone(), kind))
        .flatten()
        .map(|page| match page {
            Ok(keys) => keys
                .into_iter()
                .filter(|k| !is_derived(k))
                .map(Ok)
                .collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        })
        .flat_map(futures::stream::iter)
}

/// The keys of type `kind` matching `pattern` on `node`, `SCAN`ned a page (500) at a time.
pub(super) fn scan_pages<'a>(
    client: &'a Client,
    node: crate::connection::Node,
    pattern: String,
    kind: &'static str,
) -> impl Stream<Item = Result<Vec<String>>> + 'a {
    futures::stream::unfold(Some(0u64), move |cursor| {
        let (node, pattern) = (node.clone(), pattern.clone());
        async move {
            let cursor = cursor?;
            let cmd = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(500)
                .arg("TYPE")
                .arg(kind)
                .clone();
            Some(match client.inner.conn.query_node(&cmd, &node).await {
                Ok(reply) => match redis::from_redis_value::<(u64, Vec<String>)>(reply) {
                    Ok((next, keys)) => (Ok(keys), (next != 0).then_some(next)),
                    Err(e) => (Err(Error::Protocol(e.to_string())), None),
                },
                Err(e) => (Err(Error::Redis(e)), None),
            })
        }
    })
}
