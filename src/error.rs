//! [`Error`]: every error family of the library in one type, for applications that want
//! one. Each operation returns its own narrow enum (beside the operation: the store's in
//! `store::error`, the retriever's in `retrieve`, ...), which converts into this. The top of
//! the layering (ARCHITECTURE.md): it names every family, so nothing below imports it.

use crate::store::error::{MigrateError, OpenError, ReadError, WriteError};

/// Any library error, for applications that want one type; each operation returns its
/// own narrow enum, which converts into this.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening a store.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Reading an open store.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Writing a new generation.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// Migrating a store.
    #[error(transparent)]
    Migrate(#[from] MigrateError),
    /// Opening a token index.
    #[error(transparent)]
    TokenIndex(#[from] crate::store::tokens::TokenIndexError),
    /// A bulk load.
    #[error(transparent)]
    Ingest(#[from] crate::ingest::IngestError),
    /// Loading or using a tokenizer.
    #[error(transparent)]
    Tokenizer(#[from] crate::ingest::TokenizerError),
    /// The PCST solver.
    #[error(transparent)]
    Pcst(#[from] crate::graph::pcst::PcstError),
    /// Reading a data set.
    #[error(transparent)]
    Dataset(#[from] crate::dataset::DatasetError),
    /// The constraint automaton.
    #[error(transparent)]
    Decode(#[from] crate::decode::DecodeError),
    /// Loading ONNX Runtime.
    #[error(transparent)]
    Runtime(#[from] crate::model::RuntimeError),
    /// A model directory.
    #[error(transparent)]
    ModelDir(#[from] crate::model::ModelDirError),
    /// Running the encoder-decoder.
    #[error(transparent)]
    Seq2Seq(#[from] crate::model::Seq2SeqError),
    /// An encoder model (dense, rerank, subgraph): loading or running it.
    #[error(transparent)]
    Encoder(#[from] crate::model::encoder::EncoderError),
    /// A retriever.
    #[error(transparent)]
    Retrieve(#[from] crate::retrieve::RetrieveError),
    /// The generative retriever.
    #[error(transparent)]
    Gsr(#[from] crate::retrieve::gsr::GsrError),
    /// The response generator.
    #[error(transparent)]
    Generate(#[from] crate::generate::GenerateError),
    /// A generator input template.
    #[error(transparent)]
    Template(#[from] crate::generate::TemplateError),
    /// A change of an update given as JSON (`Change::from_json`).
    #[error(transparent)]
    Change(#[from] crate::ingest::ChangeFileProblem),
    /// One change of an update that cannot be applied (listed in reports and refusals).
    #[error(transparent)]
    Update(#[from] crate::ingest::UpdateProblem),
    /// A request line of `retrieve` (its JSON, history or entities).
    #[error(transparent)]
    Request(#[from] crate::retrieve::jsonl::RequestError),
    /// Answering a request line.
    #[error(transparent)]
    Answer(#[from] crate::retrieve::jsonl::AnswerError),
    /// A request line of `run` (a retrieve request, given knowledge, a seed).
    #[error(transparent)]
    Line(#[from] crate::pipeline::jsonl::LineError),
    /// The link, retrieve, generate chain.
    #[error(transparent)]
    Pipeline(#[from] crate::pipeline::PipelineError),
    /// `trellis doctor`'s checks.
    #[error(transparent)]
    Doctor(#[from] crate::pipeline::doctor::DoctorError),
    /// Reading a linearization.
    #[error(transparent)]
    Linearize(#[from] crate::linearize::LinearizeError),
    /// Scoring responses.
    #[error(transparent)]
    Responses(#[from] crate::eval::responses::ResponsesError),
    /// Evaluating the whole chain.
    #[error(transparent)]
    PipelineEval(#[from] crate::eval::pipeline::PipelineEvalError),
    /// The linking evaluation's matcher.
    #[error(transparent)]
    Matcher(#[from] crate::eval::linking::MatcherError),
    /// A setting outside its range (`crate::limits`).
    #[error(transparent)]
    Setting(#[from] crate::limits::OutOfRange),
    /// Settings given by name that do not go together or are unknown (`crate::settings`).
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingError),
    /// Decoding memory that no batch size fits.
    #[error(transparent)]
    Memory(#[from] crate::limits::TooMuchMemory),
    /// The text index (building, opening, searching it).
    #[error(transparent)]
    Text(#[from] crate::text::TextError),
    /// A store's vector index (`crate::vectors`).
    #[error(transparent)]
    Vectors(#[from] crate::vectors::VectorsError),
    /// The query producer.
    #[error(transparent)]
    Query(#[from] crate::queries::QueryError),
    /// The query producer's scorer file.
    #[error(transparent)]
    Scorer(#[from] crate::queries::ScorerError),
    /// The fact checker's file.
    #[error(transparent)]
    Checker(#[from] crate::check::CheckerError),
    /// Making a fact checker.
    #[error(transparent)]
    FactCheck(#[from] crate::check::FactCheckError),
    /// A `trellis check` input line.
    #[error(transparent)]
    CheckLine(#[from] crate::pipeline::jsonl::CheckLineError),
    /// Work stopped by its [`Monitor`](crate::progress::Monitor), outside any family.
    #[error(transparent)]
    Cancelled(#[from] crate::progress::Cancelled),
}

impl Error {
    /// Whether this is long work stopped by its [`Monitor`](crate::progress::Monitor),
    /// whichever family reported it (a host maps it to its own interruption, such as
    /// Python's KeyboardInterrupt, rather than to a failure).
    pub fn is_cancelled(&self) -> bool {
        use crate::eval::pipeline::PipelineEvalError;
        use crate::ingest::IngestError;
        use crate::pipeline::PipelineError;
        use crate::retrieve::RetrieveError;
        matches!(
            self,
            Error::Cancelled(_)
                | Error::Ingest(IngestError::Cancelled)
                | Error::Text(crate::text::TextError::Cancelled)
                | Error::Vectors(crate::vectors::VectorsError::Cancelled)
                | Error::Retrieve(RetrieveError::Cancelled)
                | Error::Pipeline(PipelineError::Cancelled | PipelineError::Retrieve(RetrieveError::Cancelled))
                | Error::PipelineEval(PipelineEvalError::Pipeline(PipelineError::Cancelled | PipelineError::Retrieve(RetrieveError::Cancelled)))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancellation_is_recognised_in_every_family() {
        use crate::pipeline::PipelineError;
        use crate::retrieve::RetrieveError;
        let cancelled: Vec<Error> = vec![
            crate::progress::Cancelled.into(),
            crate::ingest::IngestError::Cancelled.into(),
            RetrieveError::Cancelled.into(),
            PipelineError::Cancelled.into(),
            PipelineError::Retrieve(RetrieveError::Cancelled).into(),
            crate::eval::pipeline::PipelineEvalError::Pipeline(PipelineError::Cancelled).into(),
        ];
        for e in cancelled {
            assert!(e.is_cancelled(), "{e:?}");
        }
        let failed: Error = RetrieveError::Pcst(crate::graph::pcst::PcstError::NoClusters).into();
        assert!(!failed.is_cancelled());
    }

    #[test]
    fn every_family_converts_into_the_umbrella() {
        let e: Error = ReadError::corrupt("meta", b"k", "no meta record").into();
        assert!(matches!(e, Error::Read(ReadError::Corrupt { cf: "meta", .. })));
        let e: Error = crate::retrieve::RetrieveError::Pcst(crate::graph::pcst::PcstError::NoClusters).into();
        assert!(e.to_string().starts_with("prize-collecting Steiner tree: "), "{e}");
        let e: Error = crate::decode::DecodeError::ForeignState.into();
        assert!(matches!(e, Error::Decode(crate::decode::DecodeError::ForeignState)));
        let e: Error = crate::retrieve::gsr::GsrError::Setting(crate::limits::BEAMS.refuse(0)).into();
        assert_eq!(e.to_string(), "beams must be within 1..=64, not 0");
        let e: Error = crate::generate::GenerateError::Setting(crate::limits::BEAMS.refuse(0)).into();
        assert!(matches!(e, Error::Generate(crate::generate::GenerateError::Setting(_))), "{e:?}");
        let e: Error = crate::graph::pcst::PcstError::NoClusters.into();
        assert!(matches!(e, Error::Pcst(_)), "{e:?}");
        let e: Error = crate::model::ModelDirError::NotADirectory { path: "/m".into() }.into();
        assert_eq!(e.to_string(), "/m: not a model directory (no such directory)");
        let e: Error = crate::limits::BEAMS.refuse(0).into();
        assert!(matches!(e, Error::Setting(_)), "{e:?}");
    }
}
