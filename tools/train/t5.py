"""The T5 models of every Python tool, built in one place: the shapes, the builder
(`build`), optimum's ONNX export (`export`) and the check of an export against PyTorch with
onnxruntime (`verify`). Used by training (tools/train/train.py, export.py), the test-fixture
makers (tools/reference/gsr_fixture.py, gsr_goldens.py, generate_fixture.py) and the Python
reference bench (tools/bench/gsr_reference.py). Needs the train environment (torch).

A leaf module (it imports nothing of tools/): tools/train/*.py run as files import it as `t5`,
modules run with `python -m tools...` as `tools.train.t5`.
"""
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

SHAPES = {
    # Test fixtures: small enough to commit (a few hundred KB per ONNX file), big enough to
    # have every part.
    "tiny": dict(d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2, num_decoder_layers=2, relative_attention_num_buckets=8, relative_attention_max_distance=32, dropout_rate=0.0),
    # Benchmarks: t5-small's shape, random weights.
    "t5-small": dict(d_model=512, d_kv=64, num_heads=8, d_ff=2048, num_layers=6, num_decoder_layers=6, relative_attention_num_buckets=32, relative_attention_max_distance=128, dropout_rate=0.0),
    # Training (tools/train/train.py --shape): the shape that trains to a useful point on 2
    # CPU cores in about an hour (toolchain.md's measured speeds), and a bigger one for a GPU.
    "small-cpu": dict(d_model=256, d_kv=64, num_heads=4, d_ff=1024, num_layers=3, num_decoder_layers=3, relative_attention_num_buckets=32, relative_attention_max_distance=128, dropout_rate=0.1),
    "base-gpu": dict(d_model=512, d_kv=64, num_heads=8, d_ff=2048, num_layers=6, num_decoder_layers=6, relative_attention_num_buckets=32, relative_attention_max_distance=128, dropout_rate=0.1),
}
TRAINING_SHAPES = ("base-gpu", "small-cpu")


def build(shape, vocab_size, seed, **overrides):
    """A randomly initialised T5ForConditionalGeneration of `shape` (SHAPES), T5's special ids
    (pad and decoder start 0, EOS 1), ReLU feed-forward, tied embeddings unless `overrides`
    says otherwise; the weights drawn right after `torch.manual_seed(seed)`, so a shape, a
    vocabulary size and a seed always give the same weights. In training mode (dropout on
    where the shape has it): callers that only run it call `.eval()`."""
    from transformers import T5Config, T5ForConditionalGeneration

    fields = dict(
        vocab_size=vocab_size,
        feed_forward_proj="relu",
        tie_word_embeddings=True,
        decoder_start_token_id=0,
        eos_token_id=1,
        pad_token_id=0,
        is_encoder_decoder=True,
    )
    fields.update(SHAPES[shape])
    fields.update(overrides)
    cfg = T5Config(**fields)
    torch.manual_seed(seed)
    return T5ForConditionalGeneration(cfg)


def export(model_dir, out_dir, merged):
    """optimum-onnx's exporter on the saved model: split layout without post-processing,
    merged (the `If` on `use_cache_branch`) with it."""
    from optimum.exporters.onnx import main_export

    main_export(
        str(model_dir),
        output=str(out_dir),
        task="text2text-generation-with-past",
        no_post_process=not merged,
        do_validation=False,
        local_files_only=True,
        library_name="transformers",
    )
    for f in list(Path(out_dir).iterdir()):
        keep = {"encoder_model.onnx"} | ({"decoder_model_merged.onnx"} if merged else {"decoder_model.onnx", "decoder_with_past_model.onnx"})
        if f.name not in keep:
            f.unlink() if f.is_file() else shutil.rmtree(f)
    assert {f.name for f in Path(out_dir).iterdir()} == keep, sorted(f.name for f in Path(out_dir).iterdir())


def torch_reference(model, input_ids, attention_mask, decoder_ids):
    """Encoder output and the logits of each cached decoder step (step k reads decoder_ids[:, k])."""
    with torch.no_grad():
        enc = model.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        past = None
        steps = []
        for k in range(decoder_ids.shape[1]):
            out = model(
                encoder_outputs=(enc,),
                attention_mask=attention_mask,
                decoder_input_ids=decoder_ids[:, k : k + 1],
                past_key_values=past,
                use_cache=True,
            )
            past = out.past_key_values
            steps.append(out.logits[:, 0, :].numpy())
    return enc.numpy(), steps


def ort_run(onnx_dir, merged, cfg, input_ids, attention_mask, decoder_ids):
    """The same with onnxruntime, as the Rust runtime will run it."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = lambda name: ort.InferenceSession(str(Path(onnx_dir) / name), so, providers=["CPUExecutionProvider"])  # noqa: E731
    enc_s = sess("encoder_model.onnx")
    ids, mask = input_ids.numpy().astype(np.int64), attention_mask.numpy().astype(np.int64)
    hidden = enc_s.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]
    layers, heads, dkv = cfg.num_decoder_layers, cfg.num_heads, cfg.d_kv
    b = ids.shape[0]
    if merged:
        dec = sess("decoder_model_merged.onnx")
        first = dec
    else:
        first, dec = sess("decoder_model.onnx"), sess("decoder_with_past_model.onnx")
    past = {}
    steps = []
    for k in range(decoder_ids.shape[1]):
        s = first if k == 0 else dec
        names = [i.name for i in s.get_inputs()]
        feed = {"input_ids": decoder_ids[:, k : k + 1].numpy().astype(np.int64), "encoder_attention_mask": mask}
        if "encoder_hidden_states" in names:
            feed["encoder_hidden_states"] = hidden
        if merged:
            feed["use_cache_branch"] = np.array([k > 0])
        for i in range(layers):
            for kind in ("decoder", "encoder"):
                for kv in ("key", "value"):
                    n = f"past_key_values.{i}.{kind}.{kv}"
                    if n in names:
                        feed[n] = past.get(n, np.zeros((b, heads, 0, dkv), np.float32))
        outs = s.run(None, feed)
        out_names = [o.name for o in s.get_outputs()]
        res = dict(zip(out_names, outs))
        steps.append(res["logits"][:, -1, :])
        for n, v in res.items():
            if n.startswith("present."):
                pn = "past_key_values." + n[len("present.") :]
                # The with-past decoder re-emits nothing useful for the encoder K/V: keep the first.
                if ".encoder." in n and pn in past:
                    continue
                past[pn] = v
    return hidden, steps


def verify(onnx_dir, merged, model, input_ids, attention_mask, decoder_ids, tol=1e-4):
    enc_t, steps_t = torch_reference(model, input_ids, attention_mask, decoder_ids)
    enc_o, steps_o = ort_run(onnx_dir, merged, model.config, input_ids, attention_mask, decoder_ids)
    m = attention_mask.numpy()[:, :, None].astype(bool)
    worst = float(np.max(np.abs(np.where(m, enc_t - enc_o, 0))))
    for a, b in zip(steps_t, steps_o):
        worst = max(worst, float(np.max(np.abs(a - b))))
    assert worst < tol, f"{onnx_dir}: onnxruntime differs from PyTorch by {worst}"
    return worst


def versions():
    import onnx
    import onnxruntime
    import tokenizers
    import transformers

    try:
        from importlib.metadata import version

        opt = version("optimum-onnx")
    except Exception:  # noqa: BLE001
        opt = None
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "optimum-onnx": opt,
        "python": sys.version.split()[0],
    }
