"""Write a GGUF with random weights in the shape of Qwen2.5-Coder 1.5B: a speed test without a download.

Decode and prefill speed depend on the shapes, the tensor types and the hardware, not on what the
weights say, so a random model measures a GPU where the real one cannot travel (the device machine
has no network; the model is 1.1 GB). Its text is noise: never read quality from it, and speculative
acceptance on it means nothing.

    python examples/random_gguf.py /tmp/qwen-1.5b-random.gguf                 # Qwen2.5-Coder 1.5B shapes
    python examples/random_gguf.py /tmp/small.gguf --layers 2 --embd 64 --ff 128 --heads 4 --kv-heads 2 --vocab 512

The tokenizer is GPT-2 style byte-level BPE with the 256 byte tokens, a handful of merges and filler
tokens up to the vocabulary size, so llama.cpp tokenizes any text (about one token per byte).
Weights are F16 (the 1.5B: about 3.1 GB; the real model is Q4_K_M, 1.1 GB, so expect a slower decode
than the real file would give on the same GPU: decode reads every weight once per token).
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


def write(
    path: str, layers: int, embd: int, ff: int, heads: int, kv_heads: int, vocab: int, ctx: int
) -> None:
    started = time.monotonic()
    rng = np.random.default_rng(0)
    head_dim = embd // heads
    writer = gguf.GGUFWriter(path, "qwen2")
    writer.add_name("random weights, Qwen2.5-Coder 1.5B shapes (speed tests only)")
    writer.add_context_length(ctx)
    writer.add_embedding_length(embd)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

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

    def weight(*shape: int) -> np.ndarray:
        # Scaled so activations keep their size through the layers: the speed does not care, but NaNs
        # would stop sampling early on some builds.
        return (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(shape[-1])).astype(np.float16)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    writer.add_tensor("token_embd.weight", weight(vocab, embd))
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones(embd))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(heads * head_dim, embd))
        writer.add_tensor(f"blk.{i}.attn_q.bias", np.zeros(heads * head_dim, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(kv_heads * head_dim, embd))
        writer.add_tensor(f"blk.{i}.attn_k.bias", np.zeros(kv_heads * head_dim, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(kv_heads * head_dim, embd))
        writer.add_tensor(f"blk.{i}.attn_v.bias", np.zeros(kv_heads * head_dim, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(embd, heads * head_dim))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones(embd))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(ff, embd))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(ff, embd))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(embd, ff))
    writer.add_tensor("output_norm.weight", ones(embd))  # output.weight is tied to token_embd, as in 1.5B

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {path} in {time.monotonic() - started:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    # Qwen2.5-Coder-1.5B-Instruct's config.json
    parser.add_argument("--layers", type=int, default=28)
    parser.add_argument("--embd", type=int, default=1536)
    parser.add_argument("--ff", type=int, default=8960)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--ctx", type=int, default=32768)
    args = parser.parse_args()
    write(args.path, args.layers, args.embd, args.ff, args.heads, args.kv_heads, args.vocab, args.ctx)


if __name__ == "__main__":
    main()
