"""Write a GGUF with random weights in the shape of a real model: a speed test without a download.

Decode and prefill speed depend on the shapes, the tensor types and the hardware, not on what the
weights say, so a random model measures a GPU where the real one cannot travel (the device machine
has no network; the model is 1.1 GB). Its text is noise: never read quality from it, and speculative
acceptance on it means nothing.

    python examples/random_gguf.py /tmp/qwen-1.5b-random.gguf                 # Qwen2.5-Coder 1.5B shapes
    python examples/random_gguf.py /tmp/qwen-32b.gguf --preset 32b --type q4_k  # 32B, 18 GB, Q4_K
    python examples/random_gguf.py /tmp/small.gguf --layers 2 --embd 64 --ff 128 --heads 4 --kv-heads 2 --vocab 512

The tokenizer is GPT-2 style byte-level BPE with the 256 byte tokens, a handful of merges and filler
tokens up to the vocabulary size, so llama.cpp tokenizes any text (about one token per byte).
Weights are F16 by default (the 1.5B: about 3.1 GB; the real model is Q4_K_M, 1.1 GB, so expect a
slower decode than the real file would give on the same GPU: decode reads every weight once per
token). `--type q4_k` writes every matrix as Q4_K blocks, the bulk of a Q4_K_M file (which keeps a few
tensors in Q6_K, about 8% more bytes): the 32B preset is then 18.4 GB, written at disk speed, because
one buffer of random blocks is shared by every tensor (the values do not matter, their layout does).
"""

from __future__ import annotations

import argparse
import time

import gguf
import numpy as np


def byte_tokens() -> list[str]:
    """GPT-2's byte-to-unicode table: the 256 strings byte-level BPE vocabularies start from."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    )
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    table = dict(zip(printable, chars, strict=True))
    return [chr(table[b]) for b in range(256)]


# Each model's config.json: layers, embedding, feed-forward, heads, KV heads, vocabulary, tied output.
PRESETS = {
    "1.5b": dict(layers=28, embd=1536, ff=8960, heads=12, kv_heads=2, vocab=151936, tied=True),
    "32b": dict(layers=64, embd=5120, ff=27648, heads=40, kv_heads=8, vocab=152064, tied=False),
}
Q4_K_BLOCK = 256  # weights per block; 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales, 128 of nibbles


def q4_k_blocks(count: int, row: int, rng: np.random.Generator) -> np.ndarray:
    """`count` Q4_K blocks of random nibbles whose weights are about zero-mean with a variance of
    1/row, so activations keep their size through the layers (NaNs would stop sampling early on some
    builds). Every sub-block scale is 1 and every min 8, so a weight is d*q - dmin*8, q in 0..15."""
    blocks = np.empty((count, 144), dtype=np.uint8)
    d = np.float16(1.0 / (4.6 * np.sqrt(row)))  # 4.6: the spread of q - 8 for uniform q
    blocks[:, 0:4] = np.frombuffer(np.array([d, d], dtype=np.float16).tobytes(), dtype=np.uint8)
    # The 6-bit packing (ggml's get_scale_min_k4): bytes 0-3 hold scales 0-3, 4-7 mins 0-3, and
    # 8-11 the low nibbles of scales 4-7 with the mins 4-7 above them; no high bits anywhere.
    blocks[:, 4:8] = 1
    blocks[:, 8:12] = 8
    blocks[:, 12:16] = (8 << 4) | 1
    blocks[:, 16:] = rng.integers(0, 256, size=(count, 128), dtype=np.uint8)
    return blocks


def write(
    path: str,
    layers: int,
    embd: int,
    ff: int,
    heads: int,
    kv_heads: int,
    vocab: int,
    ctx: int,
    tied: bool = True,
    quant: str = "f16",
) -> None:
    started = time.monotonic()
    rng = np.random.default_rng(0)
    head_dim = embd // heads
    writer = gguf.GGUFWriter(path, "qwen2")
    writer.add_name(f"random weights, {layers} layers x {embd} ({quant}; speed tests only)")
    writer.add_context_length(ctx)
    writer.add_embedding_length(embd)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    q4_k = quant == "q4_k"
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_S if q4_k else gguf.LlamaFileType.MOSTLY_F16)

    tokens = byte_tokens()
    merges = ["Ġ Ġ", "Ġ t", "e r", "i n"]
    tokens += ["ĠĠ", "Ġt", "er", "in", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    specials = {len(tokens) - 3, len(tokens) - 2, len(tokens) - 1}
    if vocab < len(tokens):
        raise SystemExit(f"--vocab must be at least {len(tokens)} (bytes, merges and chat tokens)")
    tokens += [f"<|filler_{i}|>" for i in range(vocab - len(tokens))]
    types = [gguf.TokenType.CONTROL if i in specials else gguf.TokenType.NORMAL for i in range(len(tokens))]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_add_bos_token(False)

    shared = None
    if q4_k:
        largest = max(vocab * embd, ff * embd)
        shared = q4_k_blocks(largest // Q4_K_BLOCK, embd, rng)

    def weight(*shape: int) -> np.ndarray:
        rows, row = shape
        if shared is not None:
            # A view of the shared blocks: the writer keeps every tensor until it writes the file.
            blocks = shared[: rows * row // Q4_K_BLOCK]
            return blocks.reshape(rows, row // Q4_K_BLOCK * 144)
        # Scaled so activations keep their size through the layers: the speed does not care, but NaNs
        # would stop sampling early on some builds.
        return (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(row)).astype(np.float16)

    def matrix(name: str, *shape: int) -> None:
        if shared is None:
            writer.add_tensor(name, weight(*shape))
        else:
            writer.add_tensor(name, weight(*shape), raw_dtype=gguf.GGMLQuantizationType.Q4_K)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    matrix("token_embd.weight", vocab, embd)
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones(embd))
        matrix(f"blk.{i}.attn_q.weight", heads * head_dim, embd)
        writer.add_tensor(f"blk.{i}.attn_q.bias", np.zeros(heads * head_dim, dtype=np.float32))
        matrix(f"blk.{i}.attn_k.weight", kv_heads * head_dim, embd)
        writer.add_tensor(f"blk.{i}.attn_k.bias", np.zeros(kv_heads * head_dim, dtype=np.float32))
        matrix(f"blk.{i}.attn_v.weight", kv_heads * head_dim, embd)
        writer.add_tensor(f"blk.{i}.attn_v.bias", np.zeros(kv_heads * head_dim, dtype=np.float32))
        matrix(f"blk.{i}.attn_output.weight", embd, heads * head_dim)
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones(embd))
        matrix(f"blk.{i}.ffn_gate.weight", ff, embd)
        matrix(f"blk.{i}.ffn_up.weight", ff, embd)
        matrix(f"blk.{i}.ffn_down.weight", embd, ff)
    writer.add_tensor("output_norm.weight", ones(embd))
    if not tied:  # the 1.5B reads its output through token_embd; the 32B has its own
        matrix("output.weight", vocab, embd)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {path} in {time.monotonic() - started:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--preset", choices=PRESETS, default="1.5b", help="Qwen2.5-Coder's shapes")
    for name in ("layers", "embd", "ff", "heads", "kv-heads", "vocab"):
        parser.add_argument(f"--{name}", type=int, help="instead of the preset's")
    parser.add_argument("--ctx", type=int, default=32768)
    parser.add_argument("--type", choices=("f16", "q4_k"), default="f16")
    args = parser.parse_args()
    shape = dict(PRESETS[args.preset])
    shape.update({k: v for k, v in vars(args).items() if k in shape and v is not None})
    write(args.path, ctx=args.ctx, quant=args.type, **shape)


if __name__ == "__main__":
    main()
