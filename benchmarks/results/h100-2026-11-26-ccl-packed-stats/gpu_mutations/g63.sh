#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 540 python3 -m pytest -o addopts="" -p no:cacheprovider -q -n 0 tests/test_ccl_fused.py -k "catch" -rA 2>&1 | grep -E "PASSED|FAILED|passed|failed|Error" | tail -14 | tee $OUT/mutations_gpu.log
