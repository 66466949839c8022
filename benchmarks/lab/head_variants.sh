#!/usr/bin/env bash
# Heads for one generator on several backbones, with and without the ranking loss, each backbone's best kept by its
# within-problem validation step AUC, then beam search with them on GSM8K test beside greedy and best-of-8 with the
# judge, in one run on one GPU machine. This made edgereason/heads/qwen2.5-coder-1.5b--qwen2.5-coder-0.5b.* and
# qwen2.5-coder-1.5b.* (benchmarks/results/head-qwen2.5-coder-1.5b*/README.md).
#
# Usage: head_variants.sh ROLLOUT_DIR DATA_DIR WORK
#   ROLLOUT_DIR: shard-*.jsonl (rollouts of the generator, split by line) and mc.jsonl
#   DATA_DIR: gsm8k_test.jsonl    WORK: output folder (feat-*/, heads/BACKBONE-rwW/, eval/)
# Settings (environment): GENERATOR (qwen2.5-coder-0.5b), BACKBONES ("qwen2.5-coder-0.5b qwen2.5-coder-1.5b"),
#   RANK_WEIGHTS ("0 1 4"), SHARDS (eval processes, 16), PER_SHARD (problems each, 13), CONFIGS (eval order; names
#   of the flags table below: beam-new, beam-new-edge, bo8-new, bo8-judge, greedy, beam-old, and for a backbone BB
#   other than the generator beam-BB, beam-BB-edge, shipped-BB), GPUS (1; more: process k runs on GPU k % GPUS),
#   GPU_LAYERS (999; 0 for a dry run on a CPU build)
set -uo pipefail
rollouts=$1 data=$2 work=$3
gen=${GENERATOR:-qwen2.5-coder-0.5b} backbones=${BACKBONES:-"qwen2.5-coder-0.5b qwen2.5-coder-1.5b"}
here=$(cd "$(dirname "$0")" && pwd)
G="--gpu-layers ${GPU_LAYERS:-999} --threads 1"
mkdir -p "$work/heads" "$work/eval"
gpus=${GPUS:-1}
on_gpu() {  # K COMMAND...: run COMMAND on GPU K % GPUS (with one GPU, leave CUDA_VISIBLE_DEVICES as it is)
  if (( gpus > 1 )); then CUDA_VISIBLE_DEVICES=$(( $1 % gpus )) "${@:2}"; else "${@:2}"; fi
}
k=0

for bb in $backbones; do  # features: one process per rollout shard and backbone, all at once
  mkdir -p "$work/feat-$bb" && cp "$rollouts/mc.jsonl" "$work/feat-$bb/"
  for f in "$rollouts"/shard-*.jsonl; do
    i=$(basename "$f" .jsonl)
    on_gpu "$k" edgereason train-prm --model "$gen" --backbone "$bb" $G --phases features --rollouts "$f" --work "$work/feat-$bb" \
      --features "$work/feat-$bb/features-$i.npz" --kv-tokens 65536 >"$work/feat-$bb/log-$i.txt" 2>&1 &
    k=$((k + 1))
  done
done
wait
echo "features done: ${SECONDS} s"
variants=$(( $(wc -w <<<"$backbones") * $(wc -w <<<"${RANK_WEIGHTS:-0 1 4}") ))
threads=$(( ($(nproc) + variants - 1) / variants ))  # torch in each would take every core: share them
for bb in $backbones; do  # one folder per variant: its head, report.json and log
  feats=(); for f in "$work/feat-$bb"/features-*.npz; do feats+=(--features "$f"); done
  for rw in ${RANK_WEIGHTS:-0 1 4}; do
    v="$work/heads/$bb-rw$rw" && mkdir -p "$v"
    edgereason train-prm --model "$gen" --backbone "$bb" --phases train "${feats[@]}" --rank-weight "$rw" \
      --threads "$threads" --work "$v" --out "$v/head.safetensors" >"$v/log.txt" 2>&1 &
  done
done
wait
echo "training done: ${SECONDS} s"
python3 "$here/pick_head.py" "$gen" "$work/heads" $backbones

h_self=$(cat "$work/heads/chosen-$gen.txt" 2>/dev/null)  # none when the generator is not a backbone
B="--model $gen $G --dataset $data/gsm8k_test.jsonl --max-steps 20 --max-tokens 1024 --concurrency 8 --kv-tokens 32768 --no-plots"
beam="--beams 8 --width 4 --vote weighted --prm-format head"
declare -A flags=(
  [beam-new]="$beam --prm-head $h_self --policies baseline"
  [beam-new-edge]="$beam --prm-head $h_self --policies edge"
  [bo8-new]="--strategy best-of-n --beams 8 --vote weighted --prm-format head --prm-head $h_self --policies baseline"
  [bo8-judge]="--strategy best-of-n --beams 8 --vote weighted --prm-format judge --policies baseline"
  [greedy]="--strategy best-of-n --beams 1 --temperature 0 --prm-format judge --policies baseline"
  [beam-old]="$beam --prm-head $here/../../edgereason/heads/$gen.safetensors --policies baseline"
)
for bb in $backbones; do  # another backbone: its new head, the same with edge, and the head that ships for it
  [ "$bb" = "$gen" ] && continue
  flags[beam-$bb]="--prm $bb $beam --prm-head $(cat "$work/heads/chosen-$bb.txt") --policies baseline"
  flags[beam-$bb-edge]="--prm $bb $beam --prm-head $(cat "$work/heads/chosen-$bb.txt") --policies edge"
  flags[shipped-$bb]="--prm $bb $beam --prm-head $here/../../edgereason/heads/$bb--$gen.safetensors --policies baseline"
done
IFS=' ' read -r -a names <<<"${CONFIGS:-beam-new $(for bb in $backbones; do [ "$bb" = "$gen" ] || echo -n "beam-$bb "; done)bo8-judge greedy beam-new-edge beam-old}"
per=${PER_SHARD:-13}
for i in $(seq 0 $((${SHARDS:-16} - 1))); do
  (for name in "${names[@]}"; do
     on_gpu "$i" edgereason bench $B --offset $((i * per)) --limit "$per" ${flags[$name]} --out "$work/eval/$name-$i" \
       >"$work/eval/log-$name-$i.txt" 2>&1
   done) &
done
wait
echo "evaluation done: ${SECONDS} s"
