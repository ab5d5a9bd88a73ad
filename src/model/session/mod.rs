//! The T5 encoder-decoder on ONNX Runtime: a [`Seq2Seq`] handle built once and shared by
//! threads, holding a pool of sessions (`Session::run` takes `&mut self`), and the calls a
//! beam search makes: encode a batch once, start a decoder state with one row per beam,
//! step it one token (or several) per row, reorder its rows between steps.
//!
//! The KV cache stays in ONNX Runtime values from one step to the next: a step's
//! `present.*` outputs become the next step's `past_key_values.*` inputs without a copy.
//! Between steps only a reorder copies, and only what moved (`model::cache`): rows of the
//! self-attention cache are rewritten in place, in the step's own output, when a beam
//! branched (the beam search keeps a beam in its parent's row where it can); the
//! cross-attention K/V (computed once, at the first decoder step) move only when the
//! row -> input mapping changes: copied once into a reused buffer when the beams open,
//! compacted in place when finished inputs leave. Views of the kept rows are fed back.
//!
//! CUDA (`Device::Cuda`): the provider is registered with error-on-failure (never a silent
//! CPU fallback), decoder steps go through an `IoBinding` whose `present.*` outputs stay in
//! device memory and feed the next step there, logits come back to the host, and a reorder
//! gathers rows on the device with a one-node `Gather` graph built in memory. The same
//! binding path runs on CPU with [`RuntimeOptions::io_binding`] (the tests compare it with
//! the plain path); on CUDA it has not been run here (no GPU on this machine). Known cost
//! there: a graph that takes `encoder_hidden_states` at every step (the merged layout)
//! gets them copied from the host at each step; the split layout's with-past graph does
//! not take them.

mod error;
mod options;
mod pool;
mod reorder;
mod steps;

pub use crate::model::interface::{InterfaceIssue, InterfaceProblem};
pub use error::{CallError, ListedProblem, OutputProblem, Seq2SeqError};
pub use options::{Device, RuntimeOptions};
pub(crate) use pool::{builder, commit};
pub use pool::{GraphReport, Seq2Seq, SessionGuard, StepTimings, LISTED_SOURCE_KEY};
pub use steps::{padded_batch_length, DecoderState, Encoded, SessionSteps, PAD_MULTIPLE};

type Result<T, E = Seq2SeqError> = std::result::Result<T, E>;

// The handle a host application builds once and shares across threads.
const _: () = {
    const fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Seq2Seq>();
    const fn sendable<T: Send + 'static>() {}
    sendable::<DecoderState>();
    sendable::<Encoded>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::dir::Layout;
    use crate::model::interface::Names;

    /// The default pool is one session per core, the cores shared between them; numbers
    /// given are kept.
    #[test]
    fn the_default_pool_serves_every_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let d = RuntimeOptions::default().resolved();
        assert_eq!((d.sessions, d.threads), (cores, 1), "{cores} cores");
        let o = RuntimeOptions { threads: 3, ..RuntimeOptions::default() };
        assert_eq!((o.resolved().sessions, o.resolved().threads), (cores, 3));
        let o = RuntimeOptions { sessions: 2, threads: 0, ..RuntimeOptions::default() };
        assert_eq!((o.resolved().sessions, o.resolved().threads), (2, 0), "0 threads: ONNX Runtime's own default");
    }

    #[test]
    fn devices_parse_and_print() {
        assert_eq!("cpu".parse::<Device>(), Ok(Device::Cpu));
        assert_eq!("cuda".parse::<Device>(), Ok(Device::Cuda(0)));
        assert_eq!("cuda:3".parse::<Device>(), Ok(Device::Cuda(3)));
        for bad in ["gpu", "cuda:", "cuda:x", "cuda:-1", "CPU"] {
            assert!(bad.parse::<Device>().is_err(), "{bad}");
        }
        assert_eq!(Device::Cuda(2).to_string(), "cuda:2");
        assert_eq!("merged".parse::<Layout>(), Ok(Layout::Merged));
        assert!("both".parse::<Layout>().is_err());
    }

    #[test]
    fn layer_names_follow_optimum() {
        let n = Names::new(2);
        assert_eq!(
            n.past_self,
            ["past_key_values.0.decoder.key", "past_key_values.0.decoder.value", "past_key_values.1.decoder.key", "past_key_values.1.decoder.value"]
        );
        assert_eq!(n.present_cross[3], "present.1.encoder.value");
    }
}
