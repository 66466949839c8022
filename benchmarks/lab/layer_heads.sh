#!/usr/bin/env bash
# Value heads that read middle layers of the backbone (train-prm --layers), beside one on its final layer, all from
# one feature pass over the same rollouts, so their validation problems are the same; the best of them (within-problem
# step AUC + within-problem final-step AUC, pick_head.py --and-final) then runs beam search N=8 M=4 (seeds 0-2, and
# edge) and best-of-8 on GSM8K test, in one run on one GPU machine (issue 12;
# benchmarks/results/layer-heads-h200/README.md).
#
# Usage: layer_heads.sh ROLLOUT_DIR DATA_DIR WORK
#   ROLLOUT_DIR: shard-*.jsonl (the generator's rollouts, split by line) and mc.jsonl
#   DATA_DIR: gsm8k_test.jsonl    WORK: output folder (feat/, heads/NAME/, configs.txt, sweep/)
# Settings (environment): GENERATOR (qwen2.5-coder-0.5b), BACKBONE (qwen2.5-coder-1.5b), LAYERS ("14 19": 1/2 and
#   2/3 of the 1.5B's 28, where the CPU probe's 0.5B ranked finals best), GPU_LAYERS (999; 0 for a dry run on a CPU
#   build), EVAL_BOX (seconds of the evaluation, 900), EXTRA (more flags for every bench, e.g. "--max-steps 2")
set -uo pipefail
rollouts=$1 data=$2 work=$3
gen=${GENERATOR:-qwen2.5-coder-0.5b} bb=${BACKBONE:-qwen2.5-coder-1.5b} layers=${LAYERS:-"14 19"}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/feat" "$work/heads" && cp "$rollouts/mc.jsonl" "$work/feat/"

for f in "$rollouts"/shard-*.jsonl; do  # features: one process per rollout shard, all at once
  i=$(basename "$f" .jsonl)
  # shellcheck disable=SC2086  # layers are words
  edgereason train-prm --model "$gen" --backbone "$bb" --gpu-layers "${GPU_LAYERS:-999}" --threads 1 --phases features \
    --rollouts "$f" --work "$work/feat" --features "$work/feat/features-$i.npz" --kv-tokens 65536 --layers $layers \
    >"$work/feat/log-$i.txt" 2>&1 &
done
wait
echo "features done: ${SECONDS} s"

declare -A sets=([final]="")  # variant name -> --layers (none: the final layer's logits, as the shipped head)
for l in $layers; do sets[layer$l]=$l; done
sets[layers-${layers// /-}]=$layers
threads=$(( ($(nproc) + ${#sets[@]} - 1) / ${#sets[@]} ))  # torch in each would take every core: share them
feats=(); for f in "$work"/feat/features-*.npz; do feats+=(--features "$f"); done
for name in "${!sets[@]}"; do
  v="$work/heads/$name" && mkdir -p "$v"
  # shellcheck disable=SC2086
  edgereason train-prm --model "$gen" --backbone "$bb" --phases train "${feats[@]}" ${sets[$name]:+--layers ${sets[$name]}} \
    --threads "$threads" --work "$v" --out "$v/head.safetensors" >"$v/log.txt" 2>&1 &
done
wait
echo "training done: ${SECONDS} s"
python3 "$here/pick_head.py" --variants "*" --and-final "$gen" "$work/heads" "$bb" | tee "$work/heads/pick.txt"
head=$(cat "$work/heads/chosen-$bb.txt") || exit 1

beam="--model $gen --prm $bb --prm-head $head --beams 8 --vote weighted ${EXTRA:-}"
cat >"$work/configs.txt" <<CONFIGS
lay-top-s0  $beam --width 4 --policies baseline --seed 0
lay-bo8-s0  $beam --strategy best-of-n --policies baseline --seed 0
lay-top-s1  $beam --width 4 --policies baseline --seed 1
lay-top-s2  $beam --width 4 --policies baseline --seed 2
lay-edge-s0 $beam --width 4 --policies edge --seed 0
CONFIGS
SECONDS_BOX=${EVAL_BOX:-900} bash "$here/../eval_sweep.sh" "$work/configs.txt" "$data" "$work/sweep"
echo "evaluation done: ${SECONDS} s"
