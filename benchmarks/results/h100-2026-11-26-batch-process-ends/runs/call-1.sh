#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/res; mkdir -p $R
{ nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $R/machine.txt
rm -rf /tmp/base; mkdir -p /tmp/base; tar -xf .whl/base.tar -C /tmp/base; cp -r .whl /tmp/base/.whl
export PYTHONPATH=$PWD/.whl/probe:/tmp/site
for d in $PWD /tmp/base; do (cd $d && PYTHONPATH=$PYTHONPATH:$d timeout 100 python3 -c "from grader.cli import app; app()" check solutions/02_reduction/reduction.ipynb --mode gpu -e reduction.simple > $R/prewarm-$(basename $d).log 2>&1; echo prewarm $d rc=$?); done
run() { name=$1; dir=$2; shift 2; mkdir -p /tmp/$name $R/tl-$name; (cd $dir && BATCH_PROBE_DIR=$R/tl-$name PYTHONPATH=$PYTHONPATH:$dir timeout 150 env "$@" python3 benchmarks/batch_throughput.py --out /tmp/$name --copies 24 --buggy 3 --lessons 02_reduction > $R/$name.log 2>&1); echo "$name rc=$?"; head -3 /tmp/$name/batch_throughput.md | grep -i "exercises\|CPU" | head -3; cp /tmp/$name/batch_throughput.md $R/$name.md 2>/dev/null; cp /tmp/$name/batch_throughput.json $R/$name.json 2>/dev/null; tar czf $OUT/res.tgz -C /tmp res; }
run new1 $PWD X=1
run base1 /tmp/base X=1
run c2 $PWD WORKBOOK_GRADER_CHECK_PROCESSES=2
run p2 $PWD WORKBOOK_GRADER_PROCESSES=2
run c2b $PWD WORKBOOK_GRADER_CHECK_PROCESSES=2
