//! Column families as data, and the format version (see `schema/v4.md`).

use rocksdb::{BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, Options, SliceTransform};

/// The on-disk format this build writes.
pub const FORMAT_VERSION: u32 = 4;
/// The oldest format this build can migrate from.
pub const OLDEST_SUPPORTED_VERSION: u32 = 1;

pub const CF_META: &str = "meta";
pub const CF_ENTITIES: &str = "entities";
pub const CF_ENTITY_KEYS: &str = "entity_keys";
pub const CF_RELATIONS: &str = "relations";
pub const CF_RELATION_KEYS: &str = "relation_keys";
pub const CF_NAMES: &str = "names";
pub const CF_ALIASES: &str = "aliases";
pub const CF_ADJACENCY: &str = "adjacency";
pub const CF_DEGREES: &str = "degrees";
pub const CF_TOKENIZERS: &str = "tokenizers";
pub const CF_TERM_TOKENS: &str = "term_tokens";
pub const CF_TOKEN_TRIE: &str = "token_trie";
pub const CF_TOKENIZER_FILES: &str = "tokenizer_files";
pub const CF_RETIRED: &str = "retired";
pub const CF_FACT_SOURCES: &str = "fact_sources";
pub const CF_SOURCE_FACTS: &str = "source_facts";

/// How a column family is read, which decides its bloom filter and prefix extractor.
#[derive(Clone, Copy)]
pub enum Access {
    /// Exact-key lookups of keys that may well be absent: whole-key bloom filter.
    Point,
    /// Lookups by dense id, which nearly always hit: a filter would only cost space.
    Dense,
    /// Scans of all keys under a fixed-length prefix: prefix bloom filter.
    Prefix(usize),
    /// Scans of variable prefixes (names): no prefix extractor.
    Scan,
}

pub struct CfSpec {
    pub name: &'static str,
    pub access: Access,
    /// Read a record at a time at ids spread over the whole family, on every retrieval
    /// (the names of a turn's candidates): a block cache cannot hold such a family of a
    /// Freebase-sized store, so each first read decompresses a whole block for one record.
    /// Small LZ4 blocks make that read cheap, at some disk (`cf_options`).
    pub hot: bool,
}

/// Every column family of the current schema (v4: schema/v4.md). `meta` first; the order is otherwise irrelevant.
pub const COLUMN_FAMILIES: &[CfSpec] = &[
    CfSpec { name: CF_META, access: Access::Dense, hot: false },
    CfSpec { name: CF_ENTITIES, access: Access::Dense, hot: true },
    CfSpec { name: CF_ENTITY_KEYS, access: Access::Point, hot: false },
    CfSpec { name: CF_RELATIONS, access: Access::Dense, hot: false },
    CfSpec { name: CF_RELATION_KEYS, access: Access::Point, hot: false },
    CfSpec { name: CF_NAMES, access: Access::Scan, hot: false },
    CfSpec { name: CF_ALIASES, access: Access::Prefix(4), hot: false },
    // direction ++ entity: all relations of one entity in one direction.
    CfSpec { name: CF_ADJACENCY, access: Access::Prefix(5), hot: false },
    CfSpec { name: CF_DEGREES, access: Access::Dense, hot: false },
    // v2: the token index.
    CfSpec { name: CF_TOKENIZERS, access: Access::Dense, hot: false },
    CfSpec { name: CF_TERM_TOKENS, access: Access::Dense, hot: true },
    CfSpec { name: CF_TOKEN_TRIE, access: Access::Scan, hot: false },
    // v4: live updates. The tokenizer each token index was built with (so loads and updates
    // re-tokenize the names they change), and the entities deleted by updates.
    CfSpec { name: CF_TOKENIZER_FILES, access: Access::Dense, hot: false },
    CfSpec { name: CF_RETIRED, access: Access::Dense, hot: false },
    // v4: provenance. subject ++ relation ++ load -> the objects that load asserted;
    // load ++ subject ++ relation -> empty (what a load asserted, for retracting a source).
    CfSpec { name: CF_FACT_SOURCES, access: Access::Prefix(8), hot: false },
    CfSpec { name: CF_SOURCE_FACTS, access: Access::Prefix(4), hot: false },
];

/// Options of one column family; the same options are used by the SST writers of the bulk
/// loader, so ingested files match what RocksDB would have written itself.
pub fn cf_options(spec: &CfSpec, cache: &Cache) -> Options {
    let mut opts = Options::default();
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    // Index and filter blocks live in the block cache, so memory follows the cache size,
    // not the store size. Partitioned (two-level) so a lookup loads a few KiB of index
    // and filter, not a whole file's: with whole filters, a cache smaller than the filters
    // re-reads megabytes per lookup once a store has millions of keys.
    table.set_cache_index_and_filter_blocks(true);
    table.set_cache_index_and_filter_blocks_with_high_priority(true);
    table.set_index_type(rocksdb::BlockBasedIndexType::TwoLevelIndexSearch);
    table.set_partition_filters(true);
    table.set_metadata_block_size(4096);
    table.set_pin_top_level_index_and_filter(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    table.set_format_version(6);
    // 16 KiB blocks: names and short id lists compress far better than in 4 KiB blocks,
    // and warm reads come from the block cache, which holds blocks uncompressed. A hot
    // family's first reads are cold ones (`CfSpec::hot`): 4 KiB.
    table.set_block_size(if spec.hot { 4 << 10 } else { 16 << 10 });
    match spec.access {
        Access::Point => table.set_bloom_filter(10.0, false),
        Access::Prefix(len) => {
            // Prefix filter only: it serves both prefix scans and point reads of entities
            // without edges in a direction, at half the size of prefix plus whole-key.
            opts.set_prefix_extractor(SliceTransform::create_fixed_prefix(len));
            table.set_bloom_filter(10.0, false);
            table.set_whole_key_filtering(false);
        }
        Access::Dense | Access::Scan => {}
    }
    opts.set_block_based_table_factory(&table);
    // LZ4 for the levels that are read hot; ZSTD at the bottom, where most bytes live,
    // except in a hot family, read at the bottom as much as anywhere.
    opts.set_compression_type(DBCompressionType::Lz4);
    opts.set_bottommost_compression_type(if spec.hot { DBCompressionType::Lz4 } else { DBCompressionType::Zstd });
    opts
}

pub fn descriptors(cache: &Cache) -> Vec<ColumnFamilyDescriptor> {
    COLUMN_FAMILIES.iter().map(|spec| ColumnFamilyDescriptor::new(spec.name, cf_options(spec, cache))).collect()
}

/// Descriptors for the column families that exist in the database at `path`, with this
/// build's options where it knows them: an older generation lacks the families added since,
/// and a read-only open must not ask for them.
pub(crate) fn existing_descriptors(path: &std::path::Path, cache: &Cache) -> Result<Vec<ColumnFamilyDescriptor>, rocksdb::Error> {
    let names = rocksdb::DB::list_cf(&Options::default(), path)?;
    Ok(names
        .into_iter()
        .filter(|n| n != "default")
        .map(|n| match COLUMN_FAMILIES.iter().find(|s| s.name == n) {
            Some(spec) => ColumnFamilyDescriptor::new(n, cf_options(spec, cache)),
            None => ColumnFamilyDescriptor::new(n, Options::default()),
        })
        .collect())
}
