# Helpers encoders.sh and surge.sh share (sourced; they set `run`, `bin` and `say` first).

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

# copy_init HF TOKENIZER: RUN/init/hf and RUN/init/gen-tokenizer.json, copied once (the
# folder they came from may be trained on later; a half-made copy is made again).
copy_init() {
    if [ ! -f "$run/init/gen-tokenizer.json" ]; then
        [ -f "$1/config.json" ] || { say "INIT=$1 has no config.json (want a saved T5's hf folder)"; exit 2; }
        rm -rf "$run/init.part" && mkdir -p "$run/init.part"
        cp -r "$1" "$run/init.part/hf"
        cp "$2" "$run/init.part/gen-tokenizer.json"
        mv "$run/init.part" "$run/init"
    fi
}
