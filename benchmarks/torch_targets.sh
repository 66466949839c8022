#!/usr/bin/env bash
# Issue 47's targets on one GPU, the llama.cpp and torch backends side by side in one run, --gpu-memory 24GiB.
#   pass:   raw decode pass of the 1.5B by rows (torch: CUDA graphs and eager; llama.cpp)
#   recipe: the 1.5B's default recipe (best-of-8, T 0.6, its value head, weighted vote), one problem at a time
#   at16:   16 problems at once, the 0.5B's beam recipe (beam N=8 M=4, T 0.6, the 1.5B's head for the 0.5B)
#   one:    edge against baseline one problem at a time on the 0.5B's beam recipe
# Usage: torch_targets.sh PART DATA_DIR OUT [LIMIT]   (PART: pass, recipe, at16, one; LIMIT: recipe's problems)
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
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
