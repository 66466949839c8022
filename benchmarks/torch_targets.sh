#!/usr/bin/env bash
# Issue 47's targets on one GPU, the llama.cpp and torch backends side by side in one run, --gpu-memory 24GiB.
#   pass:   raw decode pass of the 1.5B by rows (torch: CUDA graphs and eager; llama.cpp)
#   recipe: the 1.5B's default recipe (best-of-8, T 0.6, its value head, weighted vote), one problem at a time
#   at16:   16 problems at once, the 0.5B's beam recipe (beam N=8 M=4, T 0.6, the 1.5B's head for the 0.5B)
#   one:    edge against baseline one problem at a time on the 0.5B's beam recipe
#   frontier: accuracy of torch_frontier.txt's searches on each backend (eval_sweep.sh: shards over disjoint
#           problems), on the first 200 GSM8K and the first 100 MATH-500 problems; then the seconds a problem of
#           each search one problem at a time on LIMIT problems (accuracy needs all problems; latency does not)
# Usage: torch_targets.sh PART DATA_DIR OUT [LIMIT]   (PART: pass, recipe, at16, one, frontier; LIMIT: problems
#   of recipe (50) and of frontier's latency runs (20))
set -uo pipefail
part=$1 data=$2 out=$3 limit=${4:-50}
here=$(dirname "$0")
mkdir -p "$out"
common="--dataset $data/gsm8k_test.jsonl --gpu-memory 24GiB --max-steps 20 --max-tokens 1024 --no-plots --force"
q05="--model qwen2.5-coder-0.5b --prm qwen2.5-coder-1.5b --strategy beam --beams 8 --width 4 --temperature 0.6 \
     --vote weighted"
q15="--model qwen2.5-coder-1.5b --strategy best-of-n --beams 8 --temperature 0.6 --vote weighted"
case $part in
  pass)
    python3 "$here/torch_pass.py" --model qwen2.5-coder-1.5b --rows 1,8,32,64,128 >"$out/pass-1.5b.json" \
      2>"$out/pass-1.5b.log"
    echo "pass rc $?" ;;
  recipe)
    for backend in torch llamacpp; do
      edgereason bench $common $q15 --limit "$limit" --concurrency 1 --policies baseline,edge --backend $backend \
        --out "$out/recipe-$backend" >"$out/recipe-$backend.log" 2>&1
      echo "recipe $backend rc $?"
    done ;;
  at16)
    for backend in torch llamacpp; do
      edgereason bench $common $q05 --limit 16 --policies baseline,edge --backend $backend \
        --out "$out/at16-$backend" >"$out/at16-$backend.log" 2>&1
      echo "at16 $backend rc $?"
    done ;;
  one)
    for backend in torch llamacpp; do
      edgereason bench $common $q05 --offset 16 --limit 8 --concurrency 1 --policies baseline,edge \
        --backend $backend --out "$out/one-$backend" >"$out/one-$backend.log" 2>&1
      echo "one $backend rc $?"
    done ;;
  frontier)
    for backend in torch llamacpp; do
      # torch fills the GPU from fewer processes (a row costs little): 4 shards of 16 problems at once
      [ $backend = torch ] && shards=4 || shards=16
      for set in gsm8k_test:200 math500_test:100; do
        name=${set%%:*} first=${set##*:}
        COMMON="--backend $backend --policies auto --gpu-memory 24GiB --threads 1 --max-steps 20 --max-tokens 1024 \
          --concurrency 16 --no-plots" SHARDS=$shards PER_SHARD=$(((first + shards - 1) / shards)) FIRST=$first \
          DATASET=$name.jsonl SECONDS_BOX=${SECONDS_BOX:-1200} \
          bash "$here/eval_sweep.sh" "$here/torch_frontier.txt" "$data" "$out/frontier-$backend-$name" \
          >"$out/frontier-$backend-$name.log" 2>&1
        echo "frontier accuracy $backend $name rc $?"
      done
      grep -v '^\s*\(#\|$\)' "$here/torch_frontier.txt" | while read -r name flags; do
        # shellcheck disable=SC2086  # flags are words
        edgereason bench $common $flags --backend $backend --policies auto --limit "${4:-20}" --concurrency 1 \
          --out "$out/latency-$backend/$name" >"$out/latency-$backend-$name.log" 2>&1
        echo "frontier latency $backend $name rc $?"
      done
    done ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
