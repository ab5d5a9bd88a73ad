//! kill -9 of the loader at many moments: the store must open, validate, and hold either
//! the state before the load or the whole load, never a part; rerunning the load succeeds.

use crate::common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn facts_or_none(store: &Path) -> Option<u64> {
    if !store.join("CURRENT").exists() {
        return None;
    }
    assert_valid(store);
    stats(store)["facts"].as_u64()
}

fn kill_after(store: &Path, input: &Path, delay: Duration) -> bool {
    let mut child = Command::new(bin_path())
        .arg("ingest")
        .arg("--store")
        .arg(store)
        .arg("--on-error")
        .arg("skip")
        .arg("--memory-mb")
        .arg("16")
        .arg(input)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn loader");
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
    let full = 217_574u64;
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
        let after = facts_or_none(&store);
        let expected_full = before.map_or(full, |b| full + b - 1); // the base shares one fact with kg.tsv
        assert!(
            after == before || after == Some(expected_full),
            "round {i} (killed after {ms} ms): store holds {after:?} facts, expected {before:?} or {expected_full}"
        );
        // Rerunning the load completes and leaves no scratch space behind.
        ingest(&store, &["--on-error", "skip"], &[&input]);
        assert_valid(&store);
        assert_eq!(stats(&store)["facts"].as_u64(), Some(expected_full));
        let leftovers: Vec<String> = std::fs::read_dir(&store)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("staging-") || n.starts_with("tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "round {i}: leftovers {leftovers:?}");
    }
    assert!(killed >= 3, "only {killed} loads were killed before finishing: the input is too small to test crashes");
}
