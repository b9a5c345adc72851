"""The preflight (a package: `gguf` reads the headers, `memory` fits the launch into RAM or VRAM,
`report` holds the findings, `checks` runs them all): what a profile's GGUF files say about a launch, read before any process starts.

A wrong draft shows up late and in different ways on each binary (FACTS.md): upstream llama-server
aborts while loading on an assert, BeeLlama 0.1 loads and answers the first request with HTTP 500
"Invalid input batch". The files' headers already say most of it:

- **draft type**: `draft-dflash`/`dflash` need a DFlash draft *that this binary can load*. DFlash
  GGUFs come under two architecture names, and each binary loads only its own: `dflash-draft`
  (BeeLlama 0.1, and the seed's Gemma 4 draft) and `dflash` (upstream llama.cpp). BeeLlama 0.2 and
  later load both. A `draft-simple` draft must not be a DFlash model.
- **tokenizer**: draft and target share it (the same tokenizer model, vocabulary size and tokens);
  where they differ is named.
- **memory**: weights (the file sizes) + KV cache (layers × KV heads × head size × context × cache
  type) + the draft, against free VRAM (NVML, when the binary has a GPU device and layers are
  offloaded) or free RAM (/proc/meminfo). A launch that will not fit is warned about, with the
  numbers, and refused only under `--strict`.
- **chat template**: in the GGUF (`tokenizer.chat_template`) or in the profile.

Headers are read with the `gguf` package's constants (llama.cpp's own definitions of the format),
never the tensor data. Its `GGUFReader` is not used: it builds a numpy view per element of every
array, 7.2 s on the 1.1 GB coder (151,936 tokens and 151,387 merges); this reader walks the same
layout through an mmap of the header pages and keeps only the arrays it needs.
"""
