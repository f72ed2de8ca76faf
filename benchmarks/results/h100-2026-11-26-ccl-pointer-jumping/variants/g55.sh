#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
timeout 400 python3 .whl/init_var.py v7=.whl/v7_init.py v8=.whl/v8_init.py 2>&1 | grep -v Warn | tee $OUT/init_var.txt
