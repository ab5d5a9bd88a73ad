//! Helpers shared by the integration tests.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

pub fn trellis() -> Command {
    Command::cargo_bin("trellis").expect("the trellis binary is built")
}

pub fn bin_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin("trellis")
}

/// `../shared/data/<rel>`: the real data sets the project is measured on.
pub fn shared_data(rel: &str) -> PathBuf {
    let root = std::env::var_os("TRELLIS_SHARED_DATA").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let p = root.join(rel);
    assert!(p.exists(), "{} is missing: these tests need the shared data sets (set TRELLIS_SHARED_DATA)", p.display());
    p
}

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

pub fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().expect("runs");
    assert!(out.status.success(), "command failed ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 output")
}

pub fn json_of(cmd: &mut Command) -> serde_json::Value {
    serde_json::from_str(&stdout_of(cmd)).expect("json output")
}

/// Ingests `files` into `store` with extra args, returning the JSON report.
pub fn ingest(store: &Path, args: &[&str], files: &[&Path]) -> serde_json::Value {
    let mut cmd = trellis();
    cmd.arg("ingest").arg("--store").arg(store).arg("--json").args(args);
    for f in files {
        cmd.arg(f);
    }
    json_of(&mut cmd)
}

pub fn stats(store: &Path) -> serde_json::Value {
    json_of(trellis().arg("stats").arg("--store").arg(store).arg("--json"))
}

pub fn assert_valid(store: &Path) {
    let out = trellis().arg("validate").arg("--store").arg(store).output().expect("runs");
    assert!(out.status.success(), "validate failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write test input");
    p
}

/// Removes the tokenizers stored with the store's token indexes (`tokenizer_files`), as an
/// index built before format 4 has none: the next write that changes the dictionaries then
/// leaves the index stale instead of bringing it up to date.
pub fn forget_stored_tokenizers(store_dir: &Path) {
    let gen = std::fs::read_to_string(store_dir.join("CURRENT")).unwrap();
    let path = store_dir.join(gen.trim());
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), &path).unwrap();
    let db = rocksdb::DB::open_cf(&rocksdb::Options::default(), &path, cfs).unwrap();
    let cf = db.cf_handle("tokenizer_files").unwrap();
    let keys: Vec<Box<[u8]>> = db.iterator_cf(cf, rocksdb::IteratorMode::Start).map(|kv| kv.unwrap().0).collect();
    assert!(!keys.is_empty(), "no stored tokenizer to forget");
    for k in keys {
        db.delete_cf(cf, k).unwrap();
    }
    db.flush_cf(cf).unwrap();
}

/// Copies a directory tree (a frozen store fixture, a store to damage or kill in).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
