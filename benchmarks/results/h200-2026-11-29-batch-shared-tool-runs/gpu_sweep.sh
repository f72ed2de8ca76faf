#!/bin/bash
# The grader as committed (7c4c68b): lesson 02's default batch (6 workers on 16 cores) against
# 8 workers, one round each, in turns.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/sweep; rm -rf $R; mkdir -p $R
{ nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $R/machine.txt
timeout 220 python3 benchmarks/batch_throughput.py --out $R/cmp --copies 24 --buggy 3 --lessons 02_reduction --mode gpu --compare default workers=8 > $R/compare.log 2>&1; echo "compare rc=$?"
cat $R/cmp/compare.md
cp $R/machine.txt $R/cmp/compare.md $R/cmp/compare.json $OUT/ 2>/dev/null
for f in $R/cmp/*/batch_throughput.md; do cp $f $OUT/$(basename $(dirname $f)).md; done
