#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/res; mkdir -p $R
nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; env | grep DONTWRITE
rm -rf /tmp/base; mkdir -p /tmp/base; git archive HEAD | tar -x -C /tmp/base; cp -r .whl /tmp/base/.whl
export PYTHONPATH=/tmp/site
run() { name=$1; dir=$2; shift 2; mkdir -p /tmp/$name; (cd $dir && PYTHONPATH=$PYTHONPATH:$dir timeout 170 python3 benchmarks/batch_throughput.py --out /tmp/$name --copies 24 --buggy 3 --lessons 02_reduction "$@" > $R/$name.log 2>&1); echo "$name rc=$?"; head -3 /tmp/$name/batch_throughput.md | grep -i "exercises\|CPU" | head -3; cp /tmp/$name/batch_throughput.md $R/$name.md 2>/dev/null; cp /tmp/$name/batch_throughput.json $R/$name.json 2>/dev/null; tar czf $OUT/res.tgz -C /tmp res; }
run bytecode1 $PWD
run grouped1 /tmp/base
run bytecode2 $PWD
run grouped2 /tmp/base
ls /tmp/workbook-*-bytecode 2>/dev/null | head -3; du -sh /tmp/workbook-*-bytecode /tmp/workbook-*-gpu-*/workbook-*-bytecode 2>/dev/null
