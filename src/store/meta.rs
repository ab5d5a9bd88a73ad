//! The meta record: format version, counts, who created the store, what was loaded.

use serde::{Deserialize, Serialize};

/// Key of the format version in `meta` (value: u32 BE). Read on every open.
pub const KEY_FORMAT_VERSION: &[u8] = b"format_version";
/// Key of the JSON meta document in `meta`.
pub const KEY_META: &[u8] = b"meta";

/// The JSON document under `meta/meta`. Unknown fields are kept out of the spec on purpose:
/// a reader must accept documents with extra fields (added by later versions).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    /// The store's on-disk format version.
    pub format_version: u32,
    /// `trellis <version>` of the build that created the store.
    pub created_by: String,
    /// `trellis <version>` of the build that last wrote it.
    pub updated_by: String,
    /// Entities in the dictionary.
    pub entities: u64,
    /// Relations in the dictionary.
    pub relations: u64,
    /// Facts (distinct triples).
    pub facts: u64,
    /// Entries in the `names` index (primary names and aliases of entities and relations).
    pub names: u64,
    /// Aliases of entities (names beyond their primary one).
    pub aliases: u64,
    /// The prefix that marked reverse relations in the loads (`~` by default).
    pub reverse_prefix: String,
    /// Every load committed into this store, oldest first.
    pub loads: Vec<LoadRecord>,
    /// Raised by every write that adds or renames an entity or relation (new in format 3):
    /// a token index records the value it was built at, and is stale when it differs.
    #[serde(default)]
    pub dictionary_epoch: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LoadRecord {
    /// Seconds since the Unix epoch when the load was committed.
    pub committed_at: u64,
    pub inputs: Vec<InputRecord>,
    pub new_facts: u64,
    pub new_entities: u64,
    pub new_relations: u64,
    pub rejected_lines: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct InputRecord {
    pub path: String,
    pub format: String,
    pub lines: u64,
    pub facts_read: u64,
    pub rejected: u64,
}
