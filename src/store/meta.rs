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
    /// Entities deleted by updates (format 4): their ids stay taken, listed in `retired`.
    #[serde(default)]
    pub retired: u64,
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
    /// The source named by `--source` (format 4): `update --retract-source NAME` removes
    /// what the loads and updates of that name asserted and no other one also asserts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// For an update (`trellis update`, format 4): what it changed. Absent for a load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<UpdateCounts>,
}

/// What one update changed (the counts of its report).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct UpdateCounts {
    /// Changes applied.
    pub applied: u64,
    /// Changes skipped (`--on-error skip`), each listed in the update's report.
    pub skipped: u64,
    /// Facts added (new to the store).
    pub facts_added: u64,
    /// Facts retracted (by `retract` or with a deleted entity).
    pub facts_retracted: u64,
    /// Entities added.
    pub entities_added: u64,
    /// Entities deleted.
    pub entities_deleted: u64,
    /// Relations added.
    pub relations_added: u64,
    /// Entities renamed (`rename`, or a label naming an entity still called by its key).
    pub renamed: u64,
    /// Aliases added.
    pub aliases_added: u64,
    /// Aliases removed (by `unalias` or with a deleted entity).
    pub aliases_removed: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct InputRecord {
    pub path: String,
    pub format: String,
    pub lines: u64,
    pub facts_read: u64,
    pub rejected: u64,
}
