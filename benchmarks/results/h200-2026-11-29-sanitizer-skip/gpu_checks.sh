#!/bin/bash
# The tools left out on a GPU: the tests of grader.kernel_code and the compute-sanitizer
# tests in gpu mode, then one copy of every lesson's solution through grader batch (every
# phase), with the compute-sanitizer lines of each exercise's report counted.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
{ nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/machine-checks.txt
WORKBOOK_MODE=gpu timeout 300 python3 -m pytest -o addopts="" -p no:cacheprovider -q -rs \
  tests/test_kernel_code.py tests/test_grading_phases.py -k "kernel_code or racecheck or tool or shared_memory" \
  > $OUT/gpu_tests.log 2>&1; echo "tests rc=$?"; tail -3 $OUT/gpu_tests.log
timeout 280 python3 benchmarks/batch_throughput.py --out /tmp/sol --copies 1 --buggy 0 --mode gpu \
  --lessons 01_ldmatrix 02_reduction 03_softmax 04_layernorm 05_ccl > $OUT/solutions.log 2>&1; echo "solutions rc=$?" | tee -a $OUT/solutions.log
cp /tmp/sol/batch_throughput.md $OUT/solutions.md 2>/dev/null; head -3 /tmp/sol/batch_throughput.md
python3 - > $OUT/tools_by_exercise.md <<'PY'
import json, pathlib
print("| exercise | compute-sanitizer lines |\n| --- | --- |")
for f in sorted(pathlib.Path("/tmp/sol/grades").rglob("*.json")):
    data = json.loads(f.read_text())
    for nb in data.get("notebooks", []):
        for ex in nb.get("exercises", []):
            lines = [m.split("\n")[0] for m in ex.get("messages", []) if m.startswith("compute-sanitizer")]
            print(f"| {ex['id']} ({ex['status']}) | {'; '.join(lines)} |")
PY
cat $OUT/tools_by_exercise.md | head -60
