//! The shared OpenDialKG graph with a T5-style tokenizer of 32k pieces, built once and kept in
//! `~/.cache/trellis/bench/` (used by the `decode_index` and `decode_step` benches).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokenizers::models::unigram::{Unigram, UnigramTrainer};
use tokenizers::models::TrainerWrapper;
use tokenizers::normalizers::{NormalizerWrapper, Replace, Sequence, NFKC};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::{AddedToken, Tokenizer};
use trellis::ingest::NameTokenizer;
use trellis::ingest::{BulkLoader, InputSpec};
use trellis::linearize::Linearization;
use trellis::store::tokens::TokenIndex;
use trellis::Store;

const VOCAB: u32 = 32_000;

/// `$TRELLIS_SHARED_DATA/opendialkg/kg.tsv`, by default `../shared/data` next to the checkout.
pub fn kg() -> PathBuf {
    let data = std::env::var_os("TRELLIS_SHARED_DATA").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let p = data.join("opendialkg/kg.tsv");
    assert!(p.exists(), "{} is missing", p.display());
    p
}

pub fn cache_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let d = home.join(".cache/trellis/bench");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// T5's recipe (tools/reference/tokenizer_fixture.py, at 32k): NFKC, runs of spaces as one, Metaspace
/// with `▁` prepended, Unigram; `<pad>`, `</s>`, `<unk>` first, the boundary tokens added.
fn train_tokenizer(out: &Path, lin: &Linearization) {
    let text = std::fs::read_to_string(kg()).unwrap();
    let lines: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let mut c = l.split('\t');
            let (s, r, o) = (c.next()?, c.next()?, c.next()?);
            Some(format!("{} {} {}", lin.entity_text(s), lin.relation_text(r.trim_start_matches('~')), lin.entity_text(o)))
        })
        .collect();
    let mut tok = Tokenizer::new(Unigram::default());
    let normalizer =
        Sequence::new(vec![NFKC.into(), Replace::new(tokenizers::normalizers::replace::ReplacePattern::Regex(" {2,}".into()), " ").unwrap().into()]);
    tok.with_normalizer(Some(NormalizerWrapper::Sequence(normalizer))).unwrap();
    tok.with_pre_tokenizer(Some(Metaspace::new('▁', PrependScheme::Always, true)));
    tok.with_decoder(Some(Metaspace::new('▁', PrependScheme::Always, true)));
    let specials = ["<pad>", "</s>", "<unk>"].map(|t| AddedToken::from(t, true)).to_vec();
    let trainer = UnigramTrainer::builder().vocab_size(VOCAB).special_tokens(specials).unk_token(Some("<unk>".into())).show_progress(false).build().unwrap();
    let mut trainer = TrainerWrapper::UnigramTrainer(trainer);
    tok.train(&mut trainer, lines.into_iter()).unwrap();
    let boundaries: Vec<AddedToken> = lin.boundaries().into_iter().flat_map(|(_, b)| b.to_vec()).map(|t| AddedToken::from(t, true)).collect();
    tok.add_special_tokens(boundaries).unwrap();
    tok.save(out, false).unwrap();
}

/// The tokenizer, the indexed store and one open index.
pub fn setup() -> (NameTokenizer, Arc<Store>, TokenIndex) {
    let lin = Linearization::trellis();
    let dir = cache_dir();
    let tok_path = dir.join(format!("t5-unigram-{}k-opendialkg.json", VOCAB / 1000));
    if !tok_path.exists() {
        let t = std::time::Instant::now();
        train_tokenizer(&tok_path, &lin);
        eprintln!("trained {} in {:.1} s", tok_path.display(), t.elapsed().as_secs_f64());
    }
    let tok = NameTokenizer::from_file(&tok_path, lin.clone()).unwrap();
    let store_dir = dir.join("opendialkg-store");
    let ready = Store::open_read_only(&store_dir).ok().map(Arc::new).and_then(|s| TokenIndex::open(s, tok.fingerprint(), &lin).ok());
    if ready.is_none() {
        let _ = std::fs::remove_dir_all(&store_dir);
        BulkLoader::new(&store_dir)
            .on_error(trellis::ingest::OnError::Skip)
            .with_rejects_file(dir.join("opendialkg-rejects.tsv"))
            .load(&[InputSpec::new(kg())])
            .unwrap();
        let t = std::time::Instant::now();
        trellis::Store::index_tokens(&store_dir, &tok, "t5-32k", &trellis::Monitor::new()).unwrap();
        eprintln!("indexed in {:.1} s", t.elapsed().as_secs_f64());
    }
    drop(ready);
    let store = Arc::new(Store::open_read_only(&store_dir).unwrap());
    let index = TokenIndex::open(store.clone(), tok.fingerprint(), &lin).unwrap();
    (tok, store, index)
}
