//! kill -9 of the loader at many moments: the store must open, validate, and hold either
//! the state before the load or the whole load, never a part; rerunning the load succeeds.

use crate::common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn facts_or_none(store: &Path) -> Option<u64> {
    if !store.join("CURRENT").exists() {
        return None;
    }
    assert_valid(store);
    stats(store)["facts"].as_u64()
}

fn spawn_load(store: &Path, input: &Path, extra: &[&str]) -> Child {
    Command::new(bin_path())
        .arg("ingest")
        .arg("--store")
        .arg(store)
        .arg("--on-error")
        .arg("skip")
        .args(extra)
        .arg(input)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn loader")
}

fn kill_after(store: &Path, input: &Path, delay: Duration) -> bool {
    let mut child = spawn_load(store, input, &["--memory-mb", "16"]);
    let start = Instant::now();
    while start.elapsed() < delay {
        if child.try_wait().expect("wait").is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    true
}

#[test]
fn killed_loads_leave_old_or_new_state() {
    let input = shared_data("opendialkg/kg.tsv");
    let dir = tempfile::tempdir().unwrap();
    let base = write(dir.path(), "base.tsv", b"Alpha\tknows\tBeta\nJordan Spieth\tSport played\tGolf\n");
    let mut killed = 0;
    // Delays spread over parsing, sorting, SST writing and commit of a ~0.5-2 s load.
    for (i, ms) in [1u64, 30, 80, 150, 250, 400, 600, 900, 1300].into_iter().enumerate() {
        // Odd rounds load onto an existing store (the incremental path), even rounds create one.
        let store = dir.path().join(format!("store-{i}"));
        let before = if i % 2 == 1 {
            ingest(&store, &[], &[&base]);
            Some(2u64)
        } else {
            None
        };
        if kill_after(&store, &input, Duration::from_millis(ms)) {
            killed += 1;
        }
        check_after_kill(&store, &input, before, &format!("round {i} (killed after {ms} ms)"));
    }
    assert!(killed >= 3, "only {killed} loads were killed before finishing: the input is too small to test crashes");
}

/// The store after a killed load of `input`: it opens and validates, holds the facts it held
/// `before` (`None`: no store) or the whole load; rerunning the load completes and leaves no
/// scratch space behind.
fn check_after_kill(store: &Path, input: &Path, before: Option<u64>, what: &str) {
    let full = 217_574u64;
    let after = facts_or_none(store);
    let expected_full = before.map_or(full, |b| full + b - 1); // the base shares one fact with kg.tsv
    assert!(after == before || after == Some(expected_full), "{what}: store holds {after:?} facts, expected {before:?} or {expected_full}");
    ingest(store, &["--on-error", "skip"], &[input]);
    assert_valid(store);
    assert_eq!(stats(store)["facts"].as_u64(), Some(expected_full), "{what}");
    let leftovers: Vec<String> = std::fs::read_dir(store)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("staging-") || n.starts_with("tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{what}: leftovers {leftovers:?}");
}

/// Adjacency SST files in a running load's scratch directory. The loader writes them only
/// while it merges the sorted runs (one file per direction at this size: the outgoing
/// merge comes first); the commit moves them into the generation.
fn adjacency_files(store: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(store) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("tmp-"))
        .filter_map(|tmp| std::fs::read_dir(tmp.path()).ok())
        .flat_map(|files| files.filter_map(|f| f.ok()))
        .filter(|f| {
            let name = f.file_name().to_string_lossy().into_owned();
            name.starts_with("adjacency-") && name.ends_with(".sst")
        })
        .count()
}

#[test]
fn loads_killed_while_merging_sorted_runs_leave_old_or_new_state() {
    let input = shared_data("opendialkg/kg.tsv");
    let dir = tempfile::tempdir().unwrap();
    let base = write(dir.path(), "base.tsv", b"Alpha\tknows\tBeta\nJordan Spieth\tSport played\tGolf\n");
    let mut killed_in_merge = 0;
    // (adjacency files to wait for, then ms more): 1 = the outgoing merge has begun, 2 = the
    // incoming one has. Each merge of this input takes some 0.5 s here, so the moments fall
    // at its start, early in it and well into it.
    for (i, (files, extra_ms)) in [(1usize, 0u64), (1, 50), (1, 250), (2, 0), (2, 50), (2, 150)].into_iter().enumerate() {
        let store = dir.path().join(format!("store-{i}"));
        let before = if i % 2 == 1 {
            ingest(&store, &[], &[&base]);
            Some(2u64)
        } else {
            None
        };
        // A run every 4,000 fact lines: 63 sorted runs (248,540 fact lines) to merge.
        let mut child = spawn_load(&store, &input, &["--sort-run-triples", "4000"]);
        let mut finished = false;
        while adjacency_files(&store) < files {
            if child.try_wait().expect("wait").is_some() {
                finished = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        std::thread::sleep(Duration::from_millis(extra_ms));
        if !finished && child.try_wait().expect("wait").is_none() {
            child.kill().expect("SIGKILL");
            killed_in_merge += 1;
        }
        child.wait().expect("reap");
        check_after_kill(&store, &input, before, &format!("round {i} (killed in the merge: {files} adjacency files, then {extra_ms} ms)"));
    }
    assert!(killed_in_merge >= 3, "only {killed_in_merge} loads were killed in their merge: the merge is too short to test");
}
