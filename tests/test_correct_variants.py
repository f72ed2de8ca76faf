"""The metric rules' correct variants: submissions written differently from the reference
solution (the ``[[correct]]`` entries of grader/exercises/<lesson>/variants/), which the rules
must let pass on a GPU (benchmarks/metric_rules.py profiles them). Here: every exercise
with metric rules has several, and each is graded correct on its output."""

import warnings

import pytest
from solution_cells import namespace_with_variant

import workbook
from grader.exercise import check_exercise
from grader.exercises import LESSONS, correct_variants
from grader.exercises import get as get_exercise

VARIANTS = [(lesson, variant) for lesson, exercises in LESSONS.items()
            for exercise in exercises for variant in correct_variants(exercise.id)]


def _id(case) -> str:
    _, variant = case
    name = variant.exercise_id.split(".", 1)[1]
    return f"{name}-{variant.description.split(':')[0].split(' (')[0].replace(' ', '_')[:48]}"


def test_every_exercise_with_metric_rules_has_several_correct_variants():
    for exercises in LESSONS.values():
        for exercise in exercises:
            found = correct_variants(exercise.id)
            if exercise.metric_rules:
                assert len(found) >= 2, exercise.id
            else:
                assert not found, f"correct variants of {exercise.id}, which has no metric rule"


@pytest.mark.parametrize("lesson,variant", VARIANTS, ids=[_id(v) for v in VARIANTS])
def test_correct_variant_is_graded_correct(lesson, variant):
    ns = namespace_with_variant(lesson, variant)
    with warnings.catch_warnings():  # a GPU divides by zero silently; so does the grader
        warnings.simplefilter("ignore", RuntimeWarning)
        result = check_exercise(get_exercise(variant.exercise_id), ns, workbook.MODE)
    assert result.passed, f"{variant.description}: {result.summary()}"


@pytest.mark.slow
def test_profiled_kernels_of_every_variant_compile_for_the_gpu():
    """The simulator runs a variant's kernels as Python and accepts what numba-cuda's
    compiler rejects (a local array sized by an expression in the kernel did); the kernels
    that benchmarks/metric_rules.py profiles must compile for sm_90, for the solution, every
    correct variant and every slow one."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("sm90_compile.py")
    done = subprocess.run([sys.executable, str(script), "variants"], capture_output=True,
                          text=True, timeout=900)
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert done.returncode == 0 and not failed, "\n".join(failed) or done.stderr[-3000:]
    compiled = [line for line in done.stdout.splitlines() if line.startswith("ok ")]
    with_rules = [e for exercises in LESSONS.values() for e in exercises if e.metric_rules]
    expected = sum(2 + len(correct_variants(e.id))
                   for e in with_rules
                   if e.id not in ("ldmatrix.swizzle", "layernorm.dispatch", "reduction.generic",
                                   "softmax.dispatch"))
    assert len(compiled) == expected, "\n".join(compiled)
