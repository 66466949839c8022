#!/usr/bin/env bash
# How the shipped value heads are made and measured on a GPU machine: rollouts of GSM8K train problems, Monte-Carlo
# values on a subset, features and training, then accuracy on GSM8K test against greedy decoding and the judge PRM.
# One engine process does not fill an H200 (its host work is serial), so each phase runs SHARDS processes over
# disjoint problems, each time-boxed by SIGTERM (rollouts and MC values keep what they finished and resume; SIGINT
# would not do: a background job of a non-interactive shell starts with SIGINT ignored).
#
# Usage: head_pipeline.sh PHASE MODEL DATA_DIR WORK
#   PHASE: rollouts | mc | train | eval        MODEL: registry name   DATA_DIR: holds gsm8k_train/test.jsonl
# Settings (environment): SHARDS (16), TRAIN (problems, 1200), SECONDS_BOX (time box of rollouts/mc, 300),
#   MC_PROBLEMS (per shard, 12), EVAL (test problems, 200), HEAD (head file for eval, WORK/head-MODEL.safetensors),
#   DEVICE_SAMPLING (auto)
set -uo pipefail
phase=$1 model=$2 data=$3 work=$4
shards=${SHARDS:-16} train=${TRAIN:-1200} seconds=${SECONDS_BOX:-300} evaln=${EVAL:-200}
head=${HEAD:-$work/head-$model.safetensors}
gpu="--model $model --gpu-layers 999 --threads 1 --device-sampling ${DEVICE_SAMPLING:-auto}"
mkdir -p "$work"

shard_range() {  # i total -> "offset limit"
  local per=$(( ($2 + shards - 1) / shards ))
  echo "$(( $1 * per )) $per"
}

case $phase in
rollouts)
  for i in $(seq 0 $((shards - 1))); do
    read -r off lim <<<"$(shard_range "$i" "$train")"
    timeout -s TERM "$seconds" edgereason train-prm $gpu --dataset "$data/gsm8k_train.jsonl" --offset "$off" \
      --limit "$lim" --samples 8 --phases rollouts --rollouts "$work/rollouts-$i.jsonl" --work "$work" \
      --concurrency 8 >"$work/log-rollouts-$i.txt" 2>&1 &
  done
  wait ;;
mc)
  for i in $(seq 0 $((shards - 1))); do
    timeout -s TERM "$seconds" edgereason train-prm $gpu --phases mc --rollouts "$work/rollouts-$i.jsonl" \
      --work "$work" --mc-problems "${MC_PROBLEMS:-12}" --mc-completions 4 --concurrency 8 \
      >"$work/log-mc-$i.txt" 2>&1 &
  done
  wait ;;
train)
  files=()
  for f in "$work"/rollouts-*.jsonl; do files+=(--rollouts "$f"); done
  edgereason train-prm $gpu --phases features,train "${files[@]}" --work "$work" --out "$head" --no-plot \
    --kv-tokens 65536 ;;
eval)
  # name|flags: one bench per configuration, each over all shards side by side
  configs=(
    "greedy|--strategy best-of-n --beams 1 --temperature 0 --prm-format judge --policies baseline"
    "bo8-judge|--strategy best-of-n --beams 8 --vote weighted --prm-format judge --policies baseline"
    "beam8-head|--beams 8 --width 4 --prm-format head --prm-head $head --policies baseline,edge"
  )
  for i in $(seq 0 $((shards - 1))); do
    read -r off lim <<<"$(shard_range "$i" "$evaln")"
    (for c in "${configs[@]}"; do
       name=${c%%|*} flags=${c#*|}
       edgereason bench $gpu --dataset "$data/gsm8k_test.jsonl" --offset "$off" --limit "$lim" $flags \
         --max-steps 20 --max-tokens 1024 --concurrency 8 --kv-tokens 32768 --no-plots --out "$work/eval/$name-$i" >"$work/log-eval-$name-$i.txt" 2>&1
     done) &
  done
  wait
  args=()
  for c in "${configs[@]}"; do name=${c%%|*}; args+=("$name=$work/eval/$name-*"); done
  python3 "$(dirname "$0")/merge_shards.py" "$work/eval-summary.json" "${args[@]}" ;;
*)
  echo "unknown phase $phase (rollouts, mc, train, eval)" >&2; exit 2 ;;
esac
