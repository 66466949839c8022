#!/usr/bin/env bash
# On-policy training data for a value head (issue 12): the shipped head guides beam searches over the same train
# problems as the independent samples it learnt from, so the next head also sees the paths such a search keeps, its
# mistakes among them. Then one head on both kinds of path and beam search with it on GSM8K test, in one run on one
# GPU machine.
#
# Usage: on_policy.sh ROLLOUT_DIR DATA_DIR WORK
#   ROLLOUT_DIR: shard-*.jsonl (independent samples of the generator, split by line) and mc.jsonl
#   DATA_DIR: gsm8k_test.jsonl    WORK: output folder (beam/, feat/, head/, configs.txt, sweep/)
# Settings (environment): GENERATOR (qwen2.5-coder-0.5b), BACKBONE (qwen2.5-coder-1.5b: the rollouts' PRM, with the
#   head that ships for it, and the new head's backbone), ROLLOUT_BOX (seconds of the beam rollouts, 420; a shard
#   keeps the problems it finished), LAYERS (the new head's --layers, none), GPU_LAYERS (999; 0 for a dry run on a
#   CPU build), EVAL_BOX (seconds of the evaluation, 700), EXTRA (more flags for every engine command)
# Run on an H200 (benchmarks/results/on-policy-h200/): the head ranks validation steps a little better and its
# beam search answers no better than the shipped head's.
set -uo pipefail
rollouts=$1 data=$2 work=$3
gen=${GENERATOR:-qwen2.5-coder-0.5b} bb=${BACKBONE:-qwen2.5-coder-1.5b}
here=$(cd "$(dirname "$0")" && pwd)
G="--gpu-layers ${GPU_LAYERS:-999} --threads 1"
extra=${EXTRA:-}
mkdir -p "$work/beam" "$work/feat" "$work/head" && cp "$rollouts/mc.jsonl" "$work/feat/"

for f in "$rollouts"/shard-*.jsonl; do  # beam rollouts of each shard's problems, one process per shard
  i=$(basename "$f" .jsonl)
  python3 -c 'import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(line)
    print(json.dumps({"id": r["id"], "problem": r["problem"], "answer": r["gold"]}))' "$f" \
    >"$work/beam/problems-$i.jsonl"
  # shellcheck disable=SC2086  # flags are words
  timeout -s TERM "${ROLLOUT_BOX:-420}" edgereason train-prm --model "$gen" --prm "$bb" $G --phases rollouts \
    --strategy beam --samples 8 --width 4 --dataset "$work/beam/problems-$i.jsonl" \
    --rollouts "$work/beam/$i.jsonl" --work "$work/beam" --concurrency 8 $extra >"$work/beam/log-$i.txt" 2>&1 &
done
wait
echo "beam rollouts done: ${SECONDS} s, $(cat "$work"/beam/shard-*.jsonl | wc -l) problems"

for f in "$rollouts"/shard-*.jsonl; do  # features: each shard's samples and beam paths, merged by problem
  i=$(basename "$f" .jsonl)
  # shellcheck disable=SC2086
  edgereason train-prm --model "$gen" --backbone "$bb" $G --phases features --rollouts "$f" \
    --rollouts "$work/beam/$i.jsonl" --work "$work/feat" --features "$work/feat/features-$i.npz" --kv-tokens 65536 \
    ${LAYERS:+--layers $LAYERS} \
    >"$work/feat/log-$i.txt" 2>&1 &
done
wait
echo "features done: ${SECONDS} s"
feats=(); for f in "$work"/feat/features-*.npz; do feats+=(--features "$f"); done
# shellcheck disable=SC2086
edgereason train-prm --model "$gen" --backbone "$bb" --phases train "${feats[@]}" ${LAYERS:+--layers $LAYERS} \
  --work "$work/head" --out "$work/head/head.safetensors" >"$work/head/log.txt" 2>&1 || exit 1
echo "training done: ${SECONDS} s"
grep '^{' "$work/head/log.txt"  # the head's validation AUCs

beam="--model $gen --prm $bb --prm-head $work/head/head.safetensors --beams 8 --width 4 --vote weighted $extra"
cat >"$work/configs.txt" <<CONFIGS
onp-top-s0  $beam --policies baseline --seed 0
onp-top-s1  $beam --policies baseline --seed 1
onp-top-s2  $beam --policies baseline --seed 2
onp-edge-s0 $beam --policies edge --seed 0
CONFIGS
SECONDS_BOX=${EVAL_BOX:-700} bash "$here/../eval_sweep.sh" "$work/configs.txt" "$data" "$work/sweep"
echo "evaluation done: ${SECONDS} s"
