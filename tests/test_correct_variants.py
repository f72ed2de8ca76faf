"""The metric rules' correct variants: submissions written differently from the reference
solution (``CORRECT_VARIANTS`` beside each lesson's ``SLOW_VARIANTS``), which the rules
must let pass on a GPU (benchmarks/metric_rules.py profiles them). Here: every exercise
with metric rules has several, and each is graded correct on its output."""

import importlib
import warnings

import pytest
from solution_cells import namespace_with_variant

import workbook
from grader.exercise import check_exercise
from grader.exercises import LESSONS
from grader.exercises import get as get_exercise


def _module(lesson: str):
    return importlib.import_module(f"grader.exercises.{LESSONS[lesson][0].id.split('.')[0]}")


VARIANTS = [(lesson, exercise, variant)
            for lesson in LESSONS
            for exercise, variants in getattr(_module(lesson), "CORRECT_VARIANTS", {}).items()
            for variant in variants]


def _id(case) -> str:
    _, exercise, (description, _, _) = case
    return f"{exercise}-{description.split(':')[0].split(' (')[0].replace(' ', '_')[:48]}"


def test_every_exercise_with_metric_rules_has_several_correct_variants():
    for lesson, exercises in LESSONS.items():
        module = _module(lesson)
        correct = getattr(module, "CORRECT_VARIANTS", {})
        for exercise in exercises:
            if exercise.metric_rules:
                assert len(correct.get(exercise.id, ())) >= 2, exercise.id
        unknown = set(correct) - {e.id for e in exercises if e.metric_rules}
        assert not unknown, f"correct variants of exercises without metric rules: {unknown}"


@pytest.mark.parametrize("lesson,exercise,variant", VARIANTS, ids=[_id(v) for v in VARIANTS])
def test_correct_variant_is_graded_correct(lesson, exercise, variant):
    ns = namespace_with_variant(lesson, exercise, variant)
    with warnings.catch_warnings():  # a GPU divides by zero silently; so does the grader
        warnings.simplefilter("ignore", RuntimeWarning)
        result = check_exercise(get_exercise(exercise), ns, workbook.MODE)
    assert result.passed, f"{variant[0]}: {result.summary()}"
