//! Options shared by the commands that read OpenDialKG dialogs (`eval`, `eval pipeline`,
//! `targets`): which path actions are the samples.

use trellis::dataset::opendialkg::{self, Dialog};

/// Whose path actions are evaluated (OpenDialKG: both the user and the assistant pick
/// facts from the graph; about a third of the dev actions are the user's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Actions {
    /// Every action with a gold path, whoever took it.
    All,
    /// The assistant's actions only.
    Assistant,
    /// The user's actions only.
    User,
}

#[derive(clap::Args, Clone, Copy)]
pub struct ActionsOption {
    /// Whose path actions are the samples.
    #[arg(long, value_enum, default_value_t = Actions::All)]
    actions: Actions,
}

impl ActionsOption {
    /// Whether every sample is kept (the default).
    pub fn is_all(self) -> bool {
        matches!(self.actions, Actions::All)
    }

    pub fn apply(self, dialogs: &mut [Dialog]) {
        match self.actions {
            Actions::All => {}
            Actions::Assistant => opendialkg::keep_samples_of(dialogs, "assistant"),
            Actions::User => opendialkg::keep_samples_of(dialogs, "user"),
        }
    }
}

/// Keeps the first `n` samples of the file, in order.
pub(super) fn keep_first_samples(dialogs: &mut [Dialog], mut n: usize) {
    for d in dialogs {
        let keep = d.samples.len().min(n);
        d.samples.truncate(keep);
        n -= keep;
    }
}
