#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/one /tmp/two
(python3 .whl/locksample.py $OUT/locks_one.json 200 & LS=$!; CUDA_VISIBLE_DEVICES=0 timeout 200 python3 benchmarks/batch_throughput.py --out /tmp/one --copies 24 --buggy 3 --lessons 02_reduction > $OUT/one.log 2>&1; echo "rc=$?" >> $OUT/one.log; kill $LS)
mkdir -p $OUT/one; cp /tmp/one/batch_throughput.json /tmp/one/batch_throughput.md $OUT/one/ 2>/dev/null; head -3 /tmp/one/batch_throughput.md
(python3 .whl/locksample.py $OUT/locks_two.json 200 & LS=$!; timeout 200 python3 benchmarks/batch_throughput.py --out /tmp/two --copies 48 --buggy 6 --lessons 02_reduction > $OUT/two.log 2>&1; echo "rc=$?" >> $OUT/two.log; kill $LS)
mkdir -p $OUT/two; cp /tmp/two/batch_throughput.json /tmp/two/batch_throughput.md $OUT/two/ 2>/dev/null; head -3 /tmp/two/batch_throughput.md
ls -la /tmp/workbook-*gpu* 2>/dev/null | head; cat $OUT/locks_*.json
export WORKBOOK_MODE=gpu CUDA_VISIBLE_DEVICES=0
timeout 150 python3 benchmarks/ccl.py /tmp/cclout --record > $OUT/ccl.log 2>&1; echo "rc=$?" >> $OUT/ccl.log; cp /tmp/cclout/ccl.json /tmp/cclout/ccl.md $OUT/ 2>/dev/null; tail -2 $OUT/ccl.log
timeout 150 python3 benchmarks/end_to_end.py --json $OUT/end_to_end.json > $OUT/end_to_end.log 2>&1; echo "rc=$?" >> $OUT/end_to_end.log; grep "done at\|rc=" $OUT/end_to_end.log
