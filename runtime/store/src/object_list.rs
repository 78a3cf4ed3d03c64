//! Listing the objects under a prefix, where one odd key must not hide the
//! others. S3 accepts keys that `object_store` cannot turn into a `Path`
//! (an empty, `.` or `..` segment, a control character:
//! `junk/1/../notes.txt`); its `list` fails the whole page (up to 1000
//! keys) on the first such key, and with it the whole listing. So an
//! object store is listed page by page here ([`PaginatedListStore`]): when
//! a page fails on an unparsable key, the same page is asked again with
//! half as many keys until the keys before the odd one come back; the odd
//! key itself is skipped with a warning (listing resumes after it) and
//! never reaches the repository tree. The keys that do parse are still
//! checked by [`crate::listing::safe_key`].

use futures::StreamExt;
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path as ObjectPath;
use object_store::ObjectMeta;

use crate::backend::{map_error, Backend};
use crate::error::StoreError;
use crate::listing::ObjectInfo;
use crate::stats::StoreCounters;

/// Keys asked for per page (S3's largest page).
const PAGE: usize = 1000;

/// Lists every object under `prefix` (the whole repository when empty);
/// keys are relative to the repository root.
pub(crate) async fn list_objects(
    backend: &Backend,
    prefix: &str,
    counters: &StoreCounters,
) -> Result<Vec<ObjectInfo>, StoreError> {
    let what = if prefix.is_empty() { "the repository" } else { prefix };
    let metas = match &backend.paged {
        Some(paged) => {
            let full =
                [paged.root.as_str(), prefix].iter().filter(|p| !p.is_empty()).copied().collect::<Vec<_>>();
            let full = (!full.is_empty()).then(|| format!("{}/", full.join("/")));
            let metas = list_pages(&paged.client, full.as_deref(), PAGE, counters)
                .await
                .map_err(|e| map_error(backend, what, e))?;
            metas.into_iter().filter_map(|m| strip_root(m, &paged.root)).collect()
        }
        None => list_stream(backend, prefix, counters).await.map_err(|e| map_error(backend, what, e))?,
    };
    Ok(metas
        .into_iter()
        .map(|m| ObjectInfo {
            key: m.location.to_string(),
            size: m.size,
            etag: m.e_tag.map(|e| e.trim_matches('"').to_string()),
        })
        .collect())
}

/// Every object under `prefix`, `page` keys per request, skipping
/// unparsable keys (module docs).
pub(crate) async fn list_pages(
    store: &dyn PaginatedListStore,
    prefix: Option<&str>,
    page: usize,
    counters: &StoreCounters,
) -> Result<Vec<ObjectMeta>, object_store::Error> {
    let mut objects = Vec::new();
    let (mut token, mut start_after, mut max_keys) = (None::<String>, None::<String>, page.max(1));
    loop {
        counters.count_list();
        let options = PaginatedListOptions {
            page_token: token.clone(),
            offset: if token.is_none() { start_after.clone() } else { None },
            max_keys: Some(max_keys),
            ..PaginatedListOptions::default()
        };
        match store.list_paginated(prefix, options).await {
            Ok(listed) => {
                objects.extend(listed.result.objects);
                match listed.page_token {
                    Some(next) => token = Some(next),
                    None => return Ok(objects),
                }
                max_keys = page.max(1);
            }
            Err(e) => {
                let Some(key) = unparsable_key(&e).map(str::to_string) else { return Err(e) };
                if max_keys > 1 {
                    // The odd key is among this page's first `max_keys`.
                    max_keys /= 2;
                    continue;
                }
                if start_after.as_deref() == Some(key.as_str()) && token.is_none() {
                    return Err(e); // the store keeps answering the key it was told to start after
                }
                tracing::warn!(key = %key.escape_debug(), "model store: object key skipped (an empty, '.' or '..' part, or a control character)");
                (token, start_after, max_keys) = (None, Some(key), page.max(1));
            }
        }
    }
}

/// The raw key `object_store` could not parse, when that is the error.
fn unparsable_key(error: &object_store::Error) -> Option<&str> {
    use object_store::path::Error as PathError;
    match error {
        object_store::Error::InvalidPath {
            source: PathError::EmptySegment { path } | PathError::BadSegment { path, .. },
        } => Some(path),
        _ => None,
    }
}

/// `meta` with its location made relative to the repository root `root`
/// (the S3 key prefix); `None` for a key outside it.
fn strip_root(mut meta: ObjectMeta, root: &str) -> Option<ObjectMeta> {
    if root.is_empty() {
        return Some(meta);
    }
    let relative = meta.location.as_ref().strip_prefix(root)?.strip_prefix('/')?.to_string();
    meta.location = ObjectPath::parse(relative).ok()?;
    Some(meta)
}

/// Every object under `prefix` from a store without pages (local files),
/// skipping entries whose name cannot be a key.
async fn list_stream(
    backend: &Backend,
    prefix: &str,
    counters: &StoreCounters,
) -> Result<Vec<ObjectMeta>, object_store::Error> {
    counters.count_list();
    let path = (!prefix.is_empty()).then(|| ObjectPath::from(prefix));
    let mut stream = backend.store.list(path.as_ref());
    let mut objects = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(meta) => objects.push(meta),
            Err(e) => match unparsable_key(&e) {
                Some(key) => {
                    tracing::warn!(key = %key.escape_debug(), "model store: entry skipped (not a valid key)")
                }
                None => return Err(e),
            },
        }
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use object_store::list::PaginatedListResult;
    use object_store::ListResult;

    /// Sorted keys served the way the S3 client serves them: a page of up
    /// to `max_keys` keys after the token or `start-after`, parsed with
    /// `Path::parse`, the whole page failing on its first unparsable key.
    #[derive(Debug)]
    struct Bucket(Vec<String>);

    #[async_trait::async_trait]
    impl PaginatedListStore for Bucket {
        async fn list_paginated(
            &self,
            prefix: Option<&str>,
            opts: PaginatedListOptions,
        ) -> object_store::Result<PaginatedListResult> {
            let after = opts.page_token.or(opts.offset);
            let keys: Vec<&String> = self
                .0
                .iter()
                .filter(|k| k.starts_with(prefix.unwrap_or("")))
                .filter(|k| after.as_ref().is_none_or(|a| k.as_str() > a.as_str()))
                .collect();
            let take = opts.max_keys.unwrap_or(1000);
            let page = &keys[..take.min(keys.len())];
            let objects = page
                .iter()
                .map(|k| {
                    Ok(ObjectMeta {
                        location: ObjectPath::parse(k.as_str())?,
                        last_modified: Default::default(),
                        size: 1,
                        e_tag: None,
                        version: None,
                    })
                })
                .collect::<object_store::Result<Vec<_>>>()?;
            let page_token = (keys.len() > take).then(|| page[take - 1].clone());
            Ok(PaginatedListResult {
                result: ListResult { objects, common_prefixes: Vec::new(), extensions: Default::default() },
                page_token,
            })
        }
    }

    #[tokio::test]
    async fn odd_keys_are_skipped_on_every_page_and_the_rest_listed() {
        let mut keys: Vec<String> = (0..40).map(|i| format!("repo/m/1/f{i:02}")).collect();
        let odd = [
            "repo/m/1/f00/../x",
            "repo/m/1/f07//y",
            "repo/m/1/f07/./z",
            "repo/m/1/f19\u{7}",
            "repo/m/1/f39/..",
        ];
        keys.extend(odd.iter().map(|k| k.to_string()));
        keys.push("repo/m/1/f00/a\u{1}".into()); // right after another odd key
        keys.push("other/outside".into());
        keys.sort();
        let bucket = Bucket(keys);
        for page in [1, 2, 7, 1000] {
            let counters = StoreCounters::default();
            let listed = list_pages(&bucket, Some("repo/"), page, &counters).await.unwrap();
            let names: Vec<String> = listed.iter().map(|m| m.location.to_string()).collect();
            let expected: Vec<String> = (0..40).map(|i| format!("repo/m/1/f{i:02}")).collect();
            assert_eq!(names, expected, "page size {page}");
        }
    }

    #[tokio::test]
    async fn other_errors_fail_the_listing() {
        #[derive(Debug)]
        struct Down;
        #[async_trait::async_trait]
        impl PaginatedListStore for Down {
            async fn list_paginated(
                &self,
                _prefix: Option<&str>,
                _opts: PaginatedListOptions,
            ) -> object_store::Result<PaginatedListResult> {
                Err(object_store::Error::Generic { store: "S3", source: "connection refused".into() })
            }
        }
        let err = list_pages(&Down, None, 10, &StoreCounters::default()).await.unwrap_err();
        assert!(err.to_string().contains("connection refused"), "{err}");
    }
}
