#!/usr/bin/env bash
# More train problems for a generator's head on a backbone, on one GPU machine: rollouts of GSM8K train problems the
# committed rollouts lack, a head retrained on old and new rollouts with the committed Monte-Carlo values, then beam
# search with it on GSM8K test (three seeds, then edge) in the processes and shards of the earlier runs, so their
# greedy and shipped-head rows compare with these. This made benchmarks/results/more-problems-h200/.
#
# Usage: more_problems.sh ROLLOUTS.jsonl.gz MC.jsonl.gz DATA_DIR WORK
#   ROLLOUTS, MC: the generator's head's rollouts and Monte-Carlo values (not tracked: regenerated as
#   benchmarks/results/head-GENERATOR/README.md says)
#   DATA_DIR: holds gsm8k_train.jsonl and gsm8k_test.jsonl    WORK: output folder
# Settings (environment): GENERATOR (qwen2.5-coder-0.5b), BACKBONE (qwen2.5-coder-1.5b), OFFSET (first train line,
#   2100: the committed rollouts stop at line 1,978), TRAIN (lines, 1600), ROLLOUT_BOX (time box of the rollouts
#   in s, 270), RANK_WEIGHTS ("0"), EVAL_BOX (of the evaluation, 900)
set -uo pipefail
rollouts=$1 mc=$2 data=$3 work=$4
gen=${GENERATOR:-qwen2.5-coder-0.5b} bb=${BACKBONE:-qwen2.5-coder-1.5b}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/new" "$work/R"

SHARDS=16 OFFSET=${OFFSET:-2100} TRAIN=${TRAIN:-1600} ROUND=new SECONDS_BOX=${ROLLOUT_BOX:-270} \
  bash "$here/head_pipeline.sh" rollouts "$gen" "$data" "$work/new"
python3 "$here/join_rollouts.py" "$work/rollouts-new.jsonl.gz" "$work"/new/rollouts-new-*.jsonl
echo "rollouts: ${SECONDS} s"

# 16 shards of old and new problems together: one features process each
zcat "$rollouts" "$work/rollouts-new.jsonl.gz" | split -n r/16 -d --additional-suffix=.jsonl - "$work/R/shard-"
zcat "$mc" >"$work/R/mc.jsonl"
GENERATOR=$gen BACKBONES=$bb RANK_WEIGHTS=${RANK_WEIGHTS:-0} CONFIGS=" " bash "$here/head_variants.sh" "$work/R" "$data" "$work/hv"
head=$(cat "$work/hv/heads/chosen-$bb.txt")
echo "head: $head, ${SECONDS} s"

beam="--model $gen --prm $bb --beams 8 --width 4 --vote weighted --prm-format head --prm-head $head"
cat >"$work/configs.txt" <<CFG
q05-morehead-s0       $beam --policies baseline --seed 0
q05-morehead-s1       $beam --policies baseline --seed 1
q05-morehead-s2       $beam --policies baseline --seed 2
q05-morehead-edge-s0  $beam --policies edge --seed 0
CFG
SECONDS_BOX=${EVAL_BOX:-900} bash "$here/../eval_sweep.sh" "$work/configs.txt" "$data" "$work/sweep"
echo "done: ${SECONDS} s"
