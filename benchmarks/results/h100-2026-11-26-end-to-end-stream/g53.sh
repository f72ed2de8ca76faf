#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 100 python3 -m pytest -o addopts="" -p no:cacheprovider -q -n 0 tests/test_launch.py tests/test_outputs.py tests/test_memory.py 2>&1 | tail -2 | tee $OUT/gpu_tests.log
timeout 330 python3 benchmarks/end_to_end.py --json $OUT/end_to_end.json > $OUT/end_to_end.log 2>&1; echo "rc=$?" >> $OUT/end_to_end.log; grep "done at\|rc=" $OUT/end_to_end.log
mkdir -p $OUT/data; cp workbook/data/03_softmax.json workbook/data/04_layernorm.json workbook/data/05_ccl.json $OUT/data/
