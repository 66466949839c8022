#!/usr/bin/env bash
# Issue 63 within one 30-minute GPU lease (docs/gpu-machine.md has the order of calls). From the call's checkout,
# one PART a call; results go to $OUT as they finish (a call cut by its limit still brings back what finished).
#   llama:   join the prebuilt llama-cpp-python parts (carried in .device/llama) into /root/site
#   setup:   install the wheels (.device/whl) and the project; keep the data (.device/data) in /root/data; move
#            the model piece carried beside them
#   piece:   move the model piece carried in .device/p/* to /root/m
#   pass:    join the models; the CUDA tests; kernels a layer (kernel_count.py); the raw pass at 1, 8 and 64 rows
#            for each decode attention (sdpa-gathered, triton-paged) and weights (bf16, int4), uncompiled and
#            compiled, beside llama.cpp's; attention alone (attention_kinds.py); the int4 linears      [~560 s]
#   engine:  `solve` whole process with its start-up phases (--verbose), torch cold and warm, llama.cpp, then
#            `auto`; the host profile; the 1.5B's recipe one problem at a time (LIMIT problems) and 16 at
#            once on both backends; the beam recipe's edge against baseline on torch, alternating    [~590 s]
set -uo pipefail
part=$1 limit=${2:-8}
src=$PWD out=/root/out/$part
# shellcheck source=benchmarks/lab/lease_lib.sh
source "$src/benchmarks/lab/lease_lib.sh"  # the environment, /root's folders, keep, refresh, models
common="--dataset /root/data/gsm8k_test.jsonl --gpu-memory 24GiB --max-steps 20 --max-tokens 1024 --no-plots"
q15="--model qwen2.5-coder-1.5b --strategy best-of-n --beams 8 --temperature 0.6 --vote weighted"
beam="--model qwen2.5-coder-1.5b --strategy beam --beams 8 --width 2 --temperature 0.6 --vote weighted"
q="Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her \
friends every day with four. She sells the remainder at the farmers' market daily for \$2 per fresh duck egg. How \
much in dollars does she make every day at the farmers' market?"
solve_time() {  # solve's whole process (RUN: a name whose part before '-' is the backend; then solve's flags)
  local t0 rc run=$1
  shift
  t0=$(date +%s.%N)
  timeout "${LIMIT_S:-60}" edgereason solve "$q" --backend "${run%%-*}" --json --verbose "$@" \
    >"$out/solve-$run.json" 2>"$out/solve-$run.log"
  rc=$?
  echo "solve $run rc $rc $(awk "BEGIN {print $(date +%s.%N) - $t0}") s" | tee -a "$out/solve-times.txt"; keep
}
case $part in
  llama)
    join_llama ;;
  setup)
    install_project
    mv "$src"/.device/p/*/* /root/m/ 2>/dev/null
    echo SETUP_DONE ;;
  piece)
    mv .device/p/*/* /root/m/ && ls /root/m | wc -l ;;
  pass)
    refresh
    models
    nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv >"$out/card.txt" 2>&1
    timeout 200 python3 -m pytest -q -x -p no:cacheprovider -k "cuda or engine or int4 and not int4_layers" tests/backends/torch \
      tests/engine/test_engine.py tests/backends/test_cuda_process.py tests/benchmarks/test_kernel_count.py \
      >"$out/pytest-cuda.txt" 2>&1
    echo "pytest rc $?" >>"$out/pytest-cuda.txt"; tail -3 "$out/pytest-cuda.txt"; keep
    timeout 80 python3 benchmarks/kernel_count.py --model qwen2.5-coder-1.5b --rows 8 \
      >"$out/kernels.json" 2>"$out/kernels.log"; echo "kernels rc $?"; keep
    pass_run() {  # NAME ATTENTION WEIGHTS SKIP
      EDGEREASON_ATTENTION=$2 timeout 100 python3 benchmarks/torch_pass.py --weights "$3" \
        --model qwen2.5-coder-1.5b --rows 1,8,64 --skip "$4" --steps 10 >"$out/pass-$1.json" 2>"$out/pass-$1.log"
      echo "pass $1 rc $?"; keep
    }
    pass_run gathered-bf16 sdpa-gathered bf16 torch-eager
    pass_run paged-bf16 triton-paged bf16 torch-eager,llamacpp
    pass_run paged-int4 triton-paged int4 torch-eager,llamacpp
    timeout 60 python3 benchmarks/attention_kinds.py --model qwen2.5-coder-1.5b --rows 1,8,64 --widths 512,2048 \
      --kinds gather,paged --reps 20 >"$out/attention.json" 2>"$out/attention.log"; echo "attention rc $?"; keep
    timeout 60 python3 benchmarks/int4_pass.py --model qwen2.5-coder-1.5b --rows 1,8,64 \
      >"$out/int4-pass-1.5b.json" 2>"$out/int4-pass-1.5b.log"; echo "int4 rc $?" ;;
  engine)
    refresh
    models
    rm -rf "$EDGEREASON_HOME/torch/inductor-"* "$EDGEREASON_HOME/torch/compile-"*
    LIMIT_S=90 solve_time torch-cold
    solve_time torch-warm
    solve_time llamacpp-cold
    solve_time llamacpp-warm
    solve_time torch-warm2
    solve_time auto-after
    cp "$EDGEREASON_HOME"/*.json "$out/"
    LIMIT_S=45 solve_time torch-int4 --torch-weights int4
    # compiled: cold (no caches), warm, then the artifact file alone (inductor's folder removed)
    rm -rf "$EDGEREASON_HOME/torch/inductor-"* "$EDGEREASON_HOME/torch/compile-"*
    EDGEREASON_COMPILE=1 LIMIT_S=90 solve_time torch-compiled-cold
    EDGEREASON_COMPILE=1 solve_time torch-compiled-warm
    rm -rf "$EDGEREASON_HOME/torch/inductor-"*
    EDGEREASON_COMPILE=1 solve_time torch-compiled-artifacts
    ls -la "$EDGEREASON_HOME/torch" >"$out/torch-home.txt" 2>&1
    timeout 80 python3 benchmarks/host_profile.py --model qwen2.5-coder-1.5b --one-at-a-time 2 --at-once 16 \
      --top 25 >"$out/host-profile.json" 2>"$out/host-profile.log"; echo "host rc $?"; keep
    for backend in torch llamacpp; do
      timeout 70 edgereason bench $common $q15 --limit "$limit" --concurrency 1 --policies baseline \
        --backend $backend --out "$out/recipe-$backend" --force >"$out/recipe-$backend.log" 2>&1
      echo "recipe $backend rc $?"; keep
    done
    for backend in torch llamacpp; do
      timeout 45 edgereason bench $common $q15 --limit 16 --policies baseline --backend $backend \
        --out "$out/at16-$backend" --force >"$out/at16-$backend.log" 2>&1
      echo "at16 $backend rc $?"; keep
    done
    timeout 90 edgereason bench $common $beam --offset 20 --limit 4 --concurrency 1 --policies baseline,edge \
      --repeat 2 --backend torch --out "$out/beam-torch" --force >"$out/beam-torch.log" 2>&1
    echo "beam rc $?" ;;
  check)
    refresh
    models
    solve_time llamacpp-cold
    solve_time llamacpp-warm
    solve_time auto-solve
    solve_time torch-cold
    solve_time torch-warm
    grep -h "start-up phases" "$out"/solve-*.log >"$out/phases.txt"
    timeout 150 python3 benchmarks/int4_accuracy.py --model qwen2.5-coder-1.5b --dataset /root/data/gsm8k_test.jsonl \
      --problems 3 --max-tokens 200 >"$out/int4-accuracy.json" 2>"$out/int4-accuracy.log"; echo "acc rc $?" ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
keep
