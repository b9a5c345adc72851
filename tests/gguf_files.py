"""Small GGUF files written with the `gguf` package's own writer: headers only, no tensors.

They give the preflight (agent/server/preflight/) the cases no real model at hand covers: DFlash
drafts of both architecture names, and the seed's big models by name, for tests that plan a launch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf

# A made-up tokenizer: 5 control tokens, then words. Drafts share it unless a test changes it.
TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", *(f"word{i}" for i in range(59))]
CHAT_TEMPLATE = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>"


def write_gguf(
    path: Path,
    arch: str,
    tokens: list[str] | None = TOKENS,
    chat_template: str | None = None,
    layers: int = 2,
    extra: dict[str, Any] | None = None,
) -> Path:
    """A GGUF header declaring `general.architecture = arch`, with a tokenizer and layer counts.
    `extra`: more keys (a list value becomes an int32 array, as target layer ids are written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"test {arch}")
    writer.add_block_count(layers)
    writer.add_context_length(4096)
    writer.add_embedding_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    if tokens is not None:
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_bos_token_id(2)
        writer.add_eos_token_id(1)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    for key, value in (extra or {}).items():
        if isinstance(value, list):
            writer.add_array(key, value)
        elif isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        else:
            writer.add_string(key, str(value))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_dflash(path: Path, arch: str = "dflash", target_layers: list[int] | None = None, **kw: Any) -> Path:
    """A DFlash draft header: upstream's `dflash` (dflash.target_layers) or BeeLlama 0.1's
    `dflash-draft` (dflash-draft.dflash.target_layer_ids); `target_layers=[]` leaves the key out."""
    layers = [1, 8, 15] if target_layers is None else target_layers
    keys: dict[str, Any] = {}
    if arch == "dflash":
        keys["dflash.block_size"] = 16
        if layers:
            keys["dflash.target_layers"] = layers
    else:
        keys[f"{arch}.dflash.block_size"] = 16
        if layers:
            keys[f"{arch}.dflash.target_layer_ids"] = layers
    return write_gguf(path, arch, extra={**keys, **kw.pop("extra", {})}, **kw)
