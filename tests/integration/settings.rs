//! One surface for every front end: the same settings, given to the library
//! (`trellis::settings`), to the command line (flags) and to Python (keyword arguments, in
//! python/tests/test_settings.py), are accepted or refused alike, with the same sentence.
//! The cases are tests/fixtures/settings/cases.json.

use crate::common::{fixture, trellis, write};
use std::path::{Path, PathBuf};
use trellis::settings::{PipelineSpec, Settings};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Case {
    component: String,
    kind: String,
    settings: Vec<(String, Vec<String>)>,
    refused: Option<String>,
}

/// A JSON value as the text a front end hands over; model directories made absolute.
fn texts(name: &str, v: &serde_json::Value) -> Vec<String> {
    let one = |v: &serde_json::Value| -> String {
        let t = match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if name.ends_with("model") || name == "rerank" {
            repo().join(t).display().to_string()
        } else {
            t
        }
    };
    match v {
        serde_json::Value::Array(items) => items.iter().map(one).collect(),
        other => vec![one(other)],
    }
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixture("settings/cases.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            component: c["component"].as_str().unwrap().to_owned(),
            kind: c["kind"].as_str().unwrap().to_owned(),
            settings: c["settings"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), texts(k, v))).collect(),
            refused: c.get("refused").and_then(|r| r.as_str()).map(str::to_owned),
        })
        .collect()
}

fn library(case: &Case) -> Result<(), String> {
    let mut s = Settings::new();
    for (n, v) in &case.settings {
        s.set_list(n.clone(), v.clone());
    }
    let outcome = match case.component.as_str() {
        "retriever" => trellis::settings::retriever(&case.kind, &s).map(drop),
        _ => PipelineSpec::read(&case.kind, &s).and_then(|p| {
            // The shipped generator's decoding as its trellis.json gives it (beam search).
            let dir = trellis::model::ModelDir::open_spec(&repo().join("models/generator-opendialkg")).expect("the shipped generator");
            let shipped =
                trellis::generate::GenerateSettings::from_config(&dir.section::<trellis::generate::GenerationConfig>().expect("its generation section"));
            p.generator.apply(&shipped).map(drop)
        }),
    };
    outcome.map_err(|e| e.to_string())
}

fn flags(case: &Case) -> Vec<String> {
    let mut out = Vec::new();
    for (n, values) in &case.settings {
        out.push(format!("--{}", n.replace('_', "-")));
        // A switch is a flag without a value.
        let switch = trellis::settings::LINK.iter().chain(trellis::settings::PIPELINE).any(|s| s.name == n && s.switch);
        if !(switch && values == &["true"]) {
            out.push(values.join(","));
        }
    }
    out
}

fn sample_store(dir: &Path) -> PathBuf {
    let store = dir.join("kg");
    crate::common::ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let out =
        trellis().args(["index-tokens", "--store"]).arg(&store).arg("--tokenizer").arg(repo().join("models/gsr-opendialkg/tokenizer.json")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    store
}

fn command_line(case: &Case, store: &Path, dir: &Path) -> Result<(), String> {
    let mut cmd = trellis();
    match case.component.as_str() {
        "retriever" => {
            let input = write(dir, "in.jsonl", b"{\"history\": [\"I loved Happy Gilmore.\"]}\n");
            cmd.arg("retrieve")
                .arg("--store")
                .arg(store)
                .args(["--retriever", &case.kind])
                .arg("--input")
                .arg(input)
                .arg("--output")
                .arg(dir.join("out.jsonl"));
        }
        _ => {
            cmd.arg("respond").arg("--store").arg(store).args(["--retriever", &case.kind]).arg("--generator").arg(repo().join("models/generator-opendialkg"));
            cmd.arg("I loved Happy Gilmore.");
        }
    }
    cmd.args(flags(case));
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    match out.status.code() {
        Some(0) => Ok(()),
        Some(2) => Err(stderr),
        other => panic!("{other:?} for {:?}: {stderr}", flags(case)),
    }
}

#[test]
fn the_library_and_the_command_line_agree_on_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let mut checked = 0;
    for case in cases() {
        let lib = library(&case);
        let cli = command_line(&case, &store, dir.path());
        match (&case.refused, &lib, &cli) {
            (None, Ok(()), Ok(())) => {}
            (Some(want), Err(got), Err(stderr)) => {
                assert_eq!(got, want, "library, {:?}", case.settings);
                // The command line's one line: `error: SENTENCE`, exit 2.
                assert_eq!(stderr.trim_end(), format!("error: {want}"), "command line, {:?}", case.settings);
            }
            _ => panic!("{} {} {:?}: expected {:?}; library {lib:?}; command line {cli:?}", case.component, case.kind, case.settings, case.refused),
        }
        checked += 1;
    }
    assert!(checked >= 25, "{checked} cases");
}

#[test]
fn unknown_names_are_refused_by_the_library_with_the_closest_name() {
    // (The command line refuses an unknown flag itself, before any setting is read.)
    let mut s = Settings::new();
    s.set("rerank_topp", "3");
    assert_eq!(trellis::settings::retriever("pcst", &s).unwrap_err().to_string(), "unknown setting `rerank_topp` for a retriever (did you mean `rerank_top`?)");
}
