#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/res; mkdir -p $R
{ nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $R/machine.txt
timeout 120 python3 -c "from grader.cli import app; app()" check solutions/02_reduction/reduction.ipynb --mode gpu -e reduction.simple > $R/prewarm.log 2>&1; echo prewarm rc=$?
save() { name=$1; head -3 /tmp/$name/batch_throughput.md | grep -i "exercises\|CPU" | head -3; cp /tmp/$name/batch_throughput.md $R/$name.md 2>/dev/null; cp /tmp/$name/batch_throughput.json $R/$name.json 2>/dev/null; tar czf $OUT/res.tgz -C /tmp res; }
mkdir -p /tmp/one /tmp/two
CUDA_VISIBLE_DEVICES=0 timeout 200 python3 benchmarks/batch_throughput.py --out /tmp/one --copies 24 --buggy 3 --lessons 02_reduction > $R/one.log 2>&1; echo one rc=$?; save one
timeout 220 python3 benchmarks/batch_throughput.py --out /tmp/two --copies 48 --buggy 6 --lessons 02_reduction > $R/two.log 2>&1; echo two rc=$?; save two
