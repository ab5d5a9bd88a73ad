# Helpers the training scripts share (sourced; they set `run`, `bin` and `say` first).

# store_for NAME FILES...: RUN/NAME, a store of FILES (bad lines skipped into
# RUN/NAME.rejects.tsv), built once: `.loaded` marks a finished load, so an interrupted one
# starts over.
store_for() {
    local store="$run/$1"; shift
    if [ ! -f "$store/.loaded" ]; then
        rm -rf "$store"
        say "store $store"
        "$bin" ingest --store "$store" --on-error skip --rejects "$store.rejects.tsv" "$@"
        touch "$store/.loaded"
    fi
}
