//! Writing a file whose parts arrive at once and out of order.
//!
//! A download of a large object runs several ranged GETs together; each
//! delivers its bytes in order, but the parts interleave. [`PartWriter`]
//! writes every piece where it belongs as soon as it arrives (positional
//! writes), so writing overlaps the network instead of following it, and
//! starts the kernel's writeback of each written stretch early, so the
//! final `fdatasync` (which the cache needs: a renamed folder must never
//! hold a file a crash left short) finds little left to do.
//!
//! The digest (MD5 of an ETag, SHA-256 of a checksum object) must see the
//! bytes in file order: pieces at the digest's cursor are hashed as they
//! come; a part that completed before its turn is read back from the file
//! (the page cache) when the cursor reaches it.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::integrity::Hasher;

/// How much a part writes before its stretch is handed to writeback.
const WRITEBACK_STEP: u64 = 2 << 20;

/// Read-back block when the digest catches up over a finished part.
const READ_BACK_BLOCK: usize = 1 << 20;

/// One file being written from parts `[start, end)` that tile it.
pub(crate) struct PartWriter {
    file: File,
    parts: Vec<PartProgress>,
    hasher: Hasher,
    /// Index of the part the digest is in, and the offset it reached.
    hash_part: usize,
    hashed_to: u64,
    written: u64,
}

/// Where one part's bytes have got to.
struct PartProgress {
    end: u64,
    /// Bytes `[start, written_to)` of the part are in the file.
    written_to: u64,
    /// Bytes up to here have been handed to writeback.
    flushed_to: u64,
}

impl PartWriter {
    /// Creates `dest` for `parts` (offsets `[start, end)`, in file order,
    /// tiling the file from 0) digested by `hasher`.
    pub(crate) fn create(dest: &Path, parts: &[(u64, u64)], hasher: Hasher) -> io::Result<PartWriter> {
        let file = File::options().read(true).write(true).create(true).truncate(true).open(dest)?;
        let parts = parts
            .iter()
            .map(|&(start, end)| PartProgress { end, written_to: start, flushed_to: start })
            .collect();
        Ok(PartWriter { file, parts, hasher, hash_part: 0, hashed_to: 0, written: 0 })
    }

    /// Writes the next bytes of part `part`, which continue it where its
    /// previous piece ended. A piece past the part's end (a server that
    /// ignored the range) is refused.
    pub(crate) fn write(&mut self, part: usize, bytes: &[u8]) -> io::Result<()> {
        let progress = self.parts.get(part).ok_or_else(|| invalid(format!("no part {part}")))?;
        let offset = progress.written_to;
        let len = bytes.len() as u64;
        if offset + len > progress.end {
            return Err(invalid(format!(
                "part {part} sent more than its range ({} bytes past it)",
                offset + len - progress.end
            )));
        }
        self.file.write_all_at(bytes, offset)?;
        self.written += len;
        let progress = &mut self.parts[part];
        progress.written_to += len;
        if progress.written_to - progress.flushed_to >= WRITEBACK_STEP || progress.written_to == progress.end
        {
            start_writeback(&self.file, progress.flushed_to, progress.written_to - progress.flushed_to);
            progress.flushed_to = progress.written_to;
        }
        if part == self.hash_part && offset == self.hashed_to {
            self.hasher.update(bytes);
            self.hashed_to += len;
        }
        self.catch_up_digest()
    }

    /// Moves the digest over parts that finished while it was behind.
    fn catch_up_digest(&mut self) -> io::Result<()> {
        if !self.hasher.wants_bytes() {
            return Ok(());
        }
        let mut block = Vec::new();
        while let Some(progress) = self.parts.get(self.hash_part) {
            if self.hashed_to < progress.written_to {
                block.resize(READ_BACK_BLOCK.min((progress.written_to - self.hashed_to) as usize), 0);
                self.file.read_exact_at(&mut block, self.hashed_to)?;
                self.hasher.update(&block);
                self.hashed_to += block.len() as u64;
            } else if self.hashed_to == progress.end {
                self.hash_part += 1;
            } else {
                break;
            }
        }
        Ok(())
    }

    /// Flushes the file to disk and returns the digest and the bytes
    /// written. No part can write past its range, so a part that ended
    /// early shows as a byte count short of the file's size, which the
    /// size check that follows reports.
    pub(crate) fn finish(self) -> io::Result<(Hasher, u64)> {
        self.file.sync_data()?;
        Ok((self.hasher, self.written))
    }
}

fn invalid(reason: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason)
}

/// Asks the kernel to start writing `[offset, offset + len)` to disk now,
/// without waiting for it (Linux `sync_file_range` with
/// `SYNC_FILE_RANGE_WRITE`). Only an optimisation: the final
/// `fdatasync` is what guarantees durability, so a failure is ignored.
fn start_writeback(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: the descriptor is open for the call's duration (borrowed
        // from `file`); the call reads no memory of ours.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

#[cfg(test)]
mod tests {
    use super::*;
    use md5::{Digest as _, Md5};

    fn parts_of(size: u64, part: u64) -> Vec<(u64, u64)> {
        (0..size.div_ceil(part)).map(|i| (i * part, ((i + 1) * part).min(size))).collect()
    }

    /// Writes `data` in `parts`, feeding pieces of `piece` bytes in the
    /// order `order` gives (part indexes, one piece each time a part is
    /// named), and returns the file's bytes and the digest.
    fn write_in_order(data: &[u8], part: u64, piece: usize, order: &[usize]) -> (Vec<u8>, String, u64) {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("f");
        let parts = parts_of(data.len() as u64, part);
        let mut writer = PartWriter::create(&dest, &parts, Hasher::Md5(Box::default())).unwrap();
        let mut next: Vec<u64> = parts.iter().map(|p| p.0).collect();
        for &p in order {
            let (at, end) = (next[p], parts[p].1);
            if at == end {
                continue;
            }
            let stop = (at + piece as u64).min(end);
            writer.write(p, &data[at as usize..stop as usize]).unwrap();
            next[p] = stop;
        }
        let (hasher, written) = writer.finish().unwrap();
        let digest = match hasher {
            Hasher::Md5(h) => hex::encode(h.finalize()),
            other => panic!("unexpected hasher {other:?}"),
        };
        (std::fs::read(&dest).unwrap(), digest, written)
    }

    #[test]
    fn interleaved_parts_land_in_place_and_digest_in_file_order() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let want = hex::encode(Md5::digest(&data));
        // Last part first, then the middle, then the first: the digest must
        // read the later parts back once the first completes.
        let mut order = vec![3; 40];
        order.extend(vec![2; 40]);
        order.extend(vec![1; 40]);
        order.extend(vec![0; 40]);
        let (file, digest, written) = write_in_order(&data, 30_000, 997, &order);
        assert_eq!(file, data);
        assert_eq!(digest, want);
        assert_eq!(written, data.len() as u64);
        // Round-robin interleaving.
        let order: Vec<usize> = (0..200).map(|i| i % 4).collect();
        let (file, digest, _) = write_in_order(&data, 30_000, 1_500, &order);
        assert_eq!(file, data);
        assert_eq!(digest, want);
    }

    #[test]
    fn a_piece_past_its_part_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer =
            PartWriter::create(&dir.path().join("f"), &[(0, 10), (10, 20)], Hasher::None).unwrap();
        writer.write(0, &[1; 6]).unwrap();
        let err = writer.write(0, &[1; 6]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        assert!(writer.write(2, &[1]).is_err(), "no such part");
    }

    #[test]
    fn a_missing_part_shows_in_the_byte_count() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer =
            PartWriter::create(&dir.path().join("f"), &[(0, 10), (10, 20)], Hasher::None).unwrap();
        writer.write(1, &[1; 10]).unwrap();
        let (_, written) = writer.finish().unwrap();
        assert_eq!(written, 10);
    }
}
