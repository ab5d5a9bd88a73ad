use super::*;

fn given(pairs: &[(&str, &str)]) -> Settings {
    let mut s = Settings::new();
    for (n, v) in pairs {
        s.set(*n, *v);
    }
    s
}

fn refusal(kind: &str, pairs: &[(&str, &str)]) -> String {
    retriever(kind, &given(pairs)).expect_err("refused").to_string()
}

#[test]
fn defaults_are_the_library_defaults() {
    let cfg = retriever("bm25", &Settings::new()).unwrap();
    let plain = RetrieverConfig::new(RetrieverKind::Bm25);
    assert_eq!(format!("{cfg:?}"), format!("{plain:?}"));
    let g = retriever("gsr", &given(&[("model", "m")])).unwrap();
    let RetrieverKind::Gsr(o) = &g.kind else { panic!("{g:?}") };
    assert_eq!(format!("{o:?}"), format!("{:?}", GsrOptions::new("m")));
    // One session per core, as the library's own default.
    assert_eq!(o.runtime.sessions, 0);
}

#[test]
fn values_are_read_and_checked_with_the_ranges_sentence() {
    let cfg = retriever("pcst", &given(&[("bm25_turns", "2"), ("pcst_variant", "g-retriever"), ("pruning", "strong"), ("window", "4")])).unwrap();
    assert_eq!(cfg.bm25_turns, 2);
    assert_eq!(cfg.pcst.variant, PcstVariant::GRetriever);
    assert_eq!(cfg.link.window, 4);
    assert_eq!(refusal("pcst", &[("bm25_turns", "0")]), "bm25_turns must be within 1..=1024, not 0");
    assert_eq!(refusal("pcst", &[("bm25_turns", "18446744073709551616")]), "bm25_turns must be within 1..=1024, not 18446744073709551616");
    assert_eq!(refusal("pcst", &[("bm25_turns", "2.5")]), "bm25_turns must be a whole number within 1..=1024, not \"2.5\"");
    assert_eq!(refusal("gsr", &[("model", "m"), ("alpha", "nan")]), "alpha must be a finite number within [0, 1], not nan");
    assert!(refusal("pcst", &[("pruning", "hard")]).starts_with("unknown pruning \"hard\""));
    assert!(refusal("bogus", &[]).starts_with("unknown retriever \"bogus\" (all, random, bm25"));
}

#[test]
fn a_setting_the_chosen_retriever_does_not_read_is_refused() {
    assert_eq!(refusal("pcst", &[("rerank_top", "5")]), "`rerank_top` needs `rerank` (a cross-encoder's directory: see schema/model.md)");
    assert_eq!(
        refusal("bm25", &[("dense_model", "d")]),
        "`dense_model` does not apply to the bm25 retriever: it is the dense retriever's model (or pcst's, with pcst_scores dense)"
    );
    assert_eq!(refusal("pcst", &[("model", "m")]), "`model` does not apply to the pcst retriever: it is the gsr retriever's model");
    assert_eq!(refusal("bm25", &[("beams", "2")]), "`beams` does not apply to the bm25 retriever: it is a setting of the gsr retriever");
    assert_eq!(refusal("bm25", &[("batch", "2")]), "`batch` does not apply to the bm25 retriever: it is a setting of the gsr retriever");
    assert_eq!(refusal("gsr", &[("model", "m"), ("pruning", "gw")]), "`pruning` does not apply to the gsr retriever: it is a setting of the pcst retriever");
    assert_eq!(refusal("katz", &[("seed", "1")]), "`seed` does not apply to the katz retriever: it is the random retriever's seed");
    assert!(refusal("bm25", &[("device", "cpu")]).starts_with("`device` does not apply to the bm25 retriever: it is for retrievers with a model"));
    assert_eq!(
        refusal("pcst", &[("scope", "uncapped")]),
        "`scope` does not apply to the pcst retriever: uncapped is for the gsr retriever alone (the others enumerate their candidates)"
    );
    // The capped scope is every retriever's.
    assert!(retriever("pcst", &given(&[("scope", "capped")])).is_ok());
}

#[test]
fn a_retriever_without_its_model_is_refused() {
    assert_eq!(refusal("gsr", &[]), "the gsr retriever needs `model` (an exported retriever's directory: see schema/model.md)");
    assert_eq!(refusal("dense", &[]), "the dense retriever needs `dense_model` (an exported bi-encoder's directory: see schema/model.md)");
    assert_eq!(
        refusal("pcst", &[("pcst_scores", "dense")]),
        "the pcst retriever with dense scores needs `dense_model` (an exported bi-encoder's directory: see schema/model.md)"
    );
    assert_eq!(
        refusal("pcst", &[("rerank", "r"), ("rerank_pool", "gsr")]),
        "the gsr retriever needs `model` (an exported retriever's directory: see schema/model.md)"
    );
}

#[test]
fn a_pool_member_makes_its_settings_apply() {
    let mut s = given(&[("rerank", "r"), ("model", "m"), ("beams", "3"), ("rerank_top", "7")]);
    s.set_list("rerank_pool", ["gsr", "pcst"]);
    let cfg = retriever("bm25", &s).unwrap();
    let r = cfg.rerank.as_ref().unwrap();
    assert_eq!(r.top, 7);
    assert_eq!(r.pool.iter().map(RetrieverKind::name).collect::<Vec<_>>(), ["gsr", "pcst"]);
    let RetrieverKind::Gsr(g) = &r.pool[0] else { panic!() };
    assert_eq!(g.overrides.beams, Some(3));
    // The retriever itself in its pool is not run twice.
    let mut s = given(&[("rerank", "r")]);
    s.set_list("rerank_pool", ["bm25,pcst"]);
    let cfg = retriever("bm25", &s).unwrap();
    assert_eq!(cfg.rerank.unwrap().pool.len(), 1);
}

#[test]
fn unknown_names_are_refused_with_the_closest_known_one() {
    assert_eq!(refusal("pcst", &[("rerank_topp", "3")]), "unknown setting `rerank_topp` for a retriever (did you mean `rerank_top`?)");
    assert_eq!(refusal("pcst", &[("zzz", "3")]), "unknown setting `zzz` for a retriever");
    assert_eq!(link(&given(&[("windw", "3")])).unwrap_err().to_string(), "unknown setting `windw` for a linker (did you mean `window`?)");
}

#[test]
fn one_value_settings_refuse_lists() {
    let mut s = Settings::new();
    s.set_list("bm25_turns", ["1", "2"]);
    assert_eq!(retriever("bm25", &s).unwrap_err().to_string(), "`bm25_turns` takes one value, not 2");
}

fn greedy() -> GenerateSettings {
    GenerateSettings::default()
}

#[test]
fn generator_settings_follow_the_strategy() {
    let beams = GeneratorSpec::read(&given(&[("beams", "2")])).unwrap();
    assert_eq!(
        beams.apply(&greedy()).unwrap_err().to_string(),
        "`beams` does not apply to this generator's greedy decoding: it is a setting of beam search (set `strategy` to choose it)"
    );
    let s = GeneratorSpec::read(&given(&[("strategy", "beam"), ("beams", "2")])).unwrap().apply(&greedy()).unwrap();
    assert!(matches!(&s.strategy, Strategy::Beam(b) if b.beams == 2 && b.return_sequences == 1), "{s:?}");
    let s = GeneratorSpec::read(&given(&[("strategy", "sample"), ("temperature", "0.5"), ("seed", "9")])).unwrap().apply(&greedy()).unwrap();
    assert!(matches!(&s.strategy, Strategy::Sample(p) if p.temperature == 0.5 && p.seed == 9), "{s:?}");
    let e = GeneratorSpec::read(&given(&[("strategy", "beam"), ("top_k", "3")])).unwrap().apply(&greedy()).unwrap_err();
    assert_eq!(e.to_string(), "`top_k` does not apply to this generator's beam search: it is a setting of sampling (set `strategy` to choose it)");
    assert_eq!(GeneratorSpec::read(&given(&[("beems", "2")])).unwrap_err().to_string(), "unknown setting `beems` for a generator (did you mean `beams`?)");
    let e = GeneratorSpec::read(&given(&[("encoding", "template:{nothing}")])).unwrap_err();
    assert!(e.to_string().starts_with("`encoding`: "), "{e}");
}

#[test]
fn a_pipeline_reads_both_and_shares_one_runtime_and_batch() {
    let s = given(&[("model", "m"), ("gen_strategy", "beam"), ("gen_beams", "3"), ("batch", "4"), ("sessions", "2"), ("pruning", "gw")]);
    let e = PipelineSpec::read("gsr", &s).unwrap_err();
    assert_eq!(e.to_string(), "`pruning` does not apply to the gsr retriever: it is a setting of the pcst retriever");
    let s = given(&[("model", "m"), ("gen_strategy", "beam"), ("gen_beams", "3"), ("batch", "4"), ("sessions", "2")]);
    let p = PipelineSpec::read("gsr", &s).unwrap();
    let RetrieverKind::Gsr(g) = &p.retriever.kind else { panic!() };
    assert_eq!((g.batch, g.runtime.sessions, p.runtime.sessions, p.batch), (4, 2, 2, 4));
    let gs = p.generator.apply(&greedy()).unwrap();
    assert!(matches!(&gs.strategy, Strategy::Beam(b) if b.beams == 3));
    assert_eq!(gs.batch, 4);
    // In a pipeline the batch and the runtime apply whatever the retriever.
    assert!(PipelineSpec::read("bm25", &given(&[("batch", "2"), ("device", "cpu")])).is_ok());
    assert_eq!(PipelineSpec::read("bm25", &given(&[("gen_beams", "0")])).unwrap_err().to_string(), "gen_beams must be within 1..=64, not 0");
    assert_eq!(
        PipelineSpec::read("bm25", &given(&[("gen_beam", "2")])).unwrap_err().to_string(),
        "unknown setting `gen_beam` for a pipeline (did you mean `gen_beams`?)"
    );
    // Its default runtime is the library's: one session per core.
    assert_eq!(PipelineSpec::read("bm25", &Settings::new()).unwrap().runtime.sessions, 0);
}

#[test]
fn every_setting_of_the_tables_is_read_somewhere() {
    // Each name of the retriever's table is accepted by some retriever (no dead entry).
    for spec in RETRIEVER.iter().chain(LINK).chain(RUNTIME) {
        let mut s = Settings::new();
        s.set("model", "m").set("dense_model", "d").set("surge_model", "s").set("rerank", "r").set("search_producer", "tfidf");
        s.set_list("rerank_pool", ["gsr", "dense", "surge", "pcst", "random", "bm25", "search"]);
        let value = match spec.name {
            "pcst_variant" => "seed003",
            "pruning" => "gw",
            "pcst_scores" => "dense",
            "scope" => "capped",
            "prior" => "katz",
            "prior_norm" => "softmax",
            "model_norm" => "allowed",
            "device" => "cpu",
            "rerank_pool" => "gsr,dense,surge,pcst,random,bm25,search",
            "search_producer" => "tfidf",
            "search_paths" => "paths",
            "dense_paths" => "facts",
            "alpha" | "decay" | "rerank_fusion" => "0.5",
            "model" | "dense_model" | "surge_model" | "rerank" => "x",
            "rewrite_input" => {
                s.set("rewrite", "true");
                "gsr,pcst,rerank"
            }
            _ => "1",
        };
        s.set(spec.name, value);
        retriever("gsr", &s).unwrap_or_else(|e| panic!("{}: {e}", spec.name));
    }
}

#[test]
fn the_vector_index_reads_its_model_batch_and_runtime() {
    let o = vector_encoder(&given(&[("dense_model", "m"), ("encoder_batch", "4"), ("model_threads", "2")])).unwrap();
    assert_eq!((o.model.to_str(), o.batch, o.runtime.threads), (Some("m"), 4, 2));
    assert_eq!(
        vector_encoder(&Settings::new()).unwrap_err().to_string(),
        "the vector index needs `dense_model` (an exported bi-encoder's directory: see schema/model.md)"
    );
    let e = vector_encoder(&given(&[("dense_model", "m"), ("dense_paths", "facts")])).unwrap_err().to_string();
    assert!(e.starts_with("unknown setting `dense_paths` for a vector index"), "{e}");
}

#[test]
fn a_switch_takes_true_or_false_in_any_spelling_and_refuses_the_rest() {
    for (text, want) in [("true", true), ("True", true), ("on", true), ("1", true), ("false", false), ("False", false), ("off", false), ("0", false)] {
        assert_eq!(link(&given(&[("rewrite", text)])).unwrap().rewrite, want, "{text}");
    }
    assert!(!link(&Settings::new()).unwrap().rewrite);
    let e = link(&given(&[("rewrite", "maybe")])).unwrap_err().to_string();
    assert_eq!(e, "unknown rewrite \"maybe\" (true, false)");
}

#[test]
fn edit_distance_is_levenshtein() {
    assert_eq!(edit_distance("kitten", "sitting"), 3);
    assert_eq!(edit_distance("", "abc"), 3);
    assert_eq!(edit_distance("beams", "beams"), 0);
    assert_eq!(closest("rerank_topp", ["rerank_top", "rerank"].into_iter()), Some("rerank_top"));
    assert_eq!(closest("zzzzzz", ["rerank_top"].into_iter()), None);
}

#[test]
fn a_pipeline_s_batch_reaches_every_generative_retriever_pooled_ones_too() {
    let mut s = given(&[("model", "m"), ("rerank", "r"), ("batch", "2")]);
    s.set_list("rerank_pool", ["gsr"]);
    let p = PipelineSpec::read("pcst", &s).unwrap();
    let pool = &p.retriever.rerank.as_ref().unwrap().pool;
    assert!(matches!(&pool[0], RetrieverKind::Gsr(g) if g.batch == 2), "{pool:?}");
}

#[test]
fn rewrite_input_names_parts_in_play_and_needs_the_rewrite() {
    let e = retriever("bm25", &given(&[("rewrite_input", "bm25")])).unwrap_err().to_string();
    assert_eq!(e, "`rewrite_input` needs `rewrite` (the dialog rewrite the ranking would read)");
    let cfg = retriever("bm25", &given(&[("rewrite_input", "bm25"), ("rewrite", "true")])).unwrap();
    assert_eq!((cfg.rewrite_input.as_slice(), cfg.link.rewrite), (["bm25".to_owned()].as_slice(), true));
    assert!(retriever("bm25", &given(&[("rewrite", "true")])).unwrap().rewrite_input.is_empty());
    // A pool's members and its reranker, each once.
    let mut s = given(&[("rewrite", "true"), ("rerank", "r"), ("rewrite_input", "pcst,rerank,pcst")]);
    s.set_list("rerank_pool", ["pcst"]);
    assert_eq!(retriever("bm25", &s).unwrap().rewrite_input, ["pcst", "rerank"]);
    // Parts this ranking does not have, and names that are no part.
    let e = retriever("bm25", &given(&[("rewrite", "true"), ("rewrite_input", "gsr")])).unwrap_err().to_string();
    assert_eq!(e, "`rewrite_input gsr` does not apply to the bm25 retriever: it names the retriever, its rerank_pool, or rerank when there is a reranker");
    let e = retriever("bm25", &given(&[("rewrite", "true"), ("rewrite_input", "rerank")])).unwrap_err().to_string();
    assert!(e.starts_with("`rewrite_input rerank` does not apply to the bm25 retriever"), "{e}");
    let e = retriever("bm25", &given(&[("rewrite", "true"), ("rewrite_input", "true")])).unwrap_err().to_string();
    assert_eq!(e, "unknown rewrite_input part \"true\" (bm25, pcst, gsr, dense, surge, rerank)");
    let e = retriever("katz", &given(&[("rewrite", "true"), ("rewrite_input", "katz")])).unwrap_err().to_string();
    assert_eq!(e, "unknown rewrite_input part \"katz\" (bm25, pcst, gsr, dense, surge, rerank)");
}
