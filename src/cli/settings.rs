//! The library's settings as flags: each setting of `trellis::settings`' tables is a flag
//! (`rerank_top` is `--rerank-top`), and the flags a user gave are handed to the library as
//! text, unchecked: the library checks values and combinations, and gives the defaults, as
//! it does for Python. Only the syntax is the command line's.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use trellis::settings::{Settings, Spec, GENERATOR, LINK, RETRIEVER, RUNTIME};

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

/// The settings of `tables` the user gave, by their library names (without `prefix` when
/// `keep_prefix` is false).
fn collect(m: &ArgMatches, tables: &[&[Spec]], prefix: &str, keep_prefix: bool) -> Settings {
    let mut s = Settings::new();
    for spec in tables.iter().flat_map(|t| t.iter()) {
        let id = format!("{prefix}{}", spec.name);
        if let Ok(Some(values)) = m.try_get_many::<String>(&id) {
            let name = if keep_prefix { id } else { spec.name.to_owned() };
            s.set_list(name, values.cloned());
        }
    }
    s
}

/// A retriever's settings as flags: the retriever's, the linker's and the runtime's.
#[derive(Clone, Debug, Default)]
pub struct RetrieverFlags(pub Settings);

impl FromArgMatches for RetrieverFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(RetrieverFlags(collect(m, &[RETRIEVER, LINK, RUNTIME], "", true)))
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for RetrieverFlags {
    fn augment_args(cmd: Command) -> Command {
        augment(cmd, &[RETRIEVER, LINK, RUNTIME], "")
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// The linker's settings as flags.
#[derive(Clone, Debug, Default)]
pub struct LinkFlags(pub Settings);

impl FromArgMatches for LinkFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(LinkFlags(collect(m, &[LINK], "", true)))
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for LinkFlags {
    fn augment_args(cmd: Command) -> Command {
        augment(cmd, &[LINK], "")
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// A pipeline's generator settings as flags, `--gen-` before each name; handed over as
/// the pipeline reads them (`gen_beams`).
#[derive(Clone, Debug, Default)]
pub struct GeneratorFlags(pub Settings);

impl FromArgMatches for GeneratorFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(GeneratorFlags(collect(m, &[GENERATOR], "gen_", true)))
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for GeneratorFlags {
    fn augment_args(cmd: Command) -> Command {
        augment(cmd, &[GENERATOR], "gen_")
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}
