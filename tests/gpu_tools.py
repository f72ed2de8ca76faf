"""Skip markers for tests that run NVIDIA's tools on a GPU, evaluated before the test starts.

In simulator mode these tests are skipped as GPU tests (conftest); on a GPU without the tool
they are skipped with these reasons, which tests/skips_allowed.py lists.
"""

import pytest

import workbook
from grader.ncu import find_ncu
from grader.sanitizer import find_tool

NO_NCU_REASON = "Nsight Compute (ncu) is not installed"
NO_SANITIZER_REASON = "compute-sanitizer is not installed"

needs_ncu = pytest.mark.skipif(workbook.MODE == "gpu" and find_ncu() is None,
                               reason=NO_NCU_REASON)
needs_compute_sanitizer = pytest.mark.skipif(workbook.MODE == "gpu" and find_tool() is None,
                                             reason=NO_SANITIZER_REASON)
