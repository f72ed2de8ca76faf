#!/bin/bash
# grader batch's default worker count against more workers, one H200 with 16 cores.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/res; mkdir -p $R
{ nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } | tee $R/machine.txt
timeout 100 python3 -c "from grader.cli import app; app()" check solutions/02_reduction/reduction.ipynb --mode gpu -e reduction.simple > $R/prewarm.log 2>&1; echo prewarm rc=$?
timeout 480 python3 benchmarks/batch_throughput.py --out /tmp/cmp --copies 24 --buggy 3 --lessons 02_reduction --mode gpu --compare default workers=8 workers=10 > $R/compare.log 2>&1; echo compare rc=$?
cat /tmp/cmp/compare.md
cp $R/machine.txt /tmp/cmp/compare.md /tmp/cmp/compare.json $OUT/ 2>/dev/null
for s in default workers-8 workers-10; do cp /tmp/cmp/$s/batch_throughput.md $OUT/$s.md 2>/dev/null; done
