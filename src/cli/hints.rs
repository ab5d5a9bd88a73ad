//! The command that provides what a library error says a store lacks (a migration, a token
//! index, the store itself): the library says what is needed, the command line how.

use std::path::Path;
use trellis::linearize::Linearization;
use trellis::store::tokens::TokenIndexError;
use trellis::{IngestError, MigrateError, OpenError};

/// The command for the first error of `err`'s chain that one command fixes, if any.
pub fn command_hint(err: &anyhow::Error) -> Option<String> {
    err.chain().find_map(hint_for)
}

/// One error of a chain, seen through the transparent wrappers (`trellis::Error`, a loader's
/// or a migration's open error), which the chain does not list on their own.
fn hint_for(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    if let Some(e) = e.downcast_ref::<OpenError>() {
        return open_hint(e);
    }
    if let Some(e) = e.downcast_ref::<TokenIndexError>() {
        return token_index_hint(e);
    }
    if let Some(IngestError::Open(e)) = e.downcast_ref::<IngestError>() {
        return open_hint(e);
    }
    if let Some(MigrateError::Open(e)) = e.downcast_ref::<MigrateError>() {
        return open_hint(e);
    }
    match e.downcast_ref::<trellis::Error>()? {
        trellis::Error::Open(e) | trellis::Error::Ingest(IngestError::Open(e)) | trellis::Error::Migrate(MigrateError::Open(e)) => open_hint(e),
        trellis::Error::TokenIndex(e) => token_index_hint(e),
        _ => None,
    }
}

fn open_hint(e: &OpenError) -> Option<String> {
    match e {
        OpenError::NotAStore { path } | OpenError::Missing { path } => Some(format!("create one with `trellis ingest --store {} FILE`", shell_word(path))),
        OpenError::NeedsMigration { path, .. } => Some(format!("run `trellis migrate --store {}`", shell_word(path))),
        _ => None,
    }
}

fn token_index_hint(e: &TokenIndexError) -> Option<String> {
    // The tokenizer file when the library knew it (a model's), else a placeholder.
    let file = |t: &Option<Box<std::path::PathBuf>>| t.as_deref().map_or_else(|| "FILE".to_owned(), |p| shell_word(p));
    match e {
        TokenIndexError::NotIndexed { path, tokenizer, .. } => {
            Some(format!("run `trellis index-tokens --store {} --tokenizer {}`", shell_word(path), file(tokenizer)))
        }
        TokenIndexError::Stale { path, info, tokenizer, .. } => Some(format!(
            "run `trellis index-tokens --store {} --tokenizer {} --linearization {}` again",
            shell_word(path),
            file(tokenizer),
            linearization_arg(&info.linearization)
        )),
        TokenIndexError::Linearization { path, wanted, tokenizer, .. } => {
            let wanted = if matches!(*wanted, "trellis" | "dialoggsr") { wanted } else { "FILE.json" };
            Some(format!("run `trellis index-tokens --store {} --tokenizer {} --linearization {wanted}`", shell_word(path), file(tokenizer)))
        }
        _ => None,
    }
}

/// How `--linearization` names a linearization: a preset by its name, else a file.
fn linearization_arg(l: &Linearization) -> &'static str {
    match l.name.as_str() {
        "trellis" if *l == Linearization::trellis() => "trellis",
        "dialoggsr" if *l == Linearization::dialoggsr() => "dialoggsr",
        _ => "FILE.json",
    }
}

/// A path as one shell word, ready to paste: as it is when it needs no quoting, else in
/// single quotes.
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+:=@,".contains(&b)) {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_for_a_shell_only_where_needed() {
        assert_eq!(shell_word(Path::new("/data/kg-1/tokenizer.json")), "/data/kg-1/tokenizer.json");
        assert_eq!(shell_word(Path::new("/m/it's here/tokenizer.json")), r"'/m/it'\''s here/tokenizer.json'");
        assert_eq!(shell_word(Path::new("")), "''");
    }

    #[test]
    fn the_hint_is_found_behind_a_transparent_wrapper_and_a_context() {
        let open = OpenError::NeedsMigration { path: "/data/my kg".into(), found: 2, current: 3 };
        let err = anyhow::Error::from(trellis::Error::from(MigrateError::from(open))).context("opening the store");
        assert_eq!(command_hint(&err).as_deref(), Some("run `trellis migrate --store '/data/my kg'`"));
        let err = anyhow::Error::from(IngestError::from(OpenError::NotAStore { path: "/s".into() }));
        assert_eq!(command_hint(&err).as_deref(), Some("create one with `trellis ingest --store /s FILE`"));
        assert_eq!(command_hint(&anyhow::anyhow!("something else")), None);
    }
}
