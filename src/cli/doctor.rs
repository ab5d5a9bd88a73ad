//! `trellis doctor`: is the ONNX Runtime library there and usable, and is a model
//! directory what the decoder needs. Exit 0 when all is well, 65 when the model has
//! problems (each printed as one sentence), 1 when the runtime or the device cannot be used.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::limits;
use trellis::model::{Device, Layout};
use trellis::pipeline::doctor::{doctor, DoctorOptions};

#[derive(Args)]
pub struct DoctorArgs {
    /// A model directory to check (optimum-layout ONNX files, tokenizer.json, config.json,
    /// trellis.json): a T5 retriever or generator, or an encoder (trellis.json task dense or
    /// rerank), which also runs one trial input.
    #[arg(long)]
    model: Option<PathBuf>,
    /// cpu, cuda or cuda:N. CUDA is registered with error-on-failure: no silent CPU fallback.
    #[arg(long, default_value = "cpu", value_parser = parse_device)]
    device: Device,
    /// Intra-op threads per session (0: ONNX Runtime's default).
    #[arg(long, default_value_t = 0, value_parser = super::usize_in(&limits::MODEL_THREADS), allow_hyphen_values = true)]
    threads: usize,
    /// Force the split or merged decoder layout.
    #[arg(long, value_parser = parse_layout)]
    layout: Option<Layout>,
    #[arg(long)]
    json: bool,
}

fn parse_device(s: &str) -> Result<Device, trellis::limits::UnknownName> {
    s.parse()
}

fn parse_layout(s: &str) -> Result<Layout, trellis::limits::UnknownName> {
    s.parse()
}

pub fn run(args: DoctorArgs) -> Result<ExitCode> {
    let mut opts = DoctorOptions::default();
    (opts.model, opts.device, opts.threads, opts.layout) = (args.model, args.device, args.threads, args.layout);
    let report = doctor(&opts)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let rt = &report.runtime;
        outln!("onnx runtime: {} ({}, found by {})", rt.version, rt.library.display(), rt.found_by);
        outln!("execution providers: {}", rt.providers.join(", "));
        outln!("device: {}", report.device);
        if let Some(m) = &report.model {
            outln!("model: {}", m.path.display());
            outln!("  layout: {}", m.layout);
            outln!(
                "  config: vocabulary {} (tokenizer {}), d_model {}, {}+{} layers, {} heads of {}",
                m.vocab_size,
                m.tokenizer_tokens,
                m.d_model,
                m.encoder_layers,
                m.decoder_layers,
                m.heads,
                m.d_kv
            );
            outln!("  trellis.json: {} (linearization {})", if m.trellis_json { "read" } else { "absent, defaults used" }, m.linearization);
            for g in &m.graphs {
                outln!("  {}: {} inputs, {} outputs, checked", g.file.display(), g.inputs.len(), g.outputs.len());
            }
        }
        if let Some(e) = &report.encoder {
            outln!("model: {}", e.path.display());
            let mut parts = vec![format!("encoder: {}", e.task)];
            if let Some(p) = e.pooling {
                parts.push(format!("pooling {p}"));
            }
            if let Some(n) = e.normalize {
                parts.push(format!("normalized {}", if n { "yes" } else { "no" }));
            }
            parts.push(format!("max_length {}, query of the last {} messages, tokenizer {} tokens", e.max_length, e.turns, e.tokenizer_tokens));
            if let Some(d) = e.dimension {
                parts.push(format!("vectors of {d}"));
            }
            outln!("  {}", parts.join(", "));
            for g in &e.graphs {
                outln!("  {}: {} inputs, {} outputs, checked, ran a trial input", g.file.display(), g.inputs.len(), g.outputs.len());
            }
        }
        for p in &report.problems {
            outln!("problem: {p}");
        }
        outln!("{}", if report.ok { "ok" } else { "not ok" });
    }
    Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_DATA_ERROR) })
}
