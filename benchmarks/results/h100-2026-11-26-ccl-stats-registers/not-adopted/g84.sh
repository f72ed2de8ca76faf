#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/wr.log
timeout 300 python3 .whl/st_run.py wr=.whl/wr_var.py 2>&1 | grep -v Warn | tee -a $OUT/wr.log
timeout 200 python3 -m pytest -o addopts="" -p no:cacheprovider -q -n 0 tests/test_ccl_fused.py tests/test_ccl_exercises.py -k "beyond or bound or one_instance or prepares or packed_statistics_are or both_labellings or phases or image_after_image" 2>&1 | tail -3 | tee $OUT/gpu_tests.log
