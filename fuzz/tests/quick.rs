//! The quick fuzz run of `make test` (`make fuzz-quick`): every target for
//! a few seconds (`FUZZ_QUICK_SECONDS`, default 10) on inputs mutated from
//! its seed corpus by a random byte-level mutator (flips, interesting
//! bytes, inserts, deletes, duplicated and spliced ranges, truncation),
//! with the same property checks as the AFL++ runs. It needs no
//! instrumented build (AFL++'s takes ~12 minutes on 2 CPUs, more than
//! `make test`'s budget allows), so it is not coverage-guided: the long
//! runs (`make fuzz`) are. A failing input is written to
//! `fuzz/findings/<target>/quick-<hash>` and named in the failure; the
//! seed (`FUZZ_QUICK_SEED`) reproduces a run. Ignored by plain
//! `cargo test`; run with `--ignored`.

#![allow(clippy::panic)]

use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A xorshift64* sequence: reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Bytes that often matter to parsers: JSON and TOML punctuation, digits,
/// signs, boundaries of integer widths.
const INTERESTING: &[u8] = b"\x00\xff\x7f\x80\x01\"[]{},:=.-+0123456789eE\\\n\r\t ";

/// Mutates `data` in place with one to four random edits, `other` (another
/// seed) giving the spliced ranges.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..1 + rng.below(4) {
        let len = data.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                data.splice(i..i, bytes);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(16));
                data.drain(i..i + n);
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(64));
                let copy = data[i..i + n].to_vec();
                let at = rng.below(len + 1);
                data.splice(at..at, copy);
            }
            5 if !other.is_empty() => {
                let i = rng.below(other.len());
                let n = 1 + rng.below((other.len() - i).min(64));
                let at = rng.below(len + 1);
                data.splice(at..at, other[i..i + n].iter().copied());
            }
            6 if len > 0 => data.truncate(rng.below(len)),
            _ => {
                let i = rng.below(len + 1);
                data.insert(i, INTERESTING[rng.below(INTERESTING.len())]);
            }
        }
    }
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    for folder in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(folder).join(target)) else { continue };
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
        files.sort();
        all.extend(files.iter().filter_map(|f| std::fs::read(f).ok()));
    }
    all
}

fn save(target: &str, data: &[u8]) -> PathBuf {
    let mut h = DefaultHasher::new();
    data.hash(&mut h);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("findings").join(target);
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("quick-{:016x}", h.finish()));
    let _ = std::fs::write(&path, data);
    path
}

#[test]
#[ignore = "the quick fuzz run: `make fuzz-quick` (part of `make test`)"]
fn every_target_holds_its_properties_on_mutated_inputs() {
    let seconds: u64 = std::env::var("FUZZ_QUICK_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let seed: u64 = std::env::var("FUZZ_QUICK_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
            | 1
    });
    println!("FUZZ_QUICK_SEED={seed}, {seconds} s per target");
    for target in switchyard_fuzz::targets::ALL {
        let corpus = seeds(target);
        assert!(!corpus.is_empty(), "{target}: no seeds");
        let mut rng = Rng(seed ^ (target.len() as u64) << 32 | 1);
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let mut runs = 0u64;
        let mut current = corpus[0].clone();
        while Instant::now() < deadline {
            if rng.below(4) == 0 {
                current = corpus[rng.below(corpus.len())].clone();
            }
            let other = &corpus[rng.below(corpus.len())];
            mutate(&mut rng, &mut current, other);
            if current.len() > 1 << 16 {
                current.truncate(1 << 16);
            }
            let input = current.clone();
            let outcome = catch_unwind(AssertUnwindSafe(|| switchyard_fuzz::targets::run(target, &input)));
            if outcome.is_err() {
                let path = save(target, &input);
                panic!("{target}: a property broke on {} (FUZZ_QUICK_SEED={seed})", path.display());
            }
            runs += 1;
        }
        println!("{target}: {runs} inputs, {} seeds, no property broken", corpus.len());
    }
}
