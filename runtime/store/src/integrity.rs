//! Integrity of downloaded files. Each file is checked against the
//! strongest evidence the store offers, in this order:
//!
//! 1. a checksum object `<file>.sha256` beside it (the output of
//!    `sha256sum`, or the bare hex digest): its SHA-256;
//! 2. a plain ETag (32 hex digits, as S3, MinIO and Ceph give single-part
//!    uploads): the MD5 of the content (unless
//!    [`IntegritySettings::verify_etag`] is off);
//! 3. otherwise (multipart ETag `<md5>-<parts>`, no ETag): the size only,
//!    with a warning, or a refusal under
//!    [`IntegritySettings::require_checksum`].
//!
//! The digest is computed while the file is written (one pass), and a file
//! that fails is deleted before anything can load it.

use md5::{Digest as _, Md5};
use sha2::Sha256;

use crate::error::StoreError;
use crate::listing::ObjectInfo;
use crate::settings::IntegritySettings;

/// Suffix of checksum objects.
pub const CHECKSUM_SUFFIX: &str = ".sha256";

/// What a file will be checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expected {
    /// SHA-256 from a checksum object (lower-case hex).
    Sha256(String),
    /// MD5 from the ETag (lower-case hex).
    Md5(String),
    /// Only the size can be checked.
    SizeOnly,
}

impl Expected {
    /// The check for `file`, given the text of its checksum object when
    /// there is one. Fails when the checksum object is malformed, or when
    /// nothing but the size is available and a checksum is required.
    pub(crate) fn for_file(
        file: &ObjectInfo,
        checksum_text: Option<&str>,
        settings: &IntegritySettings,
    ) -> Result<Expected, StoreError> {
        if let Some(text) = checksum_text {
            let digest = text.split_whitespace().next().unwrap_or_default().to_ascii_lowercase();
            if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(StoreError::Integrity {
                    key: format!("{}{CHECKSUM_SUFFIX}", file.key),
                    check: "sha256 object",
                    expected: "64 hex digits".into(),
                    actual: text.chars().take(80).collect(),
                });
            }
            return Ok(Expected::Sha256(digest));
        }
        let md5 = file.etag.as_deref().map(|e| e.trim_matches('"').to_ascii_lowercase());
        match md5 {
            Some(md5)
                if settings.verify_etag && md5.len() == 32 && md5.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                Ok(Expected::Md5(md5))
            }
            _ if settings.require_checksum => Err(StoreError::Integrity {
                key: file.key.clone(),
                check: "checksum required",
                expected: format!("a {CHECKSUM_SUFFIX} object or a single-part ETag"),
                actual: format!("ETag {:?}", file.etag.as_deref().unwrap_or("none")),
            }),
            _ => Ok(Expected::SizeOnly),
        }
    }

    /// A hasher for this check.
    pub(crate) fn hasher(&self) -> Hasher {
        match self {
            Expected::Sha256(_) => Hasher::Sha256(Box::default()),
            Expected::Md5(_) => Hasher::Md5(Box::default()),
            Expected::SizeOnly => Hasher::None,
        }
    }

    /// Compares what was downloaded with what was expected.
    pub(crate) fn verify(&self, file: &ObjectInfo, hasher: Hasher, written: u64) -> Result<(), StoreError> {
        let fail = |check, expected: String, actual: String| {
            Err(StoreError::Integrity { key: file.key.clone(), check, expected, actual })
        };
        if written != file.size {
            return fail("size", file.size.to_string(), written.to_string());
        }
        let actual = hasher.finish();
        match self {
            Expected::Sha256(want) if actual.as_deref() != Some(want.as_str()) => {
                fail("sha256 object", want.clone(), actual.unwrap_or_default())
            }
            Expected::Md5(want) if actual.as_deref() != Some(want.as_str()) => {
                fail("etag md5", want.clone(), actual.unwrap_or_default())
            }
            _ => Ok(()),
        }
    }
}

/// An incremental digest of the bytes written.
#[derive(Debug)]
pub(crate) enum Hasher {
    /// For a checksum object.
    Sha256(Box<Sha256>),
    /// For an ETag.
    Md5(Box<Md5>),
    /// Size only.
    None,
}

impl Hasher {
    /// Feeds bytes, in file order.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Md5(h) => h.update(bytes),
            Hasher::None => {}
        }
    }

    /// Whether [`Hasher::update`] does anything (a size-only check needs
    /// no bytes, so a writer can skip reading any back for it).
    pub(crate) fn wants_bytes(&self) -> bool {
        !matches!(self, Hasher::None)
    }

    /// The lower-case hex digest, `None` for size-only.
    fn finish(self) -> Option<String> {
        match self {
            Hasher::Sha256(h) => Some(hex::encode(h.finalize())),
            Hasher::Md5(h) => Some(hex::encode(h.finalize())),
            Hasher::None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn file(etag: Option<&str>, size: u64) -> ObjectInfo {
        ObjectInfo { key: "m/1/model.onnx".into(), size, etag: etag.map(Into::into) }
    }

    fn run(expected: &Expected, data: &[u8], f: &ObjectInfo) -> Result<(), StoreError> {
        let mut h = expected.hasher();
        h.update(&data[..2]);
        h.update(&data[2..]);
        expected.verify(f, h, data.len() as u64)
    }

    #[test]
    fn etag_md5_is_checked() {
        let s = IntegritySettings::default();
        // md5("hello") = 5d41402abc4b2a76b9719d911017c592
        let f = file(Some("\"5d41402abc4b2a76b9719d911017c592\""), 5);
        let e = Expected::for_file(&f, None, &s).unwrap();
        assert_eq!(e, Expected::Md5("5d41402abc4b2a76b9719d911017c592".into()));
        assert!(run(&e, b"hello", &f).is_ok());
        let err = run(&e, b"hellO", &f).unwrap_err();
        assert!(matches!(err, StoreError::Integrity { check: "etag md5", .. }), "{err}");
        assert!(matches!(run(&e, b"hello!", &f), Err(StoreError::Integrity { check: "size", .. })));
    }

    #[test]
    fn checksum_object_wins_and_multipart_etags_fall_back() {
        let s = IntegritySettings::default();
        let sha = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"; // sha256("hello")
        let f = file(Some("abc-3"), 5);
        let e = Expected::for_file(&f, Some(&format!("{sha}  model.onnx\n")), &s).unwrap();
        assert_eq!(e, Expected::Sha256(sha.into()));
        assert!(run(&e, b"hello", &f).is_ok());
        assert!(run(&e, b"jello", &f).is_err());
        assert_eq!(Expected::for_file(&f, None, &s).unwrap(), Expected::SizeOnly);
        let strict = IntegritySettings { require_checksum: true, ..s.clone() };
        assert!(Expected::for_file(&f, None, &strict).is_err());
        assert!(Expected::for_file(&f, Some("not-a-digest"), &s).is_err());
        let no_etag = IntegritySettings { verify_etag: false, ..s };
        let plain = file(Some("5d41402abc4b2a76b9719d911017c592"), 5);
        assert_eq!(Expected::for_file(&plain, None, &no_etag).unwrap(), Expected::SizeOnly);
    }
}
