//! RDF naming rules: the name a term gets when no label names it, and which label names
//! which relation.

use crate::store::codec::TermKind;

/// The name of a term without a label: a plain name is itself, an IRI its local name, a
/// literal its lexical form.
pub(crate) fn default_name(key: &str, kind: TermKind, carried: Option<&str>) -> String {
    match kind {
        TermKind::Name | TermKind::Blank => key.to_owned(),
        TermKind::Literal => carried.map_or_else(|| key.to_owned(), str::to_owned),
        TermKind::Iri => local_name(key).to_owned(),
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
    fn wikidata_property_labels() {
        assert_eq!(
            wikidata_property_entity("http://www.wikidata.org/prop/direct/P161").as_deref(),
            Some("http://www.wikidata.org/entity/P161")
        );
        assert_eq!(wikidata_property_entity("http://x/p"), None);
    }
}
