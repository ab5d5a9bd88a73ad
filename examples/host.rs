//! A host application embedding Trellis: load the bundled sample graph, index its names for
//! the shipped retriever, link a dialog, retrieve with the shipped model and a baseline, and
//! reply with the shipped generator. `tools/test.sh` builds and runs it (so CI does):
//!
//! ```sh
//! source tools/setup.sh            # sets ORT_DYLIB_PATH: ONNX Runtime is loaded at run time
//! cargo run --release --example host [STORE_DIR]
//! ```
//!
//! Without `STORE_DIR` the store goes to a temporary directory, removed at the end. The
//! models are read from `models/` of this repository. The library never prints: the host
//! does, here on stdout.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use trellis::generate::Generator;
use trellis::ingest::{BulkLoader, InputSpec, NameTokenizer};
use trellis::link::{Linker, Message};
use trellis::model::ModelDir;
use trellis::pipeline::{Pipeline, PipelineRequest};
use trellis::retrieve::Retriever;
use trellis::settings::{PipelineSpec, Settings};
use trellis::{Monitor, Store};

fn main() -> Result<(), trellis::Error> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = tempfile::tempdir().map_err(|e| trellis::ingest::IngestError::Io { path: std::env::temp_dir(), source: e })?;
    let dir: PathBuf = std::env::args_os().nth(1).map_or_else(|| scratch.path().join("kg"), PathBuf::from);
    let gsr_model = repo.join("models/gsr-opendialkg");

    // 1. Load the graph (a second load would add to it), with progress on stderr.
    let monitor = Monitor::with_callback(|p| eprintln!("  {} {}/{} {}", p.stage, p.done, p.total.unwrap_or(0), p.unit.name()));
    let report = BulkLoader::new(&dir).with_monitor(monitor.clone()).load(&[InputSpec::new(repo.join("tests/fixtures/opendialkg-sample.tsv"))])?;
    println!("loaded {} facts, {} entities", report.new_facts, report.new_entities);

    // 2. The generative retriever decodes over the store's token index of its tokenizer:
    //    built once per store and tokenizer (as `trellis index-tokens`).
    let spec = ModelDir::open_spec(&gsr_model)?;
    let names = NameTokenizer::from_file(&gsr_model.join("tokenizer.json"), spec.linearization().clone())?;
    Store::index_tokens(&dir, &names, "gsr-opendialkg", &monitor)?;

    // 3. Read: one handle, shared by every thread of the host.
    let store = Arc::new(Store::open_read_only(&dir)?);
    let spieth = store.entities_named("jordan spieth")?[0];
    let mut facts = 0;
    store.for_each_neighbor(spieth, None, None, |_| {
        facts += 1;
        ControlFlow::Continue(())
    })?;
    println!("Jordan Spieth has {facts} facts");

    // 4. Link a dialog.
    let history = [
        Message { speaker: "user".into(), text: "I loved Happy Gilmore.".into() },
        Message { speaker: "assistant".into(), text: "Me too, Adam Sandler is so funny. Do you like him?".into() },
    ];
    let linker = Linker::new(store.clone(), trellis::settings::link(&Settings::new())?)?;
    for m in linker.link_dialog(&history)? {
        println!("mention {:?} -> {}", m.text, m.entities.first().map_or("-", |e| e.name.as_str()));
    }

    // 5. Retrieve: settings by name, checked by the library as for the command line and
    //    Python (`--bm25-turns 2` there, `bm25_turns=2` in Python).
    let mut pcst_settings = Settings::new();
    pcst_settings.set("bm25_turns", "2");
    let pcst = Retriever::new(store.clone(), trellis::settings::retriever("pcst", &pcst_settings)?)?;
    let best = pcst.retrieve(&history)?;
    println!("pcst: {} paths, best {}", best.len(), best.first().map_or_else(String::new, |p| pcst.verbalize(&p.hops).unwrap_or_default()));

    // 6. The whole chain with the shipped models: retrieve with gsr, reply with the generator.
    let mut chain = Settings::new();
    chain.set("model", gsr_model.display().to_string()).set("gen_max_new_tokens", "32");
    let spec = PipelineSpec::read("gsr", &chain)?;
    let retriever = Retriever::new(store.clone(), spec.retriever.clone())?;
    let generator = Generator::open(&repo.join("models/generator-opendialkg"), &spec.runtime)?;
    let settings = trellis::pipeline::PipelineSettings::new(3, spec.generator.apply(generator.settings())?);
    let pipeline = Arc::new(Pipeline::new(retriever, generator, Some(settings))?);
    let reply = pipeline.respond(&PipelineRequest::new(&history))?;
    println!("reply: {}", reply.text());
    println!(
        "knowledge: {} paths; link {:.1} ms, retrieve {:.1} ms, generate {:.1} ms",
        reply.knowledge.len(),
        reply.timings.link_ms,
        reply.timings.retrieve_ms,
        reply.timings.generate_ms
    );
    Ok(())
}
