//! Compressed responses, for clients that ask with `Accept-Encoding`
//! (`tritonclient.http`'s `response_compression_algorithm` sends `gzip` or
//! `deflate`). As Triton does, the whole body is compressed; for a binary
//! tensor response `Inference-Header-Content-Length` still counts the
//! JSON header's bytes in the decompressed body, which is how
//! `tritonclient` reads it.
//!
//! 1. Only a `200` whose body is at least [`MIN_COMPRESSED_BYTES`] is
//!    considered (a smaller one gains little; error bodies stay plain, as
//!    `tritonclient` reads them without decompressing); such a reply gets
//!    `Vary: Accept-Encoding`, compressed or not.
//! 2. [`accepted_coding`] picks gzip or deflate by the client's q-values
//!    (gzip on a tie), or identity when neither is wanted more than it.
//! 3. The body is compressed at the fastest level (a gateway's CPU is for
//!    routing); a large body is compressed on a blocking thread.
//!
//! Event streams are never compressed (each event must reach the client
//! when it is written).

use super::content_coding::Coding;
use crate::reply::Reply;
use flate2::write::{GzEncoder, ZlibEncoder};
use flate2::Compression;
use http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, VARY};
use std::io::Write;

/// Bodies shorter than this are sent as they are.
pub const MIN_COMPRESSED_BYTES: usize = 1024;

/// Bodies at least this long are compressed off the request's thread.
const BLOCKING_BYTES: usize = 64 << 10;

/// The coding a response to a request with these headers takes (module
/// docs, step 2). A coding's weight is its `q` (1 when absent, 0 when
/// malformed); `*` stands for the codings not named.
pub fn accepted_coding(headers: &http::HeaderMap) -> Coding {
    let (mut gzip, mut deflate, mut identity, mut any) = (None, None, None, None);
    for value in headers.get_all(ACCEPT_ENCODING) {
        let Ok(text) = value.to_str() else { continue };
        for item in text.split(',') {
            let mut parts = item.split(';');
            let name = parts.next().unwrap_or_default().trim();
            let q = parts
                .find_map(|p| p.split_once('=').filter(|(k, _)| k.trim().eq_ignore_ascii_case("q")))
                .map_or(1.0, |(_, v)| {
                    v.trim().parse::<f32>().ok().filter(|q| (0.0..=1.0).contains(q)).unwrap_or(0.0)
                });
            let slot = match Coding::from_token(name) {
                Some(Coding::Gzip) => &mut gzip,
                Some(Coding::Deflate) => &mut deflate,
                Some(Coding::Identity) => &mut identity,
                None if name == "*" => &mut any,
                None => continue,
            };
            *slot = Some(slot.map_or(q, |old: f32| old.max(q)));
        }
    }
    let weight = |named: Option<f32>| named.or(any).unwrap_or(0.0);
    let (gzip, deflate, identity) = (weight(gzip), weight(deflate), weight(identity));
    let (best, coding) = if deflate > gzip { (deflate, Coding::Deflate) } else { (gzip, Coding::Gzip) };
    if best > 0.0 && best >= identity {
        coding
    } else {
        Coding::Identity
    }
}

/// `body` compressed in `coding` (identity: copied).
pub fn compress(body: &[u8], coding: Coding) -> std::io::Result<Vec<u8>> {
    let out = Vec::with_capacity(body.len() / 4 + 64);
    match coding {
        Coding::Identity => Ok(body.to_vec()),
        Coding::Gzip => {
            let mut encoder = GzEncoder::new(out, Compression::fast());
            encoder.write_all(body)?;
            encoder.finish()
        }
        Coding::Deflate => {
            let mut encoder = ZlibEncoder::new(out, Compression::fast());
            encoder.write_all(body)?;
            encoder.finish()
        }
    }
}

/// `reply` as the request's `Accept-Encoding` asks (module docs). A body
/// that could not be compressed (never expected in memory) is sent as it
/// is.
pub async fn encode_reply(reply: Reply, request: &http::HeaderMap) -> Reply {
    let eligible = reply.status == 200
        && reply.body.len() >= MIN_COMPRESSED_BYTES
        && !reply.headers.iter().any(|(name, _)| name == CONTENT_ENCODING);
    if !eligible {
        return reply;
    }
    let mut reply = reply.with_static_header(VARY, "Accept-Encoding");
    let coding = accepted_coding(request);
    if coding == Coding::Identity {
        return reply;
    }
    let body = reply.body.clone();
    let compressed = if body.len() >= BLOCKING_BYTES {
        tokio::task::spawn_blocking(move || compress(&body, coding))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))
    } else {
        compress(&body, coding)
    };
    match compressed {
        Ok(compressed) => {
            reply.body = compressed.into();
            reply.with_static_header(CONTENT_ENCODING, coding.as_str())
        }
        Err(e) => {
            tracing::debug!(error = %e, "response sent uncompressed: compressing it failed");
            reply
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::{GzDecoder, ZlibDecoder};
    use std::io::Read;

    fn accepted(value: &str) -> Coding {
        let mut headers = http::HeaderMap::new();
        headers.insert(ACCEPT_ENCODING, value.parse().unwrap());
        accepted_coding(&headers)
    }

    #[test]
    fn q_values_choose_the_coding() {
        assert_eq!(accepted_coding(&http::HeaderMap::new()), Coding::Identity);
        assert_eq!(accepted("gzip"), Coding::Gzip);
        assert_eq!(accepted("deflate"), Coding::Deflate);
        assert_eq!(accepted("gzip, deflate, br"), Coding::Gzip);
        assert_eq!(accepted("gzip;q=0.5, deflate;q=0.8"), Coding::Deflate);
        assert_eq!(accepted("GZIP ; Q=0.2"), Coding::Gzip);
        assert_eq!(accepted("gzip;q=0"), Coding::Identity);
        assert_eq!(accepted("gzip;q=0.5, identity"), Coding::Identity);
        assert_eq!(accepted("br, *"), Coding::Gzip);
        assert_eq!(accepted("*, gzip;q=0"), Coding::Deflate);
        assert_eq!(accepted("gzip;q=nonsense"), Coding::Identity);
        assert_eq!(accepted("br, zstd"), Coding::Identity);
    }

    #[tokio::test]
    async fn large_answers_are_compressed_small_ones_and_errors_are_not() {
        let mut headers = http::HeaderMap::new();
        headers.insert(ACCEPT_ENCODING, "gzip".parse().unwrap());
        let body: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 97).to_le_bytes()).collect();
        let reply = encode_reply(Reply::json(200, body.clone()), &headers).await;
        let header =
            |reply: &Reply, name| reply.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        assert_eq!(header(&reply, &CONTENT_ENCODING).unwrap(), "gzip");
        assert_eq!(header(&reply, &VARY).unwrap(), "Accept-Encoding");
        let mut plain = Vec::new();
        GzDecoder::new(&reply.body[..]).read_to_end(&mut plain).unwrap();
        assert_eq!(plain, body);

        headers.insert(ACCEPT_ENCODING, "deflate".parse().unwrap());
        let reply = encode_reply(Reply::json(200, body[..2000].to_vec()), &headers).await;
        let mut plain = Vec::new();
        ZlibDecoder::new(&reply.body[..]).read_to_end(&mut plain).unwrap();
        assert_eq!(plain, &body[..2000]);

        let small = encode_reply(Reply::json(200, vec![b' '; 100]), &headers).await;
        assert!(small.headers.is_empty());
        let error = encode_reply(Reply::json(400, vec![b' '; 5000]), &headers).await;
        assert!(error.headers.is_empty() && error.body.len() == 5000);
    }
}
