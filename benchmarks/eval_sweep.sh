#!/usr/bin/env bash
# Accuracy of several searches on GSM8K test, side by side on one GPU machine: SHARDS bench processes over disjoint
# problems (one engine process does not fill an H200: its host work is serial), each running every configuration
# in the file's order, so the first configurations finish first when the run is time-boxed. Then one table
# (merge_shards.py) and the answer rules on the same final paths (vote_rules.py).
#
# Usage: eval_sweep.sh CONFIGS DATA_DIR WORK
#   CONFIGS: lines "NAME FLAGS..." (# starts a comment), FLAGS added to the common ones below
#   DATA_DIR: holds the data set    WORK: output folder (eval/NAME-i/, summary.json, vote-rules.json)
# Settings (environment): DATASET (the file in DATA_DIR, gsm8k_test.jsonl), SHARDS (16), PER_SHARD (13), FIRST
#   (problems counted, 200), SECONDS_BOX (time box of the whole run, 3600), COMMON (the flags every bench gets, below)
set -uo pipefail
configs=$1 data=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
shards=${SHARDS:-16} per=${PER_SHARD:-13} first=${FIRST:-200} dataset=$data/${DATASET:-gsm8k_test.jsonl}
common=${COMMON:-"--gpu-layers 999 --threads 1 --max-steps 20 --max-tokens 1024 --concurrency 8 --kv-tokens 32768 --no-plots"}
mkdir -p "$work/eval"
mapfile -t lines < <(grep -v '^\s*\(#\|$\)' "$configs")

for i in $(seq 0 $((shards - 1))); do
  (for line in "${lines[@]}"; do
     [ -e "$work/.boxed" ] && break  # the time box ended: start no further configuration
     read -r name flags <<<"$line"
     # shellcheck disable=SC2086  # flags are words
     edgereason bench $common --dataset "$dataset" --offset $((i * per)) --limit "$per" $flags --out "$work/eval/$name-$i" \
       >"$work/eval/log-$name-$i.txt" 2>&1
   done) &
done
rm -f "$work/.boxed"
( sleep "${SECONDS_BOX:-3600}" && touch "$work/.boxed" && pkill -TERM -f "edgereason bench" ) & box=$!
wait $(jobs -p | grep -v "^$box$")
kill $box 2>/dev/null
args=()
for line in "${lines[@]}"; do
  read -r name _ <<<"$line"
  args+=("$name=$work/eval/$name-[0-9]*")  # not NAME-s1-*, another search
  # a shard the box stopped keeps a results.json of the problems it finished: say which, to run them again
  for i in $(seq 0 $((shards - 1))); do
    grep -q "^results in" "$work/eval/log-$name-$i.txt" 2>/dev/null || echo "incomplete: $name-$i" >&2
  done
done
python3 "$here/merge_shards.py" "$work/summary.json" --first "$first" "$dataset" "${args[@]}"
python3 "$here/vote_rules.py" "$work/vote-rules.json" --first "$first" "$dataset" "${args[@]}"
