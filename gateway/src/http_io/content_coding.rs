//! Request bodies sent compressed, as `tritonclient.http` sends them with
//! `request_compression_algorithm`: `Content-Encoding: gzip` (RFC 1952)
//! or `deflate` (the zlib format, RFC 1950, as HTTP defines it).
//!
//! 1. [`request_coding`] reads the coding a request names; anything but
//!    `identity`, `gzip` (or its old name `x-gzip`) and `deflate`, or
//!    more than one coding, is a 415.
//! 2. An [`Inflater`] takes the body chunk by chunk as it arrives and
//!    writes what it decodes into a buffer that never grows past the body
//!    limit: a small body that would inflate to gigabytes (a
//!    decompression bomb) is a 413 as soon as its output reaches the
//!    limit, never memory. A corrupt, truncated or trailing-garbage
//!    stream is a 400.
//!
//! The V2 handlers then see the decoded body only: the
//! `Inference-Header-Content-Length` of a binary request, the cache keys
//! and the size limits all refer to the decompressed bytes.

use crate::error::GatewayError;
use bytes::Bytes;
use flate2::{Decompress, FlushDecompress, Status};
use std::io::Write;

/// A content coding the gateway reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// Sent as is.
    Identity,
    /// gzip (RFC 1952).
    Gzip,
    /// HTTP's `deflate`: the zlib format (RFC 1950).
    Deflate,
}

impl Coding {
    /// The coding's name in `Content-Encoding`.
    pub fn as_str(self) -> &'static str {
        match self {
            Coding::Identity => "identity",
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
        }
    }

    /// The coding a token names (case-insensitive), if the gateway knows it.
    pub fn from_token(token: &str) -> Option<Coding> {
        [
            ("identity", Coding::Identity),
            ("gzip", Coding::Gzip),
            ("x-gzip", Coding::Gzip),
            ("deflate", Coding::Deflate),
        ]
        .into_iter()
        .find_map(|(name, coding)| token.eq_ignore_ascii_case(name).then_some(coding))
    }
}

/// The coding of a request's body, from its `Content-Encoding` headers
/// (`identity` entries are skipped); 415 for an unknown coding or more
/// than one.
pub fn request_coding(headers: &http::HeaderMap) -> Result<Coding, GatewayError> {
    let mut found = Coding::Identity;
    let refuse = |text: &[u8]| {
        GatewayError::UnsupportedEncoding(String::from_utf8_lossy(text).chars().take(64).collect())
    };
    for value in headers.get_all(http::header::CONTENT_ENCODING) {
        let text = std::str::from_utf8(value.as_bytes()).map_err(|_| refuse(value.as_bytes()))?;
        for token in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            match Coding::from_token(token) {
                Some(Coding::Identity) => {}
                Some(coding) if found == Coding::Identity => found = coding,
                _ => return Err(refuse(value.as_bytes())),
            }
        }
    }
    Ok(found)
}

/// A decoded body under construction, in parts that are filled and never
/// moved (so no reallocation holds a body twice while it grows); refuses
/// to grow past `limit`. Each part is as large as all before it, from
/// [`FIRST_PART_BYTES`] to [`MAX_PART_BYTES`].
struct Bounded {
    parts: Vec<Vec<u8>>,
    len: usize,
    limit: usize,
    over: bool,
}

/// The first part of a decoded body.
const FIRST_PART_BYTES: usize = 64 << 10;
/// The largest part of a decoded body.
const MAX_PART_BYTES: usize = 4 << 20;

impl Bounded {
    fn new(limit: usize) -> Bounded {
        Bounded { parts: Vec::new(), len: 0, limit, over: false }
    }

    /// The bytes held (capacity, not length).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.parts.iter().map(Vec::capacity).sum()
    }

    /// The whole body: the only part as it is, else the parts joined.
    fn into_bytes(mut self) -> Bytes {
        if self.parts.len() == 1 {
            return Bytes::from(self.parts.swap_remove(0));
        }
        let mut whole = Vec::with_capacity(self.len);
        for part in self.parts {
            whole.extend_from_slice(&part);
        }
        Bytes::from(whole)
    }
}

impl Write for Bounded {
    fn write(&mut self, mut buf: &[u8]) -> std::io::Result<usize> {
        let written = buf.len();
        if self.len.saturating_add(buf.len()) > self.limit {
            self.over = true;
            return Err(std::io::Error::other("the decoded body exceeds the limit"));
        }
        while !buf.is_empty() {
            let room = self.parts.last().map_or(0, |p| p.capacity() - p.len());
            if room == 0 {
                let size = self.len.clamp(FIRST_PART_BYTES, MAX_PART_BYTES).min(self.limit - self.len);
                self.parts.push(Vec::with_capacity(size.max(buf.len().min(MAX_PART_BYTES))));
                continue;
            }
            let (now, rest) = buf.split_at(room.min(buf.len()));
            if let Some(part) = self.parts.last_mut() {
                part.extend_from_slice(now);
            }
            self.len += now.len();
            buf = rest;
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How much a zlib stream is inflated into at a time.
const SCRATCH_BYTES: usize = 32 << 10;

enum Decoder {
    /// flate2's gzip writer: parses the header, checks the CRC and length.
    Gzip(Box<flate2::write::GzDecoder<Bounded>>),
    /// A zlib stream, driven here so that its end is known (flate2's
    /// writer does not say whether a stream was cut short).
    Zlib { state: Box<Decompress>, scratch: Vec<u8>, out: Bounded, ended: bool },
}

/// Decodes a compressed body chunk by chunk into at most `limit` bytes
/// (module docs).
pub struct Inflater {
    decoder: Decoder,
    coding: Coding,
    limit: usize,
}

impl Inflater {
    /// An inflater for `coding`, or `None` for `identity` (nothing to do).
    pub fn new(coding: Coding, limit: usize) -> Option<Inflater> {
        let out = Bounded::new(limit);
        let decoder = match coding {
            Coding::Identity => return None,
            Coding::Gzip => Decoder::Gzip(Box::new(flate2::write::GzDecoder::new(out))),
            Coding::Deflate => Decoder::Zlib {
                state: Box::new(Decompress::new(true)),
                scratch: vec![0; SCRATCH_BYTES],
                out,
                ended: false,
            },
        };
        Some(Inflater { decoder, coding, limit })
    }

    /// Decodes the next chunk of the body.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), GatewayError> {
        let result = match &mut self.decoder {
            Decoder::Gzip(gz) => gz.write_all(chunk).map_err(|e| {
                if e.kind() == std::io::ErrorKind::WriteZero {
                    "data after the end of the gzip stream".to_string()
                } else {
                    e.to_string()
                }
            }),
            Decoder::Zlib { state, scratch, out, ended } => inflate(state, scratch, out, ended, chunk),
        };
        result.map_err(|message| self.failed(message))
    }

    /// The whole decoded body, once the last chunk was pushed; a stream
    /// that did not end is corrupt.
    pub fn finish(self) -> Result<Bytes, GatewayError> {
        let coding = self.coding.as_str();
        let corrupt = |message: String| GatewayError::CorruptBody { coding, message };
        match self.decoder {
            Decoder::Gzip(gz) => gz.finish().map(Bounded::into_bytes).map_err(|e| corrupt(e.to_string())),
            Decoder::Zlib { out, ended: true, .. } => Ok(out.into_bytes()),
            Decoder::Zlib { .. } => Err(corrupt("the stream ends before its end".to_string())),
        }
    }

    fn failed(&self, message: String) -> GatewayError {
        let over = match &self.decoder {
            Decoder::Gzip(gz) => gz.get_ref().over,
            Decoder::Zlib { out, .. } => out.over,
        };
        if over {
            GatewayError::BodyTooLarge { limit: self.limit }
        } else {
            GatewayError::CorruptBody { coding: self.coding.as_str(), message }
        }
    }
}

/// Inflates `input` into `out` through `scratch`; sets `ended` at the end
/// of the stream, after which no byte may follow.
fn inflate(
    state: &mut Decompress,
    scratch: &mut [u8],
    out: &mut Bounded,
    ended: &mut bool,
    mut input: &[u8],
) -> Result<(), String> {
    while !input.is_empty() {
        if *ended {
            return Err("data after the end of the deflate stream".to_string());
        }
        let (before_in, before_out) = (state.total_in(), state.total_out());
        let status = state.decompress(input, scratch, FlushDecompress::None).map_err(|e| e.to_string())?;
        let consumed = usize::try_from(state.total_in() - before_in).unwrap_or(input.len());
        let produced = usize::try_from(state.total_out() - before_out).unwrap_or(0);
        input = input.get(consumed..).unwrap_or_default();
        out.write_all(scratch.get(..produced).unwrap_or_default()).map_err(|e| e.to_string())?;
        match status {
            Status::StreamEnd => *ended = true,
            Status::Ok | Status::BufError if consumed == 0 && produced == 0 => {
                return Err("the deflate stream makes no progress".to_string());
            }
            Status::Ok | Status::BufError => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::{GzEncoder, ZlibEncoder};
    use flate2::Compression;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn decode(coding: Coding, body: &[u8], limit: usize, chunk: usize) -> Result<Bytes, GatewayError> {
        let mut inflater = Inflater::new(coding, limit).unwrap();
        for part in body.chunks(chunk) {
            inflater.push(part)?;
        }
        inflater.finish()
    }

    fn headers(values: &[&str]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for v in values {
            map.append(http::header::CONTENT_ENCODING, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn the_request_coding_is_read_from_every_header() {
        assert_eq!(request_coding(&headers(&[])).unwrap(), Coding::Identity);
        assert_eq!(request_coding(&headers(&["identity"])).unwrap(), Coding::Identity);
        assert_eq!(request_coding(&headers(&["GZIP"])).unwrap(), Coding::Gzip);
        assert_eq!(request_coding(&headers(&["x-gzip"])).unwrap(), Coding::Gzip);
        assert_eq!(request_coding(&headers(&["identity, deflate"])).unwrap(), Coding::Deflate);
        for refused in [&["br"][..], &["gzip, deflate"], &["gzip", "gzip"], &["compress"]] {
            let err = request_coding(&headers(refused)).unwrap_err();
            assert_eq!(err.status(), 415, "{refused:?}");
        }
    }

    #[test]
    fn gzip_and_deflate_bodies_decode_in_any_chunking() {
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for chunk in [1, 7, 4096, usize::MAX] {
            assert_eq!(decode(Coding::Gzip, &gzip(&data), data.len(), chunk).unwrap(), data);
            assert_eq!(decode(Coding::Deflate, &zlib(&data), data.len(), chunk).unwrap(), data);
        }
        assert!(decode(Coding::Gzip, &gzip(b""), 0, 1).unwrap().is_empty());
    }

    #[test]
    fn a_bomb_stops_at_the_limit_with_413() {
        let zeros = vec![0u8; 8 << 20];
        for (coding, body) in [(Coding::Gzip, gzip(&zeros)), (Coding::Deflate, zlib(&zeros))] {
            let mut inflater = Inflater::new(coding, 1 << 20).unwrap();
            let err = body.chunks(1024).try_for_each(|c| inflater.push(c)).unwrap_err();
            assert_eq!(err.status(), 413, "{coding:?}");
            let held = match &inflater.decoder {
                Decoder::Gzip(gz) => gz.get_ref().held(),
                Decoder::Zlib { out, .. } => out.held(),
            };
            assert!(held <= 1 << 20, "{coding:?} held {held}");
        }
    }

    #[test]
    fn corrupt_truncated_and_trailing_streams_are_400() {
        let data = vec![7u8; 10_000];
        for (coding, body) in [(Coding::Gzip, gzip(&data)), (Coding::Deflate, zlib(&data))] {
            let garbage = decode(coding, b"{\"inputs\": []}", 1 << 20, 1024).unwrap_err();
            assert_eq!(garbage.status(), 400, "{coding:?}: {garbage}");
            let cut = decode(coding, &body[..body.len() - 3], 1 << 20, 1024).unwrap_err();
            assert_eq!(cut.status(), 400, "{coding:?}: {cut}");
            let mut trailing = body.clone();
            trailing.extend_from_slice(b"xyz");
            let extra = decode(coding, &trailing, 1 << 20, 1 << 20).unwrap_err();
            assert_eq!(extra.status(), 400, "{coding:?}: {extra}");
        }
        let mut flipped = gzip(&data);
        let n = flipped.len();
        flipped[n - 6] ^= 1; // the CRC
        assert_eq!(decode(Coding::Gzip, &flipped, 1 << 20, 64).unwrap_err().status(), 400);
    }
}
