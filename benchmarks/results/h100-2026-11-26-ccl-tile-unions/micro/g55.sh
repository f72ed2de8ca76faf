#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
timeout 400 python3 .whl/init_var.py v1=.whl/v1_init.py v4=.whl/v4_init.py v5=.whl/v5_init.py v6=.whl/v6_init.py 2>&1 | grep -v Warn | tee $OUT/init_var.txt
