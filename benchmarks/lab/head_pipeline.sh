#!/usr/bin/env bash
# How the shipped value heads are made and measured on a GPU machine: rollouts of GSM8K train problems, Monte-Carlo
# values on a subset, features and training, then accuracy on GSM8K test against greedy decoding and the judge PRM.
# One engine process does not fill an H200 (its host work is serial), so the GPU phases run SHARDS processes over
# disjoint problems, each time-boxed by SIGTERM (rollouts and MC values keep what they finished and resume; SIGINT
# would not do: a background job of a non-interactive shell starts with SIGINT ignored). CUDA_VISIBLE_DEVICES picks
# the GPU, so two models can run their pipelines side by side on two GPUs.
#
# Usage: head_pipeline.sh PHASE MODEL DATA_DIR WORK
#   PHASE: rollouts | mc | features | train | eval   MODEL: registry name   DATA_DIR: holds gsm8k_train/test.jsonl
# Settings (environment): SHARDS (16), OFFSET (first train problem, 0), TRAIN (train problems, 1200), ROUND (name of
#   this round's rollout files, r0), SECONDS_BOX (time box of rollouts/mc, 300), MC_PROBLEMS (per shard, 12),
#   EVAL (test problems, 200), EVAL_CONFIGS (greedy,bo8-judge,beam8-head; also bo8-head, beam8w2-head, dvts8-head),
#   BEAM_POLICIES (baseline,edge),
#   HEAD (head file for eval, WORK/head-MODEL.safetensors), DEVICE_SAMPLING (auto), EXTRA (more flags for every
#   engine command, e.g. "--max-steps 2" for a dry run)
set -uo pipefail
phase=$1 model=$2 data=$3 work=$4
shards=${SHARDS:-16} offset=${OFFSET:-0} train=${TRAIN:-1200} round=${ROUND:-r0} seconds=${SECONDS_BOX:-300}
evaln=${EVAL:-200} head=${HEAD:-$work/head-$model.safetensors}
gpu="--model $model --gpu-layers ${GPU_LAYERS:-999} --threads 1 --device-sampling ${DEVICE_SAMPLING:-auto}"
extra=${EXTRA:-}
mkdir -p "$work"

shard_range() {  # i total -> "offset limit"
  local per=$(( ($2 + shards - 1) / shards ))
  echo "$(( $1 * per )) $per"
}

case $phase in
rollouts)
  for i in $(seq 0 $((shards - 1))); do
    read -r off lim <<<"$(shard_range "$i" "$train")"
    timeout -s TERM "$seconds" edgereason train-prm $gpu --dataset "$data/gsm8k_train.jsonl" \
      --offset $((offset + off)) --limit "$lim" --samples 8 --phases rollouts --rollouts "$work/rollouts-$round-$i.jsonl" \
      --work "$work" --concurrency 8 $extra >"$work/log-rollouts-$round-$i.txt" 2>&1 &
  done
  wait ;;
mc)
  for i in $(seq 0 $((shards - 1))); do
    timeout -s TERM "$seconds" edgereason train-prm $gpu --phases mc --rollouts "$work/rollouts-$round-$i.jsonl" \
      --work "$work" --mc-problems "${MC_PROBLEMS:-12}" --mc-completions 4 --concurrency 8 $extra \
      >"$work/log-mc-$round-$i.txt" 2>&1 &
  done
  wait ;;
features)
  # every rollout file of every round, a process each (SHARDS at a time); MC values are keyed by problem id
  i=0
  for f in "$work"/rollouts-*.jsonl; do
    name=$(basename "$f" .jsonl)
    edgereason train-prm $gpu --phases features --rollouts "$f" --work "$work" \
      --features "$work/features-$name.npz" --kv-tokens 65536 $extra >"$work/log-features-$name.txt" 2>&1 &
    i=$((i + 1)); (( i % shards == 0 )) && wait
  done
  wait ;;
train)
  files=()
  for f in "$work"/features-rollouts-*.npz; do files+=(--features "$f"); done
  edgereason train-prm --model "$model" --phases train "${files[@]}" --work "$work" --out "$head" ;;
eval)
  # name|flags: one bench per configuration, each over all shards side by side; results.json keeps every
  # problem's final candidates, so vote rules can be compared after the run (benchmarks/vote_rules.py)
  declare -A flags=(
    [greedy]="--strategy best-of-n --beams 1 --temperature 0 --prm-format judge --policies baseline"
    [bo8-judge]="--strategy best-of-n --beams 8 --vote weighted --prm-format judge --policies baseline"
    [bo8-head]="--strategy best-of-n --beams 8 --vote weighted --prm-format head --prm-head $head --policies baseline"
    [beam8-head]="--beams 8 --width 4 --vote weighted --prm-format head --prm-head $head --policies ${BEAM_POLICIES:-baseline,edge}"
    [beam8w2-head]="--beams 8 --width 2 --vote weighted --prm-format head --prm-head $head --policies ${BEAM_POLICIES:-baseline,edge}"
    [dvts8-head]="--strategy dvts --beams 8 --width 2 --vote weighted --prm-format head --prm-head $head --policies baseline"
  )
  IFS=, read -r -a names <<<"${EVAL_CONFIGS:-greedy,bo8-judge,beam8-head}"
  for i in $(seq 0 $((shards - 1))); do
    read -r off lim <<<"$(shard_range "$i" "$evaln")"
    (for name in "${names[@]}"; do
       edgereason bench $gpu --dataset "$data/gsm8k_test.jsonl" --offset $((offset + off)) --limit "$lim" ${flags[$name]} \
         --max-steps 20 --max-tokens 1024 --concurrency 8 --kv-tokens 32768 --no-plots --out "$work/eval/$name-$i" $extra \
         >"$work/log-eval-$name-$i.txt" 2>&1
     done) &
  done
  wait
  args=()
  for name in "${names[@]}"; do args+=("$name=$work/eval/$name-[0-9]*"); done
  python3 "$(dirname "$0")/../merge_shards.py" "$work/eval-summary.json" "${args[@]}" ;;
*)
  echo "unknown phase $phase (rollouts, mc, features, train, eval)" >&2; exit 2 ;;
esac
