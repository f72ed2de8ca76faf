#!/bin/bash
# grader batch on one GPU: default settings against two profile workers per GPU, two rounds.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/res; mkdir -p $R
{ nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; git log -1 --format=%H 2>/dev/null; } | tee $R/machine.txt
timeout 100 python3 -c "from grader.cli import app; app()" check solutions/02_reduction/reduction.ipynb --mode gpu -e reduction.simple > $R/prewarm.log 2>&1; echo prewarm rc=$?
timeout 500 python3 benchmarks/batch_throughput.py --out /tmp/cmp --copies 24 --buggy 3 --lessons 02_reduction --mode gpu --compare default profile-workers=2 --rounds 2 > $R/compare.log 2>&1; echo compare rc=$?
cat /tmp/cmp/compare.md
cp /tmp/cmp/compare.md /tmp/cmp/compare.json $OUT/ 2>/dev/null
tar czf $OUT/cmp.tgz -C /tmp cmp res
