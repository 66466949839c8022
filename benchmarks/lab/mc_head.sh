#!/usr/bin/env bash
# Monte-Carlo values at scale for a generator's committed rollouts, a head on a backbone retrained with them, and
# beam search with that head on GSM8K test (three seeds) beside greedy, on one GPU machine. This made
# benchmarks/results/mc-head-h200/.
#
# Usage: mc_head.sh ROLLOUTS.jsonl.gz MC.jsonl.gz DATA_DIR WORK
#   ROLLOUTS, MC: the head's rollouts and Monte-Carlo values (not tracked: regenerated as
#   benchmarks/results/head-GENERATOR/README.md says)
#   DATA_DIR: holds gsm8k_test.jsonl    WORK: output folder
# Settings (environment): GENERATOR (qwen2.5-coder-0.5b), BACKBONE (qwen2.5-coder-1.5b), MC_PROBLEMS (problems a
#   process values, 26), MC_BOX (time box of the MC phase in s, 270), EVAL_BOX (of the evaluation, 660)
set -uo pipefail
rollouts=$1 mc=$2 data=$3 work=$4
gen=${GENERATOR:-qwen2.5-coder-0.5b} bb=${BACKBONE:-qwen2.5-coder-1.5b}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/R8" "$work/R16" "$work/mc"
# 8 shards for features and training, as head_variants.sh had them: the same problems are held out for validation,
# so the AUCs compare with the shipped head's; 16 for the MC phase, one process each (the host work is serial)
zcat "$rollouts" | split -n r/8 -d --additional-suffix=.jsonl - "$work/R8/shard-"
zcat "$rollouts" | split -n r/16 -d --additional-suffix=.jsonl - "$work/R16/shard-"
for f in "$work"/R16/shard-*.jsonl; do
  i=$(basename "$f" .jsonl)
  # SIGTERM, not SIGINT: a background job of a non-interactive shell ignores SIGINT; finished prefixes are kept
  timeout -s TERM "${MC_BOX:-270}" edgereason train-prm --model "$gen" --gpu-layers 999 --threads 1 --phases mc \
    --rollouts "$f" --work "$work/mc/$i" --mc-problems "${MC_PROBLEMS:-26}" --mc-completions 4 --concurrency 8 \
    >"$work/mc/log-$i.txt" 2>&1 &
done
wait
{ zcat "$mc"; cat "$work"/mc/shard-*/mc.jsonl; } >"$work/R8/mc.jsonl"
echo "mc: $(wc -l <"$work/R8/mc.jsonl") prefixes, ${SECONDS} s"
GENERATOR=$gen BACKBONES=$bb RANK_WEIGHTS="0 1" CONFIGS=" " bash "$here/head_variants.sh" "$work/R8" "$data" "$work/hv"
head=$(cat "$work/hv/heads/chosen-$bb.txt")
beam="--model $gen --prm $bb --beams 8 --width 4 --vote weighted --policies baseline --prm-format head --prm-head $head"
cat >"$work/configs.txt" <<CFG
q05-mchead-s0  $beam --seed 0
q05-greedy     --model $gen --strategy best-of-n --beams 1 --temperature 0 --prm-format judge --policies baseline
q05-mchead-s1  $beam --seed 1
q05-mchead-s2  $beam --seed 2
CFG
SECONDS_BOX=${EVAL_BOX:-660} bash "$here/../eval_sweep.sh" "$work/configs.txt" "$data" "$work/sweep"
echo "done: ${SECONDS} s"
