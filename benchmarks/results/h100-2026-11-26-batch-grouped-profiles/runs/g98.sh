#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/res; mkdir -p $R
nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
rm -rf /tmp/base; mkdir -p /tmp/base; git archive HEAD | tar -x -C /tmp/base; cp -r .whl /tmp/base/.whl
export PYTHONPATH=$PWD/.whl/probe:/tmp/site
run() { name=$1; dir=$2; shift 2; mkdir -p /tmp/$name $R/tl-$name; (cd $dir && BATCH_PROBE_DIR=$R/tl-$name PYTHONPATH=$PYTHONPATH:$dir timeout 170 env "$@" python3 benchmarks/batch_throughput.py --out /tmp/$name --copies 24 --buggy 3 --lessons 02_reduction > $R/$name.log 2>&1); echo "$name rc=$?"; head -3 /tmp/$name/batch_throughput.md | grep -i "exercises\|CPU" | head -3; cp /tmp/$name/batch_throughput.md $R/$name.md 2>/dev/null; cp /tmp/$name/batch_throughput.json $R/$name.json 2>/dev/null; tar czf $OUT/res.tgz -C /tmp res; }
run new1 $PWD X=1
run base1 /tmp/base X=1
run new2 $PWD X=1
