#!/bin/bash
# grader batch on one GPU and on two, the same call, default settings: 24 copies of lesson 02
# (3 planted bugs) on GPU 0, then 48 copies (6 planted bugs) on both GPUs. Each run's
# folder goes to $OUT as soon as it ends.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/two; mkdir -p $R
{ nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } | tee $R/machine.txt
timeout 100 python3 -c "from grader.cli import app; app()" check solutions/02_reduction/reduction.ipynb --mode gpu -e reduction.simple > $R/prewarm.log 2>&1; echo prewarm rc=$?
B="python3 benchmarks/batch_throughput.py --lessons 02_reduction --mode gpu"
CUDA_VISIBLE_DEVICES=0 timeout 200 $B --out $R/one --copies 24 --buggy 3 > $R/one.log 2>&1; echo one rc=$?; head -1 $R/one/batch_throughput.md
tar czf $OUT/two.tgz -C /tmp two
timeout 200 $B --out $R/two --copies 48 --buggy 6 > $R/two.log 2>&1; echo two rc=$?; head -1 $R/two/batch_throughput.md
tar czf $OUT/two.tgz -C /tmp two
