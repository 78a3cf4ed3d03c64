//! Replays every file of `corpus/<target>/` (seeds from the tests) and
//! `regressions/<target>/` (inputs that once broke a property) through its
//! target, so `cargo test` keeps what fuzzing found fixed.

#![allow(clippy::panic)]

use std::path::Path;

fn replay(folder: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let mut replayed = 0;
    for target in switchyard_fuzz::targets::ALL {
        let Ok(entries) = std::fs::read_dir(root.join(target)) else { continue };
        let mut files: Vec<_> = entries.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
        files.sort();
        for file in files {
            let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            println!("{target}: {}", file.display());
            assert!(switchyard_fuzz::targets::run(target, &data));
            replayed += 1;
        }
    }
    replayed
}

#[test]
fn the_seed_corpus_passes_every_target() {
    let replayed = replay("corpus");
    assert!(replayed >= switchyard_fuzz::targets::ALL.len(), "only {replayed} seeds");
}

#[test]
fn inputs_that_once_broke_a_target_pass() {
    replay("regressions");
}
