#!/bin/bash
# GPU call M3 (2026-12-02): the CUDA tests, then best-of-16 for the 1.5B at T 0.6 (K-subsets give best-of-8 from
# the same run), time-boxed. Results in $OUT/m3.tgz.
set -u
export PYTHONPATH=/root/site EDGEREASON_HOME=/root/eh PYTHONUNBUFFERED=1
D=/root/src/build/data O=/root/o3
mkdir -p $O
cd /root/proj
while ! grep -q SETUP_DONE /root/build.log; do sleep 2; done
echo "setup waited $SECONDS s" > $O/times.txt
t() { local s=$SECONDS; "$@"; echo "$? $((SECONDS - s)) s: $*" >> $O/times.txt; }
printf '%s\n' "q15-bo16-t06 --model qwen2.5-coder-1.5b --strategy best-of-n --beams 16 --vote weighted --temperature 0.6 --policies baseline" > /root/cfg3.txt
export SECONDS_BOX=$(( 465 - SECONDS )) PER_SHARD=7 FIRST=112
t bash benchmarks/eval_sweep.sh /root/cfg3.txt $D /root/w/s16 > /root/w-s16.log 2>&1 &
sleep 1
t timeout 200 python3 -m pytest -q -rs tests/backends/test_cuda_process.py tests/test_gpu_settings.py \
  tests/backends/test_cxx_runtime.py > $O/pytest-cuda.txt 2>&1
wait
cp /root/w/s16/summary.json $O/bo16-summary.json 2>/dev/null
tar czf $O/bo16-results.tgz -C /root/w/s16 eval 2>/dev/null
tail -3 /root/w-s16.log > $O/sweep-tail.txt
tar czf $OUT/m3.tgz -C $O .
cat $O/times.txt; tail -3 $O/pytest-cuda.txt
