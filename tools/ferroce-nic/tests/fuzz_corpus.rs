// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The saved fuzz corpus (`tools/fuzz/corpus/<target>/`) through the bodies of the libFuzzer
//! targets (`common::fuzz`), on the stable toolchain: every file, the seeds and whatever
//! whatever else is there. The seed files (`seed-*`) are what `common::seeds` makes;
//! `FERROCE_BLESS_CORPUS=1` writes them anew. `FERROCE_FUZZ_CORPUS=DIR` also runs
//! `DIR/<target>/` (a campaign's corpus: `tools/ferroce fuzz-coverage` measures what it
//! reaches).

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{fuzz, pair, seeds};

/// The corpus directory of `target`.
fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}

/// Named inputs of a target.
type Seeds = Vec<(&'static str, Vec<u8>)>;

/// The seeds of each target, as file contents.
fn seeds() -> Vec<(&'static str, Seeds)> {
    let frames = seeds::frame_seeds()
        .into_iter()
        .map(|(name, frames)| (name, fuzz::encode_frames(&frames)))
        .collect();
    let pairs = seeds::pair_seeds()
        .into_iter()
        .map(|(name, setup, actions)| (name, pair::encode(setup, &actions)))
        .collect();
    vec![
        ("frame", frames),
        ("command", seeds::command_seeds()),
        ("pair", pairs),
    ]
}

#[test]
fn the_seed_files_are_current() {
    let bless = std::env::var_os("FERROCE_BLESS_CORPUS").is_some();
    for (target, seeds) in seeds() {
        let dir = corpus(target);
        if bless {
            fs::create_dir_all(&dir).expect("create the corpus directory");
        }
        for (name, bytes) in seeds {
            let path = dir.join(format!("seed-{name}"));
            if bless {
                fs::write(&path, &bytes).expect("write a seed");
            }
            let saved = fs::read(&path).unwrap_or_else(|e| {
                panic!("{}: {e} (FERROCE_BLESS_CORPUS=1 writes it)", path.display())
            });
            assert_eq!(
                saved,
                bytes,
                "{} is stale (FERROCE_BLESS_CORPUS=1 rewrites it)",
                path.display()
            );
        }
    }
}

/// Runs every file of `target`'s corpus (and of the one `FERROCE_FUZZ_CORPUS` names) through
/// `body`; returns how many there were.
fn run_corpus(target: &str, body: fn(&[u8])) -> usize {
    let mut dirs = vec![corpus(target)];
    if let Some(extra) = std::env::var_os("FERROCE_FUZZ_CORPUS") {
        // A campaign that never ran left none.
        dirs.extend(Some(Path::new(&extra).join(target)).filter(|dir| dir.is_dir()));
    }
    let mut files: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|dir| fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    for path in &files {
        let data = fs::read(path).expect("read a corpus file");
        eprintln!("{target}: {}", path.display());
        body(&data);
    }
    files.len()
}

#[test]
fn the_frame_corpus_runs_clean() {
    assert!(
        run_corpus("frame", fuzz::frame_input) > 0,
        "no frame corpus"
    );
}

#[test]
fn the_command_corpus_runs_clean() {
    assert!(
        run_corpus("command", fuzz::commands) > 0,
        "no command corpus"
    );
}

#[test]
fn the_pair_corpus_runs_clean() {
    assert!(run_corpus("pair", pair::pair) > 0, "no pair corpus");
}
