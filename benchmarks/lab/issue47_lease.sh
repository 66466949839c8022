#!/usr/bin/env bash
# Issue 47 within one 30-minute GPU lease (docs/gpu-machine.md: gpu_setup.sh ran, the models' pieces are in
# /root/m). From the call's checkout: refresh /root/proj's code from it, then one PART, its results tarred into
# $OUT after every step (a call cut by its time limit still brings back what finished).
#   models:   join the pieces into the model cache
#   smoke:    the torch tests on CUDA, the engine's on both backends (what the CPU cannot check: graph capture, the
#             draws recorded in the decode graph, the shared graph pool), 150 s
#   timing:   torch_targets.sh pass, recipe (LIMIT problems), one, at16: the llama.cpp and torch backends side by side
#   frontier: torch_frontier_short.txt on the first 200 GSM8K (and 100 MATH-500 for two searches), 4 shards of 16
#             problems at once; the torch tests on CUDA beside it; then seconds a problem one at a time
set -uo pipefail
part=$1 limit=${2:-20}
src=$PWD
export PYTHONPATH=/root/site
mkdir -p /root/proj && cd /root/proj || exit 1
for d in benchmarks edgereason backends ui tests profiles; do rm -rf "$d" && cp -a "$src/$d" .; done
cp -a "$src/pyproject.toml" .
out=/root/out/$part data=/root/proj/.device/data
mkdir -p "$out"
keep() { tar czf "$OUT/$part.tgz" -C "$out" . 2>/dev/null; }
case $part in
  models)
    mkdir -p /root/.cache/edgereason/models && cd /root/m || exit 1
    cat q15.* >/root/.cache/edgereason/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    cat q05.* >/root/.cache/edgereason/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    cat s135.* >/root/.cache/edgereason/models/SmolLM2-135M-Instruct.Q4_1.gguf
    ls -l /root/.cache/edgereason/models; tail -3 /root/build.log ;;
  smoke)
    python3 -m pip install -q --no-index --find-links .device/whl pytest hypothesis
    timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/engine/test_engine.py tests/backends/torch \
      >"$out/pytest-cuda.txt" 2>&1; echo "pytest rc $?" >>"$out/pytest-cuda.txt"; tail -5 "$out/pytest-cuda.txt" ;;
  timing)
    timeout 130 bash benchmarks/torch_targets.sh pass "$data" "$out"; keep
    timeout 210 bash benchmarks/torch_targets.sh recipe "$data" "$out" "$limit"; keep
    timeout 110 bash benchmarks/torch_targets.sh one "$data" "$out"; keep
    timeout 120 bash benchmarks/torch_targets.sh at16 "$data" "$out"; keep ;;
  frontier)
    python3 -m pip install -q --no-index --find-links .device/whl pytest hypothesis
    (timeout 300 python3 -m pytest -q -p no:cacheprovider tests/backends/torch tests/engine/test_engine.py \
      >"$out/pytest-cuda.txt" 2>&1; echo "pytest rc $?" >>"$out/pytest-cuda.txt") &
    common="--backend torch --policies auto --gpu-memory 24GiB --threads 1 --max-steps 20 --max-tokens 1024 \
      --concurrency 16 --no-plots"
    COMMON=$common SHARDS=4 PER_SHARD=50 FIRST=200 DATASET=gsm8k_test.jsonl SECONDS_BOX=230 \
      bash benchmarks/eval_sweep.sh benchmarks/torch_frontier_short.txt "$data" "$out/gsm8k" >"$out/gsm8k.log" 2>&1
    keep
    grep -v '^\s*\(#\|$\)' benchmarks/torch_frontier_short.txt | head -2 >/root/math_configs.txt
    COMMON=$common SHARDS=4 PER_SHARD=25 FIRST=100 DATASET=math500_test.jsonl SECONDS_BOX=130 \
      bash benchmarks/eval_sweep.sh /root/math_configs.txt "$data" "$out/math500" >"$out/math500.log" 2>&1
    keep; wait
    grep -v '^\s*\(#\|$\)' benchmarks/torch_frontier_short.txt | head -"$limit" | while read -r name flags; do
      # shellcheck disable=SC2086  # flags are words
      timeout 45 edgereason bench --dataset "$data/gsm8k_test.jsonl" --gpu-memory 24GiB --max-steps 20 --max-tokens 1024 \
        --no-plots --force $flags --backend torch --policies auto --limit 8 --concurrency 1 \
        --out "$out/latency/$name" >"$out/latency-$name.log" 2>&1
      keep
    done ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
keep
