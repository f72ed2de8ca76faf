"""workbook.sim.parsing: simulated threads parse one at a time.

CPython's AST constructor keeps its recursion-depth check in state that threads share; two
parses at once failed with "AST constructor recursion depth mismatch" in a block whose
threads all reported the same skipped barrier. The race is rare, so the test checks the
property that prevents it: no two parses overlap."""

import ast
import threading
import time

from workbook.sim import parsing


def test_parses_from_many_threads_never_overlap(monkeypatch):
    inside, overlaps, real_parse = [0], [], ast.parse

    def slow_parse(*args, **kwargs):
        inside[0] += 1
        if inside[0] > 1:
            overlaps.append(inside[0])
        time.sleep(0.002)  # another thread would enter here without the lock
        try:
            return real_parse(*args, **kwargs)
        finally:
            inside[0] -= 1

    monkeypatch.setattr(parsing.ast, "parse", slow_parse)
    start = threading.Barrier(16)

    def work():
        start.wait()
        for _ in range(5):
            parsing.parse("if x:\n    y = a[i] + 1\n", "<kernel>")

    threads = [threading.Thread(target=work) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps == []


def test_parse_is_ast_parse():
    tree = parsing.parse("a[i] + 1", mode="eval")
    assert isinstance(tree.body, ast.BinOp)
