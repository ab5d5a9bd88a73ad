//! Integration tests: the real `trellis` binary on real files.

mod bad_input;
mod bounds;
mod cli;
mod common;
mod crash;
mod encoders;
mod generate;
mod graph;
mod gsr;
mod layers;
mod library;
mod linking;
mod metrics;
mod model;
mod pipeline;
mod progress;
mod readers;
mod real_data;
mod resume;
mod retrieval;
mod shipped_model;
mod surge;
mod targets;
mod tokens;
