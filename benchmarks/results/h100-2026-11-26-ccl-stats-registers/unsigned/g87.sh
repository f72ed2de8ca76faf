#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/w2.log
timeout 300 python3 .whl/st_run.py w2=.whl/w2_var.py rs3=.whl/rs3_var.py w2rs3=.whl/w2_var.py+.whl/rs3_var.py 2>&1 | grep -v Warn | tee -a $OUT/w2.log
timeout 200 python3 -m pytest -o addopts="" -p no:cacheprovider -q -n 0 tests/test_ccl_fused.py tests/test_ccl_exercises.py -k "fused or tile_roots or init_table or which_init or both_labellings or one_instance or phases or prepares or image_after_image or labellings or packed_statistics_are" 2>&1 | tail -3 | tee $OUT/gpu_tests.log
