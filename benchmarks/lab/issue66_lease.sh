#!/usr/bin/env bash
# Issue 66 within one GPU lease: vLLM on the card, the remote backend against it, and the same searches in process
# on torch beside it. The machine's set-up is issue63_lease.sh's (`llama`, `setup`, then one `piece` call a model
# or wheel piece: the 1.5B as q15.*, SmolLM2 as s135.*, the vLLM wheels as vw.*, made by
# benchmarks/lab/vllm_wheels.sh). Then, from the call's checkout, one PART a call, results in $OUT as they finish:
#   vsetup: vLLM's wheels into /root/vsite (what the machine lacks only: its torch stays); the two models exported
#           as Hugging Face folders; the 1.5B served on :8000 (a third of the card, prefix caching on); the remote
#           backend's vLLM tests (SmolLM2 served); `solve` through the server, the value head here or the judge
#           served                                                                                    [~400 s]
#   bench:  the default recipe (best-of-8, its value head) one problem at a time and 16 at once, then the beam
#           recipe, each in process on torch and through vLLM, side by side                           [~450 s]
#   more:   two servers of the 1.5B on the card: a bench over both, then one killed mid-bench; then vLLM's own
#           LLM.generate (n=8) on the same 16 problems, scored by the same head (benchmarks/vllm_generate.py) [~450 s]
set -uo pipefail
part=$1 limit=${2:-8}
src=$PWD out=/root/out/$part
# shellcheck source=benchmarks/lab/lease_lib.sh
source "$src/benchmarks/lab/lease_lib.sh"  # the environment, /root's folders, keep, refresh, models
mkdir -p /root/hf
common="--dataset /root/data/gsm8k_test.jsonl --gpu-memory 24GiB --max-steps 20 --max-tokens 1024 --no-plots"
common="$common --model qwen2.5-coder-1.5b --prm-format head --temperature 0.6 --vote weighted --policies baseline"
recipe="--strategy best-of-n --beams 8"
beam="--strategy beam --beams 8 --width 2"
url=http://127.0.0.1:8000
remote="--backend remote --base-url $url"
q="Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her \
friends every day with four. She sells the remainder at the farmers' market daily for \$2 per fresh duck egg. How \
much in dollars does she make every day at the farmers' market?"
serve() {  # PORT SHARE: the 1.5B's folder served by vLLM, detached (it outlives the call), its log in /root/out
  PYTHONPATH=/root/vsite setsid nohup python3 -m vllm.entrypoints.openai.api_server --model /root/hf/q15 \
    --host 127.0.0.1 --port "$1" --gpu-memory-utilization "$2" --max-model-len 8192 --enable-prefix-caching \
    --max-logprobs 20 >"/root/out/vllm-$1.log" 2>&1 &
  echo $! >"/root/vllm-$1.pid"
}
ready() {  # PORT LIMIT_S: wait for the server's /v1/models
  local t0=$SECONDS
  while ((SECONDS - t0 < $2)); do
    curl -sf "http://127.0.0.1:$1/v1/models" >/dev/null && { echo "vllm :$1 ready after $((SECONDS - t0)) s"; return 0; }
    sleep 2
  done
  echo "vllm :$1 not ready after $2 s"; tail -30 "/root/out/vllm-$1.log"; return 1
}
solve_time() {  # NAME, then solve's flags: the whole process timed
  local t0 rc run=$1
  shift
  t0=$(date +%s.%N)
  timeout "${LIMIT_S:-90}" edgereason solve "$q" --json --verbose "$@" >"$out/solve-$run.json" 2>"$out/solve-$run.log"
  rc=$?
  echo "solve $run rc $rc $(awk "BEGIN {print $(date +%s.%N) - $t0}") s" | tee -a "$out/solve-times.txt"; keep
}
bench() {  # NAME LIMIT_S, then bench's flags
  local run=$1 lim=$2
  shift 2
  timeout "$lim" edgereason bench $common "$@" --out "$out/$run" --force >"$out/$run.log" 2>&1
  echo "bench $run rc $?"; tail -4 "$out/$run.log"; keep
}
case $part in
  vsetup)
    refresh
    models
    cd /root && cat /root/m/vw.0* >/root/vw.tar && sha256sum -c /root/data/vw.tar.sha256 && tar xf /root/vw.tar -C /root
    cd /root/proj || exit 1
    python3 benchmarks/lab/install_missing_wheels.py /root/vw /root/vsite 2>&1 | tail -3
    PYTHONPATH=/root/vsite python3 -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', \
torch.__version__, 'transformers', transformers.__version__)" 2>&1 | tail -1 | tee "$out/versions.txt"
    nvidia-smi --query-gpu=name,memory.total --format=csv >"$out/card.txt" 2>&1
    edgereason models export qwen2.5-coder-1.5b --format hf /root/hf/q15 --json >"$out/export-q15.json" 2>&1
    edgereason models export smollm2-135m --format hf /root/hf/s135 --json >"$out/export-s135.json" 2>&1
    tail -c 300 "$out/export-q15.json"; keep
    serve 8000 0.3
    ready 8000 300 | tee "$out/ready-8000.txt"; keep
    EDGEREASON_VLLM_SITE=/root/vsite EDGEREASON_VLLM_MODEL=/root/hf/s135 timeout 330 python3 -m pytest -q \
      -p no:cacheprovider -rs tests/backends/remote/test_vllm.py >"$out/pytest-vllm.txt" 2>&1
    echo "pytest rc $?" >>"$out/pytest-vllm.txt"; tail -5 "$out/pytest-vllm.txt"; keep
    solve_time remote-head $remote --model qwen2.5-coder-1.5b --prm-format head
    solve_time remote-judge $remote --model qwen2.5-coder-1.5b --prm-format judge
    solve_time torch --backend torch --model qwen2.5-coder-1.5b --gpu-memory 24GiB
    cp /root/out/vllm-8000.log "$out/" ;;
  bench)
    refresh
    ready 8000 120 || exit 1
    bench recipe-torch 80 $recipe --limit "$limit" --concurrency 1 --backend torch
    bench recipe-remote 100 $recipe --limit "$limit" --concurrency 1 $remote
    bench at16-torch 60 $recipe --limit 16 --backend torch
    bench at16-remote 80 $recipe --limit 16 $remote
    bench beam-torch 60 $beam --offset 20 --limit 4 --concurrency 1 --backend torch
    bench beam-remote 80 $beam --offset 20 --limit 4 --concurrency 1 $remote ;;
  more)
    refresh
    serve 8001 0.3
    ready 8000 60 && ready 8001 240 || exit 1
    both="--backend remote --base-url $url,http://127.0.0.1:8001"
    bench at16-two 80 $recipe --limit 16 $both
    # one of the two killed 15 s into the bench: its requests go to the other, no problem lost
    (sleep 15 && kill -9 -- "-$(cat /root/vllm-8001.pid)" && echo "killed :8001 at 15 s") &
    bench at16-failover 120 $recipe --offset 16 --limit 16 $both
    grep -h "stopped answering" "$out/at16-failover.log" | tee "$out/failover-line.txt"
    cp /root/out/vllm-8001.log "$out/"; keep
    # (c): vLLM's own LLM.generate with n=8 on the same 16 problems, scored by the same head
    PYTHONPATH=/root/vsite:/root/site timeout 240 python3 benchmarks/vllm_generate.py --hf /root/hf/q15 \
      --dataset /root/data/gsm8k_test.jsonl --limit 16 --n 8 >"$out/vllm-generate.json" 2>"$out/vllm-generate.log"
    echo "vllm_generate rc $?"; tail -c 600 "$out/vllm-generate.json" ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
keep
