#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 250 python3 .whl/stats_var.py 2>&1 | grep -v Warn | tee $OUT/stats_var.txt
