#!/usr/bin/env bash
# Issue 13's GPU targets, side by side in one run on one GPU (CUDA_VISIBLE_DEVICES picks it), 24 GiB cap:
#   16 problems at once, beam N=8: baseline and edge throughput (bench with its plots: no crash either)
#   one problem at a time, N=8: latency and goodput, device-side sampling on and off (off = the host path)
#   engine generation against raw batched decode at the same rows per pass, and the device top-k step itself
# Usage: gpu_targets.sh MODEL DATA_DIR OUT
set -uo pipefail
model=$1 data=$2 out=$3
here=$(dirname "$0")
mkdir -p "$out"
common="--model $model --dataset $data/gsm8k_test.jsonl --gpu-memory 24GiB --max-steps 20 --max-tokens 1024 --force"
edgereason bench $common --limit 16 --beams 8 --policies baseline,edge --out "$out/at16" >"$out/at16.log" 2>&1
echo "at16 rc $?"
for ds in on off; do
  edgereason bench $common --offset 16 --limit 4 --concurrency 1 --beams 8 --policies baseline,edge \
    --device-sampling $ds --no-plots --out "$out/one-$ds" >"$out/one-$ds.log" 2>&1
  echo "one-$ds rc $?"
done
python3 "$here/engine_vs_raw.py" --model "$model" --gpu-layers 999 --device-top-k 100 --repeat 3 \
  >"$out/engine_vs_raw.txt" 2>&1
echo "engine_vs_raw rc $?"
python3 "$here/device_sampling.py" --model "$model" --gpu-layers 999 --mass-rows 0 --dataset "$data/gsm8k_test.jsonl" \
  --out "$out/device_sampling.json" \
  >"$out/device_sampling.log" 2>&1
echo "device_sampling rc $?"
