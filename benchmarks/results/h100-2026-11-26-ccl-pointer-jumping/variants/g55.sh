#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
timeout 400 python3 benchmarks/results/h100-2026-11-26-ccl-pointer-jumping/variants/init_var.py v7=benchmarks/results/h100-2026-11-26-ccl-pointer-jumping/variants/v7_init.py v8=benchmarks/results/h100-2026-11-26-ccl-pointer-jumping/variants/v8_init.py 2>&1 | grep -v Warn | tee $OUT/init_var.txt
