"""The variants corpus (grader/exercises/corpus.py): its files follow the format, and every
variant still applies to the solution cell it changes."""

import pytest
from solution_cells import exercise_cell

from grader.exercises import LESSONS, corpus

ALL = [(lesson, v) for lesson, exercises in LESSONS.items() for ex in exercises
       for v in corpus.all_variants(ex.id)]


def test_every_lesson_has_variants_of_each_kind():
    for lesson, exercises in LESSONS.items():
        roles = {v.role for ex in exercises for v in corpus.all_variants(ex.id)}
        assert roles == set(corpus.ROLES), (lesson, roles)


def test_every_variants_file_names_an_exercise():
    known = {ex.id for exercises in LESSONS.values() for ex in exercises}
    files = sorted(corpus.HERE.glob("*/variants/*.toml"))
    assert files
    for path in files:
        assert f"{path.parents[1].name}.{path.stem}" in known, path


@pytest.mark.parametrize("lesson,variant", ALL, ids=lambda v: getattr(v, "short_id", ""))
def test_variant_changes_the_solution_cell(lesson, variant):
    cell = exercise_cell(lesson, variant.exercise_id)
    changed = variant.apply(cell)
    assert changed != cell


def load(tmp_path, monkeypatch, text: str):
    folder = tmp_path / "lesson" / "variants"
    folder.mkdir(parents=True)
    (folder / "ex.toml").write_text(text)
    monkeypatch.setattr(corpus, "HERE", tmp_path)
    corpus._load.cache_clear()
    try:
        return corpus.all_variants("lesson.ex")
    finally:
        corpus._load.cache_clear()


def test_a_variant_replaces_one_text_or_the_whole_cell(tmp_path, monkeypatch):
    slow, correct, buggy = load(tmp_path, monkeypatch, """
[slow]
description = "whole"
cell = '''
x = 2
'''
[[correct]]
description = "part"
old = "x = 1"
new = "x = 3"
[[buggy]]
description = "wrong"
old = "x"
new = "y"
expect_sim = { race = "data race" }
expect_gpu = { "wrong result" = ["off", "never written"] }
""")
    assert slow.apply("x = 1\n") == "x = 2\n"
    assert correct.apply("x = 1\n") == "x = 3\n"
    assert buggy.expected("sim") == [("race", ("data race",))]
    assert buggy.expected("gpu") == [("wrong result", ("off", "never written"))]
    with pytest.raises(corpus.CorpusError, match="occurs 0 times"):
        correct.apply("z = 1\n")
    with pytest.raises(corpus.CorpusError, match="occurs 2 times"):
        buggy.apply("x = x\n")


@pytest.mark.parametrize("text,problem", [
    ('[[slow]]\ndescription = "a"\ncell = "b"\n', "one \\[slow\\] variant"),
    ('[fast]\ndescription = "a"\ncell = "b"\n', "unknown sections"),
    ('[[correct]]\ndescription = "a"\ncell = "b"\nold = "c"\nnew = "d"\n', "either cell"),
    ('[[correct]]\ndescription = "a"\nnew = "d"\n', "old must name"),
    ('[[correct]]\ncell = "b"\n', "needs a description"),
    ('[[correct]]\ndescription = "a"\ncell = "b"\ncolour = "c"\n', "unknown keys"),
    ('[[correct]]\ndescription = "a"\ncell = "b"\nexpect = { race = "x" }\n',
     "only buggy variants"),
    ('[[buggy]]\ndescription = "a"\ncell = "b"\n', "names the rejection it expects"),
    ('[[buggy]]\ndescription = "a"\ncell = "b"\nexpect_sim = { race = "x" }\n',
     "names the rejection it expects"),
    ('[[buggy]]\ndescription = "a"\ncell = "b"\nexpect = { race = " " }\n',
     "a phrase or phrases"),
])
def test_a_malformed_file_is_an_error_that_names_the_problem(tmp_path, monkeypatch, text,
                                                             problem):
    with pytest.raises(corpus.CorpusError, match=problem):
        load(tmp_path, monkeypatch, text)


def test_a_sim_only_bug_needs_only_the_simulator_s_expectation(tmp_path, monkeypatch):
    (bug,) = load(tmp_path, monkeypatch, '[[buggy]]\ndescription = "a"\ncell = "b"\n'
                                         'expect_sim = { race = "x" }\nsim_only = true\n')
    assert bug.sim_only and bug.expected("sim") == [("race", ("x",))]
