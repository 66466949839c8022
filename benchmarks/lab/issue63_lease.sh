#!/usr/bin/env bash
# Issue 63 within one 30-minute GPU lease (docs/gpu-machine.md has the order of calls). From the call's checkout,
# one PART a call; results go to $OUT as they finish (a call cut by its limit still brings back what finished).
#   llama:   join the prebuilt llama-cpp-python parts (carried in .device/llama) into /root/site
#   setup:   install the wheels (.device/whl) and the project; keep the data (.device/data) in /root/data
#   piece:   move the model piece carried in .device/p/* to /root/m
#   core:    join the models; the CUDA tests of the torch backend and the engine; the raw pass at 1, 8 and 64
#            rows (torch uncompiled and compiled, llama.cpp); the int4 linears of the 1.5B's own Q4_K weights
#            against bf16; `solve` whole process with its start-up phases (--verbose): torch cold and warm,
#            llama.cpp, then `auto` after both were measured                                            [~450 s]
#   int4:    the torch pass of the 1.5B at 1, 8 and 64 rows with bf16 and with int4 weights (--torch-weights),
#            uncompiled and compiled, each kind's weight bytes; their logits on llama.cpp's greedy answers to 3
#            GSM8K problems; `solve` whole process with each kind                                      [~250 s]
#   search:  the 1.5B's recipe one problem at a time (LIMIT problems) and 16 at once on both backends; the beam
#            recipe's edge against baseline on torch, alternating                                         [~500 s]
set -uo pipefail
part=$1 limit=${2:-8}
src=$PWD
export PYTHONPATH=/root/site PYTHONUNBUFFERED=1 EDGEREASON_HOME=/root/.cache/edgereason
mkdir -p /root/proj /root/site /root/m /root/data /root/out
out=/root/out/$part
mkdir -p "$out"
keep() { tar czf "$OUT/$part.tgz" -C "$out" . 2>/dev/null; }
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
refresh() {  # the call's code into /root/proj (the editable install points there)
  cd /root/proj || exit 1
  for d in benchmarks edgereason backends ui tests profiles examples; do rm -rf "$d" && cp -a "$src/$d" .; done
  cp -a "$src/pyproject.toml" .
}
models() {
  mkdir -p "$EDGEREASON_HOME/models"
  [ -s "$EDGEREASON_HOME/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" ] ||
    cat /root/m/q15.* >"$EDGEREASON_HOME/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
  [ -s "$EDGEREASON_HOME/models/SmolLM2-135M-Instruct.Q4_1.gguf" ] ||
    cat /root/m/s135.* >"$EDGEREASON_HOME/models/SmolLM2-135M-Instruct.Q4_1.gguf"
}
case $part in
  llama)
    cat .device/llama/llama_cuda_sm90.tar.xz.part-* >/root/llama_cuda_sm90.tar.xz
    (cd /root && cp "$src"/.device/llama/*.sha256 . && sha256sum -c llama_cuda_sm90.tar.xz.sha256) || exit 1
    tar xJf /root/llama_cuda_sm90.tar.xz -C /root/site && echo LLAMA_OK ;;
  setup)
    cp -a .device/data/. /root/data/
    python3 -m pip install -q --no-index --no-deps --target /root/site .device/whl/diskcache-*.whl
    python3 -m pip install -q --no-index --find-links .device/whl textual psutil math-verify matplotlib gguf \
      safetensors httpx pytest-asyncio
    refresh
    python3 -m pip install -q --no-deps --no-build-isolation -e /root/proj
    python3 -c "import llama_cpp.llama_cpp as L, torch; print('gpu offload', L.llama_supports_gpu_offload(), \
torch.__version__, torch.cuda.get_device_name())"
    echo SETUP_DONE ;;
  piece)
    mv .device/p/*/* /root/m/ && ls /root/m | wc -l ;;
  core)
    refresh
    models
    edgereason models list >"$out/models.txt" 2>&1
    nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv >"$out/card.txt" 2>&1
    timeout 170 python3 -m pytest -q -x -p no:cacheprovider -k "cuda or engine or int4 and not int4_layers" \
      tests/backends/torch \
      tests/engine/test_engine.py tests/backends/test_cuda_process.py >"$out/pytest-cuda.txt" 2>&1
    echo "pytest rc $?" >>"$out/pytest-cuda.txt"; tail -3 "$out/pytest-cuda.txt"; keep
    timeout 100 python3 benchmarks/torch_pass.py --model qwen2.5-coder-1.5b --rows 1,8,64 --skip torch-eager \
      --steps 10 >"$out/pass-1.5b.json" 2>"$out/pass-1.5b.log"; echo "pass rc $?"; keep
    timeout 90 python3 benchmarks/int4_pass.py --model qwen2.5-coder-1.5b --rows 1,8,64 \
      >"$out/int4-pass-1.5b.json" 2>"$out/int4-pass-1.5b.log"; echo "int4 rc $?"; keep
    rm -rf "$EDGEREASON_HOME/torch/inductor-"* "$EDGEREASON_HOME/torch/compile-"*
    LIMIT_S=90 solve_time torch-cold
    solve_time torch-warm
    solve_time llamacpp-cold
    solve_time llamacpp-warm
    solve_time torch-warm2
    solve_time auto-after
    ls -la "$EDGEREASON_HOME" >"$out/home.txt" 2>&1; cp "$EDGEREASON_HOME"/*.json "$out/" 2>/dev/null ;;
  search)
    refresh
    models
    for backend in torch llamacpp; do
      timeout 75 edgereason bench $common $q15 --limit "$limit" --concurrency 1 --policies baseline \
        --backend $backend --out "$out/recipe-$backend" --force >"$out/recipe-$backend.log" 2>&1
      echo "recipe $backend rc $?"; keep
    done
    for backend in torch llamacpp; do
      timeout 50 edgereason bench $common $q15 --limit 16 --policies baseline --backend $backend \
        --out "$out/at16-$backend" --force >"$out/at16-$backend.log" 2>&1
      echo "at16 $backend rc $?"; keep
    done
    timeout 100 edgereason bench $common $beam --offset 20 --limit 4 --concurrency 1 --policies baseline,edge --repeat 2 \
      --backend torch --out "$out/beam-torch" --force >"$out/beam-torch.log" 2>&1
    echo "beam rc $?" ;;
  int4)
    refresh
    models
    for setting in graphs fused; do  # the graphs uncompiled, then compiled (a compile for each kind)
      skip=torch-eager,llamacpp,torch-$([ $setting = graphs ] && echo fused || echo graphs)
      timeout 75 python3 benchmarks/torch_pass.py --model qwen2.5-coder-1.5b --rows 1,8,64 --weights bf16,int4 \
        --skip $skip --steps 10 >"$out/pass-int4-$setting.json" 2>"$out/pass-int4-$setting.log"
      echo "pass int4 $setting rc $?"; keep
    done
    timeout 60 python3 benchmarks/int4_accuracy.py --model qwen2.5-coder-1.5b --dataset /root/data/gsm8k_test.jsonl \
      --problems 3 --max-tokens 200 >"$out/int4-accuracy.json" 2>"$out/int4-accuracy.log"
    echo "int4 accuracy rc $?"; keep
    LIMIT_S=45 solve_time torch-bf16 --torch-weights bf16
    LIMIT_S=45 solve_time torch-int4 --torch-weights int4 ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
keep
