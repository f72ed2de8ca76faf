#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
for k in 1 2; do
timeout 120 python3 benchmarks/end_to_end.py --lessons softmax --json $OUT/end_to_end_softmax_$k.json > $OUT/end_to_end_softmax_$k.log 2>&1; echo "rc=$?" >> $OUT/end_to_end_softmax_$k.log; grep "done at\|rc=" $OUT/end_to_end_softmax_$k.log
done
