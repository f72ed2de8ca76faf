#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
timeout 300 python3 .whl/host21.py 2>&1 | grep -v Warn | tee $OUT/host21.log
timeout 60 python3 -m pytest -o addopts="" -p no:cacheprovider -q -n 0 tests/test_outputs.py 2>&1 | tail -2
