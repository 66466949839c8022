#!/usr/bin/env bash
# One round of issue 12's fine-tuned verifier on one GPU machine: fine-tune the generator as its verifier (LoRA and
# a readout, benchmarks/lab/finetune_verifier.py), export it as a head llama.cpp runs (benchmarks/lab/export_lora_head.py),
# then beam search with that head on GSM8K test (benchmarks/eval_sweep.sh). What ../results/lora-head-h200/ ran by
# hand, with the LoRA's settings as flags.
#
# Usage: lora_round.sh NAME DATA_DIR WORK
#   NAME: the new head's name (WORK/head/NAME.*)   DATA_DIR: gsm8k_test.jsonl   WORK: output folder (lora/: report
#   and weights, head/: the head, configs.txt, eval/, summary.json, vote-rules.json)
# It reads the rollouts from benchmarks/results, where they are not tracked: each folder's README says
# how to regenerate them; keep those files when the folder is moved aside (docs/gpu-machine.md).
# Settings (environment): MODEL (qwen2.5-coder-1.5b), ROLLOUTS (its shipped head's rollouts), HEAD_SHARDS (the shards
#   that head's features were made from, 16), EXTRA_ROLLOUTS (more rollouts to train on: the 0.5B's), TARGETS
#   (attention, the shipped head's; all: the MLP too, whose rank 16 makes a 37 MB adapter, ../results/lora-all-h200/
#   used rank 4), RANK (16), ALPHA (32), EPOCHS (2), TRAIN_SECONDS (720: from the start, the first
#   reading included), BATCH_TOKENS (12288), DEVICE (cuda), LIMIT (rollout lines to read: a smoke run), CONFIGS (the
#   searches to run with the head, one "NAME FLAGS" a line; default below), and eval_sweep.sh's (SECONDS_BOX, SHARDS,
#   PER_SHARD, FIRST, COMMON)
# A dry run on a CPU build (the 0.5B, one training batch, one problem a search; 5.5 minutes on 2 cores):
#   MODEL=qwen2.5-coder-0.5b HEAD_SHARDS=8 DEVICE=cpu LIMIT=24 TRAIN_SECONDS=60 EPOCHS=1 RANK=4 BATCH_TOKENS=1024 \
#   EXTRA_ROLLOUTS= SHARDS=1 PER_SHARD=1 FIRST=1 COMMON="--gpu-layers 0 --threads 2 --dataset DATA/gsm8k_test.jsonl \
#   --max-steps 4 --max-tokens 256 --concurrency 1 --kv-tokens 8192 --no-plots" \
#   bash benchmarks/lab/lora_round.sh smoke DATA WORK
set -euo pipefail
name=$1 data=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$(dirname "$here")")
results=$repo/benchmarks/results
model=${MODEL:-qwen2.5-coder-1.5b}
rollouts=${ROLLOUTS:-$results/head-$model/rollouts-$model.jsonl.gz}
extra=${EXTRA_ROLLOUTS-$results/head-qwen2.5-coder-0.5b/rollouts-qwen2.5-coder-0.5b.jsonl.gz}
alpha=${ALPHA:-32}
mkdir -p "$work/lora" "$work/head"
cd "$repo"  # the benchmarks run as modules

limit=()
if [ -n "${LIMIT:-}" ]; then limit=(--limit "$LIMIT"); fi
# shellcheck disable=SC2086  # EXTRA_ROLLOUTS: files, words
python3 -m benchmarks.lab.finetune_verifier --model "$model" --head "edgereason/heads/$model.safetensors" \
  --rollouts "$rollouts" --shards "${HEAD_SHARDS:-16}" ${extra:+--extra $extra} --targets "${TARGETS:-attention}" \
  --rank "${RANK:-16}" --alpha "$alpha" --epochs "${EPOCHS:-2}" --seconds "${TRAIN_SECONDS:-720}" \
  --batch-tokens "${BATCH_TOKENS:-12288}" --device "${DEVICE:-cuda}" "${limit[@]}" --out "$work/lora" 2>&1 |
  tee "$work/lora/log.txt"
python3 -m benchmarks.lab.export_lora_head "$work/lora/lora.safetensors" --model "$model" --alpha "$alpha" \
  --tokens-from "edgereason/heads/$model.safetensors" --report "$work/lora/report.json" --out "$work/head/$name"

head=$work/head/$name.safetensors
# the searches ../results/lora-search-h200/ found best with the shipped LoRA head, then the setting it shipped with
beam="--model $model --prm-head $head --beams 8 --width 2 --vote weighted --policies baseline"
printf '%s\n' "$name-div-t08 $beam --temperature 0.8 --select diverse" "$name-top-t06 $beam --temperature 0.6" \
  >"$work/configs.txt"
if [ -n "${CONFIGS:-}" ]; then printf '%s\n' "$CONFIGS" >"$work/configs.txt"; fi
bash "$here/../eval_sweep.sh" "$work/configs.txt" "$data" "$work"
