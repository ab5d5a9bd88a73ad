//! The library's settings as flags: each setting of `trellis::settings`' tables is a flag
//! (`rerank_top` is `--rerank-top`), and the flags a user gave are handed to the library as
//! text, unchecked: the library checks values and combinations, and gives the defaults, as
//! it does for Python. Only the syntax is the command line's.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use trellis::settings::{Settings, Spec, GENERATOR, LINK, PIPELINE, RETRIEVER, RUNTIME, VECTORS};

/// The flags of `tables` on `cmd`, their names prefixed with `prefix`.
fn augment(mut cmd: Command, tables: &[&[Spec]], prefix: &str) -> Command {
    for spec in tables.iter().flat_map(|t| t.iter()) {
        let id = format!("{prefix}{}", spec.name);
        let mut help = spec.help.to_owned();
        if let Some(default) = spec.default {
            help.push_str(&format!(" [default: {}]", default()));
        }
        if !spec.choices.is_empty() {
            help.push_str(&format!(" [possible values: {}]", spec.choices.join(", ")));
        }
        let flag = spec.flag(prefix);
        if spec.switch {
            // A flag without a value: given, it hands the library `true`.
            cmd = cmd.arg(Arg::new(id).long(flag.trim_start_matches("--").to_owned()).help(help).action(ArgAction::SetTrue));
            continue;
        }
        let mut arg = Arg::new(id)
            .long(flag.trim_start_matches("--").to_owned())
            .value_name(spec.value)
            .help(help)
            // Numbers may be negative: the library refuses them with the range.
            .allow_hyphen_values(true);
        arg = if spec.list { arg.action(ArgAction::Append) } else { arg.action(ArgAction::Set) };
        cmd = cmd.arg(arg);
    }
    cmd
}

/// The settings of `tables` the user gave, by the names the library reads them under
/// (with `prefix`: a pipeline reads its generator's as `gen_beams`).
fn collect(m: &ArgMatches, tables: &[&[Spec]], prefix: &str) -> Settings {
    let mut s = Settings::new();
    for spec in tables.iter().flat_map(|t| t.iter()) {
        let id = format!("{prefix}{}", spec.name);
        if spec.switch {
            if m.try_get_one::<bool>(&id).ok().flatten() == Some(&true) {
                s.set(id, "true");
            }
            continue;
        }
        if let Ok(Some(values)) = m.try_get_many::<String>(&id) {
            s.set_list(id, values.cloned());
        }
    }
    s
}

/// A group of settings as flags: the tables' settings with `prefix` before each name,
/// collected as given.
macro_rules! setting_flags {
    ($(#[$doc:meta])* $name:ident, [$($table:ident),+], $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default)]
        pub struct $name(pub Settings);

        impl FromArgMatches for $name {
            fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
                Ok($name(collect(m, &[$($table),+], $prefix)))
            }

            fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
                *self = Self::from_arg_matches(m)?;
                Ok(())
            }
        }

        impl Args for $name {
            fn augment_args(cmd: Command) -> Command {
                augment(cmd, &[$($table),+], $prefix)
            }

            fn augment_args_for_update(cmd: Command) -> Command {
                Self::augment_args(cmd)
            }
        }
    };
}

setting_flags!(
    /// A retriever's settings as flags: the retriever's, the linker's and the runtime's.
    RetrieverFlags,
    [RETRIEVER, LINK, RUNTIME],
    ""
);
setting_flags!(
    /// The vector index's settings as flags: the bi-encoder and the runtime's.
    VectorFlags,
    [VECTORS, RUNTIME],
    ""
);
setting_flags!(
    /// The linker's settings as flags.
    LinkFlags,
    [LINK],
    ""
);
setting_flags!(
    /// A pipeline's generator settings as flags, `--gen-` before each name.
    GeneratorFlags,
    [GENERATOR],
    "gen_"
);
setting_flags!(
    /// A pipeline's own settings as flags (`--checker`, `--gen-check`, `--gen-rewrite`).
    CheckFlags,
    [PIPELINE],
    ""
);
