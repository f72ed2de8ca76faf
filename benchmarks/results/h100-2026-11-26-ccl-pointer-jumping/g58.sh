#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
gcheck() { python3 -c 'import sys; sys.argv[0]="grader"; from grader.cli import app; app()' check "$@"; }
timeout 330 python3 -m pytest -o addopts="" -p no:cacheprovider -q -n 0 tests/test_ccl_exercises.py -k "both_labellings or one_instance or phases or prepares or image_after_image or labellings" 2>&1 | tail -4 | tee $OUT/ccl_ex_gpu_tests.log
timeout 150 bash -c "$(declare -f gcheck); gcheck solutions/05_ccl/ccl.ipynb" > $OUT/check05.log 2>&1; tail -4 $OUT/check05.log
