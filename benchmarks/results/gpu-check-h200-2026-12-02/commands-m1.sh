#!/bin/bash
# GPU session of 2026-12-02, call M1: regressions of the user commands under CUDA on the current main, the
# one-at-a-time figures, then DVTS for issue 12. Results under $OUT.
set -u
export PYTHONPATH=/root/site EDGEREASON_HOME=/root/eh PYTHONUNBUFFERED=1
D=/root/src/build/data O=/root/o
mkdir -p $O
cd /root/proj
while ! grep -q SETUP_DONE /root/build.log; do sleep 3; done; cp /root/build.log $O/build.log
echo "setup waited $SECONDS s" > $O/times.txt
t() { local s=$SECONDS; "$@"; echo "$? $((SECONDS - s)) s: $*" >> $O/times.txt; }
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > $O/gpu.txt
t timeout 300 python3 -m pytest -q -rs tests/backends/test_cuda_process.py tests/test_gpu_settings.py \
  tests/backends/test_cxx_runtime.py > $O/pytest-cuda.txt 2>&1
J="Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her friends every day with four. She sells the remainder at the farmers' market daily for \$2 per fresh duck egg. How much in dollars does she make every day at the farmers' market?"
t timeout 120 edgereason solve "$J" --gpu-memory 24GiB --json > $O/solve-default.json 2> $O/solve-default.err
t timeout 120 edgereason solve "$J" --gpu-memory 24GiB > $O/solve-default.txt 2>&1
t timeout 200 edgereason memory-profile --device gpu --model qwen2.5-coder-0.5b --prm qwen2.5-coder-1.5b --json \
  > $O/memory-profile.json 2> $O/memory-profile.err
B="--dataset $D/gsm8k_test.jsonl --gpu-memory 24GiB --max-steps 20 --max-tokens 1024 --concurrency 1 --offset 16 --limit 16"
t timeout 200 edgereason bench --model qwen2.5-coder-0.5b $B --beams 8 --policies baseline,edge,auto --no-plots \
  --out /root/w/one16 > /root/w-one16.log 2>&1
cp /root/w/one16/results.json $O/one16-q05.json
t timeout 200 edgereason bench --model qwen2.5-coder-1.5b $B --strategy best-of-n --beams 8 --vote weighted \
  --temperature 0.6 --policies auto --out /root/w/one16-q15 > /root/w-q15.log 2>&1
cp /root/w/one16-q15/results.json $O/one16-q15.json; ls /root/w/one16-q15 > $O/one16-q15-files.txt
tail -5 /root/w-one16.log /root/w-q15.log > $O/bench-tails.txt
# issue 12: DVTS (diverse subtrees) for the 1.5B beside the sweep's beam and best-of-8 (same shards and seeds)
printf '%s\n' "q15-dvts8w2-t06 --model qwen2.5-coder-1.5b --strategy dvts --beams 8 --width 2 --vote weighted --temperature 0.6 --policies baseline" \
  > /root/cfg.txt
left=$((530 - SECONDS))
export SECONDS_BOX=$(( left > 30 ? left : 30 )); t bash benchmarks/eval_sweep.sh /root/cfg.txt $D /root/w/sweep > /root/w-sweep.log 2>&1
cp /root/w/sweep/summary.json $O/dvts-summary.json; cp /root/w/sweep/vote-rules.json $O/dvts-vote-rules.json
tar czf $O/dvts-results.tgz -C /root/w/sweep eval 2>/dev/null
echo done >> $O/times.txt
tar czf $OUT/m1.tgz -C $O .
