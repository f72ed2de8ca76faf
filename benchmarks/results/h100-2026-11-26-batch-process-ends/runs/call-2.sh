#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/res; mkdir -p $R
{ nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $R/machine.txt
export PYTHONPATH=$PWD/.whl/probe:/tmp/site
timeout 100 python3 -c "from grader.cli import app; app()" check solutions/02_reduction/reduction.ipynb --mode gpu -e reduction.simple > $R/prewarm.log 2>&1; echo prewarm rc=$?
run() { name=$1; dir=$2; shift 2; mkdir -p /tmp/$name $R/tl-$name; (cd $dir && BATCH_PROBE_WORKER=1 BATCH_PROBE_DIR=$R/tl-$name PYTHONPATH=$PYTHONPATH:$dir timeout 150 env "$@" python3 benchmarks/batch_throughput.py --out /tmp/$name --copies 24 --buggy 3 --lessons 02_reduction > $R/$name.log 2>&1); echo "$name rc=$?"; head -3 /tmp/$name/batch_throughput.md | grep -i "exercises\|CPU" | head -3; cp /tmp/$name/batch_throughput.md $R/$name.md 2>/dev/null; cp /tmp/$name/batch_throughput.json $R/$name.json 2>/dev/null; tar czf $OUT/res.tgz -C /tmp res; }
run a $PWD X=1
run nice $PWD XNICE=10
run secnice $PWD XSECEDE=1 XNICE=10
run sec $PWD XSECEDE=1
run secnice2 $PWD XSECEDE=1 XNICE=10
