#!/bin/bash
# The task suites side by side on the lent GPU (../shared/gpu/README.md puts the embedded coder there first),
# each bench with a server of its own: a copy of coder-ngram on its own port, so that settings compared in one
# lease share the GPU alike. The benches run in the background (setsid), so they outlive the call that starts
# them and a lease's 10-minute calls only poll; `timeout` ends them before the lease does.
#   bash examples/gpu_tasks.sh start SECONDS 'NAME PORT TASKS [bench options]' ...
#   bash examples/gpu_tasks.sh poll SECONDS [collect]
# start: e.g. 'fs2 8941 examples/planted --fresh-starts 2 --jobs 2' runs `agent bench fs2 --tasks
# examples/planted --task-timeout 120 --fresh-starts 2 --jobs 2 --out /tmp/res/fs2`. The packages' sdists
# come from .gpu/sdists (a copy of ~/.cache/spec-agent/sdists: the device reaches no package index).
# On a machine of several GPUs (nvidia-h100-x8), the benches take the GPUs in turn, one each while
# there are enough (CUDA_VISIBLE_DEVICES): twelve benches, three runs of four settings, in one lease.
# poll: waits up to SECONDS while a bench runs, then says how far each got; `collect` copies each bench's
# results (NAME.jsonl, one line a task), its log and the sessions (sessions.tgz) to $OUT.
set -u
. /tmp/v/bin/activate
case $1 in
start)
  limit=$2; shift 2
  mkdir -p ~/.cache/spec-agent/sdists ~/.config/spec-agent/profiles /tmp/res
  cp -r .gpu/sdists/* ~/.cache/spec-agent/sdists/
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') && [ "$gpus" -gt 0 ] || gpus=1
  k=0
  for spec in "$@"; do
    read -r name port tasks options <<< "$spec"
    export CUDA_VISIBLE_DEVICES=$((k % gpus)); k=$((k + 1))
    sed "s/^port = .*/port = $port/" server_profiles/coder-ngram.toml > ~/.config/spec-agent/profiles/$name.toml
    mkdir -p /tmp/res/$name
    echo "agent bench $name --tasks $tasks --task-timeout 120 $options (GPU $CUDA_VISIBLE_DEVICES of $gpus)" \
      > /tmp/res/$name/command
    # shellcheck disable=SC2086  # the options are words
    PYTHONUNBUFFERED=1 setsid nohup timeout "$limit" agent bench $name --tasks $tasks --task-timeout 120 \
      --out /tmp/res/$name $options > /tmp/res/$name/log 2>&1 < /dev/null &
  done
  sleep 30 ;;
poll)
  end=$((SECONDS + $2))
  while [ $SECONDS -lt $end ] && pgrep -f "agent bench" > /dev/null; do sleep 5; done ;;
esac
for d in /tmp/res/*/; do
  n=$(basename "$d")
  echo "== $n ($(cat "$d/command")): $(cat "$d"/*.jsonl 2>/dev/null | wc -l) tasks ended, $(cat "$d"/*.jsonl 2>/dev/null | grep -c '"solved": true') solved"
  tail -n 2 "$d/log"
done
nvidia-smi --query-gpu=name,utilization.gpu,memory.used --format=csv,noheader
if [ "${3:-}" = collect ]; then
  for d in /tmp/res/*/; do n=$(basename "$d"); cat "$d"/*.jsonl > "$OUT/$n.jsonl" 2>/dev/null; cp "$d/log" "$OUT/$n.log"; done
  tar czf "$OUT/sessions.tgz" -C ~/.local/state/spec-agent sessions
fi
