#!/usr/bin/env bash
# Issue 48's targets: the search on served models (vLLM, SGLang, or llama-cpp-python's server for a CPU dry run)
# beside the local llama.cpp backend, in one run.
#   one:  64 problems at once of the 1.5B's best-of-8 (T 0.6, weighted vote): local llama.cpp; one server with the
#         value head here (--prm-format head); one server with the judge served; and the 0.5B's beam recipe served
#   two:  the same best-of-8 on two servers (two instances on one GPU, each with half its memory) against one
#   kill: two servers, one killed KILL_AFTER (60) s into the run: every problem must still finish (bench's problem count)
# Usage: serve_targets.sh PART DATA_DIR OUT   Environment: SERVER (vllm, sglang, llamacpp; default vllm),
#   MODEL (registry name, qwen2.5-coder-1.5b), FOLDER (a Hugging Face folder of MODEL, made with
#   `edgereason models export MODEL --format hf FOLDER` where missing), LIMIT (64), LOCAL (extra flags of the local
#   run, e.g. "--gpu-layers 999"), BASE_PORT (8100; not PORT, which the servers read themselves), HEAD (a --prm-head file; default: the model's shipped head),
#   SMALL_MODEL / SMALL_FOLDER (the beam recipe's model, qwen2.5-coder-0.5b), EXTRA (flags added to every bench)
set -uo pipefail
part=$1 data=$2 out=$3
server=${SERVER:-vllm} model=${MODEL:-qwen2.5-coder-1.5b} limit=${LIMIT:-64} port=${BASE_PORT:-8100}
folder=${FOLDER:-$out/$model-hf}
mkdir -p "$out"
common="--dataset $data/gsm8k_test.jsonl --limit $limit --concurrency $limit --max-steps 20 --max-tokens 1024 \
  --policies edge --no-plots --force --model $model ${EXTRA:-}"
bo8="--strategy best-of-n --beams 8 --temperature 0.6 --vote weighted"
pids=()

start() {  # start PORT MEMORY_FRACTION: one server of the folder, in the background; waits until it answers
  local p=$1 share=$2
  case $server in
    vllm) vllm serve "$folder" --port "$p" --served-model-name "$model" --enable-prefix-caching \
            --gpu-memory-utilization "$share" --max-model-len 8192 >"$out/server-$p.log" 2>&1 & ;;
    sglang) python3 -m sglang.launch_server --model-path "$folder" --port "$p" --served-model-name "$model" \
              --mem-fraction-static "$share" --context-length 8192 >"$out/server-$p.log" 2>&1 & ;;
    llamacpp) python3 -m edgereason.backends.remote.llamacpp_server --model "$(edgereason models path "$model")" \
                --port "$p" --n_ctx 8192 --n_threads 1 >"$out/server-$p.log" 2>&1 & ;;
    *) echo "unknown SERVER $server" >&2; exit 2 ;;
  esac
  pids+=($!)
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$p/v1/models" >/dev/null && return 0; sleep 1; done
  echo "the $server server on port $p did not start: $out/server-$p.log" >&2; exit 1
}

stop_all() { kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; pids=(); }
trap stop_all EXIT

run() {  # run NAME FLAGS...: one bench, its rc said
  local name=$1; shift
  # shellcheck disable=SC2086  # flags are words
  edgereason bench $common "$@" --out "$out/$name" >"$out/$name.log" 2>&1
  echo "$name rc $?"
}

[ $server = llamacpp ] || [ -d "$folder" ] || edgereason models export "$model" --format hf "$folder" --json \
  >"$out/export.json" 2>"$out/export.log" || { echo "export failed: $out/export.log" >&2; exit 1; }
url1=http://127.0.0.1:$port url2=http://127.0.0.1:$((port + 1))
case $part in
  one)
    run local $bo8 ${LOCAL:-}
    start "$port" 0.45
    run served-head $bo8 --backend remote --base-url "$url1" --prm-format head ${HEAD:+--prm-head $HEAD}
    run served-judge $bo8 --backend remote --base-url "$url1" --prm-format judge
    stop_all
    common=${common/--model $model/--model ${SMALL_MODEL:-qwen2.5-coder-0.5b}}
    model=${SMALL_MODEL:-qwen2.5-coder-0.5b} folder=${SMALL_FOLDER:-$out/qwen2.5-coder-0.5b-hf}
    [ $server = llamacpp ] || [ -d "$folder" ] || edgereason models export $model --format hf "$folder" >/dev/null 2>&1
    start "$port" 0.45
    run served-q05-beam --strategy beam --beams 8 --width 4 --temperature 0.6 --vote weighted --backend remote \
      --base-url "$url1" --prm-format judge ;;
  two)
    start "$port" 0.45
    start $((port + 1)) 0.45
    run two-one $bo8 --backend remote --base-url "$url1" --prm-format head ${HEAD:+--prm-head $HEAD}
    run two-two $bo8 --backend remote --base-url "$url1,$url2" --prm-format head ${HEAD:+--prm-head $HEAD} ;;
  kill)
    start "$port" 0.45
    start $((port + 1)) 0.45
    ( sleep "${KILL_AFTER:-60}"; kill "${pids[1]}" ) &
    run kill-one $bo8 --backend remote --base-url "$url1,$url2" --prm-format head ${HEAD:+--prm-head $HEAD} ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
