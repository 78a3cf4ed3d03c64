//! Secrets inside configured URLs. A Redis URL (`redis://:password@host`)
//! or an OTLP endpoint may carry a password in its user-info; anything that
//! shows a URL to someone other than the config file's reader (logs,
//! `/admin/config`, config error messages) shows [`redact_url`]'s copy.

/// What is shown in place of a secret.
pub const REDACTED: &str = "[redacted]";

/// `url` with the password of its user-info replaced by [`REDACTED`]
/// (`redis://user:secret@host` -> `redis://user:[redacted]@host`; a
/// user-info without `:` may be a bare password and is redacted whole).
///
/// The user-info is everything before the last `@` after the scheme, even
/// when a `/`, `?` or `#` comes before it (a password written without
/// percent-encoding): such a URL may lose some of its shape, but never
/// shows the secret. A text without `://` is returned unchanged unless it
/// holds an `@`, in which case everything before the last `@` is redacted.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else { return url.to_string() };
    let redacted = match (scheme, userinfo.split_once(':')) {
        (Some(_), Some((user, _))) if !user.contains(['/', '?', '#']) => format!("{user}:{REDACTED}"),
        _ => REDACTED.to_string(),
    };
    match scheme {
        Some(scheme) => format!("{scheme}://{redacted}@{host}"),
        None => format!("{redacted}@{host}"),
    }
}

/// [`redact_url`] of each URL, for logging a list.
pub fn redact_urls(urls: &[String]) -> Vec<String> {
    urls.iter().map(|u| redact_url(u)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_user_info_are_redacted() {
        assert_eq!(redact_url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact_url("redis://u:p4ss@h:1/0"), "redis://u:[redacted]@h:1/0");
        assert_eq!(redact_url("rediss://:p4ss@h"), "rediss://:[redacted]@h");
        assert_eq!(redact_url("redis://p4ss@h"), "redis://[redacted]@h");
        assert_eq!(
            redact_url("http://u:p4ss@collector:4318/v1/traces"),
            "http://u:[redacted]@collector:4318/v1/traces"
        );
    }

    #[test]
    fn odd_passwords_never_show() {
        for (url, secret) in [
            ("redis://:pa/ss@h:1", "pa/ss"),
            ("redis://:p@ss@h", "p@ss"),
            ("redis://u:p?x#y@h/0", "p?x#y"),
            ("u:s3cret@h:1", "s3cret"),
        ] {
            let shown = redact_url(url);
            assert!(!shown.contains(secret), "{url} -> {shown}");
            assert!(shown.contains(REDACTED), "{url} -> {shown}");
        }
        assert_eq!(redact_urls(&["redis://:x@h".into()]), vec!["redis://:[redacted]@h".to_string()]);
    }
}
