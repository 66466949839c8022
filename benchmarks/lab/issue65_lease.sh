#!/usr/bin/env bash
# Issue 65 on a GPU: the torch backend after its rework (seam, pass layout, runners, loading) against the tree the
# review read (63126cb), on the CUDA path the CPU tests skip. From the call's checkout, one PART a call:
#   llama:  join the prebuilt llama-cpp-python parts (carried in .device/llama) into /root/site
#   setup:  the wheels (.device/whl), the data (.device/data), the project, and the tree before (.device/old)
#   piece:  move the SmolLM2 piece carried in .device/p/* to /root/m
#   tests:  the torch backend's tests on the GPU (the CUDA ones run here only)                             [<300 s]
#   bench:  bench and solve, before and after alternating, torch on the GPU; llama.cpp once beside them   [~100 s]
#   attention: bench alone, after run with each decode attention forced (bench's default on CUDA is the paged
#           kernel, which the tree before did not have), before beside them                             [~80 s]
set -uo pipefail
part=$1
src=$PWD out=/root/out/$part
# shellcheck source=benchmarks/lab/lease_lib.sh
source "$src/benchmarks/lab/lease_lib.sh"  # the environment, /root's folders, keep, refresh, models
bench="--dataset examples/gsm8k_sample.jsonl --model smollm2-135m --limit 6 --beams 4 --max-tokens 256
  --gpu-layers 999 --policies baseline --no-plots --force"
run_tree() {  # TREE (before|after) NAME BACKEND: bench, then solve's whole process, from that tree
  local dir=/root/proj t0
  [ "$1" = before ] && dir=/root/old
  t0=$(date +%s.%N)
  (cd "$dir" && timeout 120 python3 -m edgereason bench $bench --backend "$3" --out "$out/$2" \
    >"$out/$2.log" 2>&1)
  echo "$2 bench rc $? $(awk "BEGIN {print $(date +%s.%N) - $t0}") s" | tee -a "$out/times.txt"
  [ "${SOLVE:-1}" = 0 ] && { keep; return; }
  (cd "$dir" && timeout 60 python3 -m edgereason solve "What is 2+3?" --model smollm2-135m --backend "$3" \
    --gpu-layers 999 --json --verbose --max-tokens 64 --beams 2 >"$out/$2-solve.json" 2>"$out/$2-solve.log")
  echo "$2 solve rc $?" | tee -a "$out/times.txt"; keep
}
case $part in
  llama)
    join_llama ;;
  setup)
    rm -rf /root/old && mkdir -p /root/old && tar xzf .device/old/before-*.tar.gz -C /root/old
    install_project && echo SETUP_DONE ;;
  piece)
    mv .device/p/*/* /root/m/ && ls /root/m | wc -l ;;
  tests)
    refresh
    models
    nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv >"$out/card.txt" 2>&1
    timeout 500 python3 -m pytest -q -p no:cacheprovider tests/backends/torch tests/backends/test_cuda_process.py \
      tests/benchmarks/test_kernel_count.py >"$out/pytest-cuda.txt" 2>&1
    echo "pytest rc $?" >>"$out/pytest-cuda.txt"; tail -3 "$out/pytest-cuda.txt" ;;
  bench)
    refresh
    models
    cp -a "$src/examples" /root/old/
    for round in 1 2; do
      run_tree before "before-torch-$round" torch
      run_tree after "after-torch-$round" torch
    done
    run_tree after after-llamacpp llamacpp ;;
  attention)
    refresh
    models
    cp -a "$src/examples" /root/old/
    timeout 60 python3 -m pytest -q -x -p no:cacheprovider tests/backends/torch/test_torch_generator.py \
      -k next_token_agrees >"$out/pytest-next-token.txt" 2>&1; keep
    SOLVE=0 run_tree before before-torch-1 torch
    EDGEREASON_ATTENTION=sdpa-gathered SOLVE=0 run_tree after after-gathered torch
    EDGEREASON_ATTENTION=triton-paged SOLVE=0 run_tree after after-paged torch
    SOLVE=0 run_tree before before-torch-2 torch
    grep -h "rc\|tok" "$out/times.txt" ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
keep
