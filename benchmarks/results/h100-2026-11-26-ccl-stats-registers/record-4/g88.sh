#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
date -u | tee -a $OUT/device.txt

timeout 150 python3 benchmarks/ccl.py /tmp/cclout --record > $OUT/ccl.log 2>&1; echo "rc=$?" >> $OUT/ccl.log; cp /tmp/cclout/ccl.json /tmp/cclout/ccl.md $OUT/ 2>/dev/null; tail -2 $OUT/ccl.log
timeout 100 python3 benchmarks/end_to_end.py --lessons ccl --json $OUT/end_to_end.json > $OUT/end_to_end.log 2>&1; echo "rc=$?" >> $OUT/end_to_end.log; grep "done at\|rc=" $OUT/end_to_end.log
mkdir -p $OUT/data; cp workbook/data/05_ccl.json $OUT/data/
