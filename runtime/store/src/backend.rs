//! The object-store client behind a [`crate::ModelStore`]: `object_store`'s
//! S3 client (it signs requests; nothing here touches signatures) or its
//! local file system, both rooted at the repository prefix, and the
//! translation of the client's errors into [`StoreError`]s.

use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::client::{HttpError, HttpErrorKind};
use object_store::local::LocalFileSystem;
use object_store::prefix::PrefixStore;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use crate::aws_env::{resolve, AwsEnv};
use crate::error::StoreError;
use crate::settings::StoreSettings;
use crate::uri::StoreUri;

/// An opened store client.
#[derive(Debug, Clone)]
pub(crate) struct Backend {
    /// Keys are relative to the repository root (`digits/1/model.onnx`).
    pub store: Arc<dyn ObjectStore>,
    /// The repository, for messages (`s3://bucket/prefix`).
    pub name: String,
    /// Where the credentials came from, for messages (never the values).
    pub credential_source: String,
    /// The same S3 bucket, listed page by page (see `crate::object_list`);
    /// `None` for local files.
    pub paged: Option<PagedS3>,
}

/// An S3 client for page-by-page listings, with the repository's key
/// prefix (listing pages are not under `store`'s prefix).
#[derive(Debug, Clone)]
pub(crate) struct PagedS3 {
    /// The bucket's client.
    pub client: object_store::aws::AmazonS3,
    /// The repository's key prefix, without leading or trailing `/`.
    pub root: String,
}

/// Builds the client for `settings` (no network: the first request tells
/// whether the store and the credentials work).
pub(crate) fn open(settings: &StoreSettings, env: &AwsEnv) -> Result<Backend, StoreError> {
    let name = settings.uri.to_string();
    match &settings.uri {
        StoreUri::File { root } => {
            let local = LocalFileSystem::new_with_prefix(root).map_err(|e| StoreError::InvalidConfig {
                field: "repository.uri".into(),
                reason: format!("{}: {e}", root.display()),
            })?;
            Ok(Backend { store: Arc::new(local), name, credential_source: "local files".into(), paged: None })
        }
        StoreUri::S3 { bucket, prefix } => {
            let (s3, credential_source) = s3_client(settings, env, bucket)?;
            let paged = Some(PagedS3 { client: s3.clone(), root: prefix.clone() });
            let store: Arc<dyn ObjectStore> = if prefix.is_empty() {
                Arc::new(s3)
            } else {
                Arc::new(PrefixStore::new(s3, prefix.as_str()))
            };
            Ok(Backend { store, name, credential_source, paged })
        }
    }
}

fn s3_client(
    settings: &StoreSettings,
    env: &AwsEnv,
    bucket: &str,
) -> Result<(object_store::aws::AmazonS3, String), StoreError> {
    let s3 = &settings.s3;
    let found = resolve(env, s3.profile.as_deref());
    let endpoint = s3.endpoint.clone().or(found.endpoint);
    let path_style = s3.path_style.or(found.path_style).unwrap_or(endpoint.is_some());
    let t = &settings.transfer;
    let client = ClientOptions::new()
        .with_connect_timeout(t.connect_timeout)
        .with_timeout(t.request_timeout)
        .with_allow_http(endpoint.as_deref().is_some_and(|e| e.starts_with("http://")));
    let retry = RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: t.max_retries,
        retry_timeout: t.retry_timeout,
    };
    let mut builder = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region(s3.region.clone().or(found.region).unwrap_or_else(|| "us-east-1".into()))
        .with_virtual_hosted_style_request(!path_style)
        .with_client_options(client)
        .with_retry(retry);
    if let Some(endpoint) = endpoint {
        check_endpoint(&endpoint)?;
        let endpoint = if path_style { endpoint } else { virtual_host(&endpoint, bucket) };
        builder = builder.with_endpoint(endpoint);
    }
    let source = if s3.anonymous {
        builder = builder.with_skip_signature(true);
        "none (anonymous requests)".to_string()
    } else if let Some(creds) = found.credentials {
        builder =
            builder.with_access_key_id(creds.key_id.expose()).with_secret_access_key(creds.secret.expose());
        if let Some(token) = &creds.token {
            builder = builder.with_token(token.expose());
        }
        creds.source
    } else {
        for (key, value) in env.provider_vars() {
            if let Ok(key) = key.to_ascii_lowercase().parse() {
                builder = builder.with_config(key, value);
            }
        }
        "the instance, container or web-identity provider".to_string()
    };
    let client = builder
        .build()
        .map_err(|e| StoreError::InvalidConfig { field: "repository.s3".into(), reason: e.to_string() })?;
    Ok((client, source))
}

fn check_endpoint(endpoint: &str) -> Result<(), StoreError> {
    let rest = endpoint.strip_prefix("http://").or_else(|| endpoint.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        _ => Err(StoreError::InvalidConfig {
            field: "repository.s3.endpoint".into(),
            reason: format!("{endpoint:?} must be an http:// or https:// URL with a host"),
        }),
    }
}

/// `http://host:9000` -> `http://bucket.host:9000` (virtual-hosted style
/// against a custom endpoint).
fn virtual_host(endpoint: &str, bucket: &str) -> String {
    match endpoint.split_once("://") {
        Some((scheme, host)) => format!("{scheme}://{bucket}.{host}"),
        None => endpoint.to_string(),
    }
}

/// Translates a client error about `what` (a key or a prefix). Some
/// requests (listings) report HTTP failures as generic errors; their
/// status is then read from the error's text.
pub(crate) fn map_error(backend: &Backend, what: &str, error: object_store::Error) -> StoreError {
    use object_store::Error as E;
    let store = backend.name.clone();
    let status = match &error {
        E::NotFound { .. } => Some(404),
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => Some(403),
        E::Precondition { .. } => Some(412),
        other => status_in_chain(other),
    };
    let reason = short_reason(&error);
    match status {
        Some(404) => StoreError::NotFound { store, what: what.to_string() },
        Some(401 | 403) => {
            StoreError::Credentials { store, source_of: backend.credential_source.clone(), reason }
        }
        Some(412) => StoreError::Changed { key: what.to_string() },
        Some(s) if s >= 500 => StoreError::Unreachable { store, reason },
        None if transport_failure(&error) => StoreError::Unreachable { store, reason },
        _ => StoreError::Backend { store, reason },
    }
}

/// The HTTP status named in the error chain (`status code: 403`), if any.
fn status_in_chain(error: &(dyn std::error::Error + 'static)) -> Option<u16> {
    const NEEDLE: &str = "status code: ";
    let mut next = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        if let Some(at) = text.find(NEEDLE) {
            let digits: String = text[at + NEEDLE.len()..].chars().take_while(char::is_ascii_digit).collect();
            if let Ok(status) = digits.parse() {
                return Some(status);
            }
        }
        next = e.source();
    }
    None
}

/// True when the error chain holds a connection-level failure (refused,
/// reset, timed out) rather than an answer from the store.
fn transport_failure(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(http) = e.downcast_ref::<HttpError>() {
            return !matches!(http.kind(), HttpErrorKind::Decode);
        }
        next = e.source();
    }
    false
}

/// The innermost useful message: S3's error code (`SignatureDoesNotMatch`)
/// when the body has one, else the error's own text, kept short.
fn short_reason(error: &(dyn std::error::Error + 'static)) -> String {
    let text = error.to_string();
    if let Some(code) = xml_tag(&text, "Code") {
        let message = xml_tag(&text, "Message").unwrap_or_default();
        return if message.is_empty() { code } else { format!("{code}: {message}") };
    }
    let mut deepest = text;
    let mut next = error.source();
    while let Some(e) = next {
        deepest = e.to_string();
        next = e.source();
    }
    deepest.chars().take(300).collect()
}

fn xml_tag(text: &str, tag: &str) -> Option<String> {
    let start = text.find(&format!("<{tag}>"))? + tag.len() + 2;
    let end = text[start..].find(&format!("</{tag}>"))? + start;
    Some(text[start..end].to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn endpoints_are_checked_and_virtual_hosts_built() {
        assert!(check_endpoint("http://127.0.0.1:9000").is_ok());
        assert!(check_endpoint("https://s3.example.com").is_ok());
        assert!(check_endpoint("127.0.0.1:9000").is_err());
        assert!(check_endpoint("http://").is_err());
        assert_eq!(virtual_host("http://minio:9000", "models"), "http://models.minio:9000");
    }

    #[test]
    fn s3_error_codes_are_extracted() {
        let body = "Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\"?><Error>\
            <Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message></Error>";
        let err = std::io::Error::other(body);
        assert_eq!(
            short_reason(&err),
            "SignatureDoesNotMatch: The request signature we calculated does not match"
        );
    }

    #[test]
    fn statuses_are_found_in_generic_errors() {
        let err = std::io::Error::other(
            "Error performing GET in 3ms - Server returned non-2xx status code: 403 Forbidden: <Error>",
        );
        assert_eq!(status_in_chain(&err), Some(403));
        assert_eq!(status_in_chain(&std::io::Error::other("connection refused")), None);
    }

    #[test]
    fn opening_a_store_needs_no_network() {
        let mut settings = StoreSettings::new(StoreUri::parse("s3://bkt/pre", "u").unwrap(), "/tmp/unused");
        settings.s3.endpoint = Some("http://127.0.0.1:1".into());
        let env = AwsEnv::from_vars([("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "b")], None);
        let backend = open(&settings, &env).unwrap();
        assert_eq!(backend.name, "s3://bkt/pre");
        assert_eq!(backend.credential_source, "environment (AWS_ACCESS_KEY_ID)");
        settings.s3.endpoint = Some("minio:9000".into());
        assert!(matches!(open(&settings, &env), Err(StoreError::InvalidConfig { .. })));
    }
}
