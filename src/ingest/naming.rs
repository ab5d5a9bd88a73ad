//! RDF naming rules: the name a term gets when no label names it, which label names which
//! relation, and the keys of blank nodes.

use crate::store::codec::TermKind;

/// The name of a term without a label: a plain name is itself, an IRI its local name, a
/// literal its lexical form, a blank node its label as the file wrote it (`_:b1`).
pub(crate) fn default_name(key: &str, kind: TermKind, carried: Option<&str>) -> String {
    match kind {
        TermKind::Name => key.to_owned(),
        TermKind::Blank => blank_label(key),
        TermKind::Literal => carried.map_or_else(|| key.to_owned(), str::to_owned),
        TermKind::Iri => local_name(key).to_owned(),
    }
}

/// The key prefix of the blank nodes of input `input` of load `load` (both counted from 1,
/// as the store's `loads` records list loads and their inputs): `_:b1` there is the entity
/// `_:LOAD.INPUT/b1`. A blank node label names one node within its file only (RDF), so
/// `_:b1` of two files are two entities, within one load and across loads. A label never
/// holds `/`, so these keys never meet each other, nor the `_:b1` keys that loads wrote
/// before blank nodes were scoped.
pub(crate) fn blank_prefix(load: usize, input: usize) -> String {
    format!("_:{load}.{input}/")
}

/// `_:1.2/b1` -> `_:b1`; a key from before scoping is its own label.
pub(crate) fn blank_label(key: &str) -> String {
    match key.strip_prefix("_:").and_then(|scoped| scoped.split_once('/')) {
        Some((_, label)) => format!("_:{label}"),
        None => key.to_owned(),
    }
}

/// `http://rdf.freebase.com/ns/m.027rn` -> `m.027rn`; `http://x/y#z` -> `z`.
pub(crate) fn local_name(iri: &str) -> &str {
    let trimmed = iri.trim_end_matches(['/', '#']);
    match trimmed.rfind(['/', '#', ':']) {
        Some(i) if i + 1 < trimmed.len() => &trimmed[i + 1..],
        _ => iri,
    }
}

/// Wikidata labels properties on their entity IRI (`.../entity/P161`) while facts use the
/// direct-claim IRI (`.../prop/direct/P161`): the label of the one names the other.
pub(super) fn wikidata_property_entity(iri: &str) -> Option<String> {
    let (base, local) = iri.rsplit_once("/prop/direct/")?;
    Some(format!("{base}/entity/{local}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_names() {
        assert_eq!(local_name("http://rdf.freebase.com/ns/m.027rn"), "m.027rn");
        assert_eq!(local_name("http://www.wikidata.org/entity/Q42"), "Q42");
        assert_eq!(local_name("http://x.org/onto#Person"), "Person");
        assert_eq!(local_name("http://x.org/dir/"), "dir");
        assert_eq!(local_name("urn:isbn:123"), "123");
    }

    #[test]
    fn blank_node_keys_carry_their_label() {
        let key = format!("{}b1", blank_prefix(3, 12));
        assert_eq!(key, "_:3.12/b1");
        assert_eq!(default_name(&key, TermKind::Blank, None), "_:b1");
        // Labels may hold `.`, `-` and `:` (N-Triples), never `/`.
        assert_eq!(blank_label("_:1.1/a.b-c:d"), "_:a.b-c:d");
        assert_eq!(blank_label("_:b1"), "_:b1");
    }

    #[test]
    fn wikidata_property_labels() {
        assert_eq!(wikidata_property_entity("http://www.wikidata.org/prop/direct/P161").as_deref(), Some("http://www.wikidata.org/entity/P161"));
        assert_eq!(wikidata_property_entity("http://x/p"), None);
    }
}
