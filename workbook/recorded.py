"""Measurements recorded on a real GPU, shipped with the package for simulator users.

Each lesson's benchmark script writes ``workbook/data/<lesson>.json``::

    {"device": ..., "date": ..., "command": ...,
     "parts": {NAME: {"title": ..., "columns": [...], "rows": [[...], ...], "note": ...}}}

:func:`show_recorded` prints one part as a table (and, where a ``GB/s`` column
exists, a bar chart), always with the device and date it was measured on.
"""

from __future__ import annotations

import json
from importlib import resources


def load(lesson: str) -> dict | None:
    """The recorded measurements of ``lesson``, or None if none were recorded."""
    path = resources.files("workbook") / "data" / f"{lesson}.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def merge_rows(path, parts: dict, replaced, device: str, update: dict, order=None,
               whole=()) -> dict:
    """Re-measured rows into the recorded file at ``path`` (a benchmark's ``--out``).

    In each part named in ``parts``, rows for which ``replaced(row)`` is true give way to
    the new part's rows (in ``rows`` and ``all_rows``, sorted by ``order`` if given);
    parts named in ``whole``, or new ones, are replaced whole. ``update`` (what, date,
    command) is appended to ``updates``, so the file says which rows come from which run.
    Refuses a file recorded on another device.
    """
    from pathlib import Path

    path = Path(path)
    result = json.loads(path.read_text())
    if result["device"] != device:
        raise ValueError(f"{path} was recorded on {result['device']}, not on {device}: "
                         "run the whole benchmark instead")
    for name, new in parts.items():
        old = result["parts"].get(name)
        if old is None or name in whole:
            result["parts"][name] = new
            continue
        old.update({k: new[k] for k in ("title", "note") if k in new})
        for key in ("rows", "all_rows"):
            if key in old and key in new:
                kept = [r for r in old[key] if not replaced(r)]
                old[key] = sorted(kept + new[key], key=order) if order else kept + new[key]
    result.setdefault("updates", []).append(update)
    path.write_text(json.dumps(result, indent=1) + "\n")
    return result


def format_table(columns: list[str], rows: list[list]) -> str:
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(c), *(len(r[k]) for r in cells)) for k, c in enumerate(columns)]
    line = "  ".join(c.rjust(w) for c, w in zip(columns, widths))
    body = ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join([line, "-" * len(line), *body])


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def show_recorded(lesson: str, part: str, plot: bool = True) -> None:
    """Print a recorded measurement with its provenance; plot bandwidth columns."""
    data = load(lesson)
    if data is None or part not in data.get("parts", {}):
        print(f"no recorded GPU measurement for {lesson}/{part} yet "
              "(the lesson's script in benchmarks/ records one on a GPU)")
        return
    section = data["parts"][part]
    device = section.get("device", data["device"])  # a part may come from another run
    print(f"{section['title']}\nmeasured on {device}, {section.get('date', data['date'])}\n")
    print(format_table(section["columns"], section["rows"]))
    if section.get("note"):
        print(f"\n{section['note']}")
    if plot and "GB/s" in section["columns"]:
        _bar_chart(section, device)


def _bar_chart(section: dict, device: str) -> None:
    import matplotlib.pyplot as plt

    k = section["columns"].index("GB/s")
    labels = [str(r[0]) for r in section["rows"]]
    values = [r[k] for r in section["rows"]]
    plt.figure(figsize=(7, 0.4 * len(labels) + 1))
    plt.barh(labels[::-1], values[::-1])
    plt.xlabel("GB/s")
    plt.title(f"{section['title']} ({device})")
    plt.tight_layout()
    plt.show()


def end_to_end_table(part: dict) -> tuple[list[str], list[list]]:
    """The ``end_to_end`` part as one row per shape and one column per function, each
    cell the library's time over ours (``x library``: above 1 is faster than it)."""
    columns = part["columns"]
    function_i, ratio_i = columns.index("function"), len(columns) - 1
    library_i = ratio_i - 1
    functions = list(dict.fromkeys(r[function_i] for r in part["rows"]))
    shapes: dict[tuple, dict] = {}
    for r in part["rows"]:
        cells = shapes.setdefault(tuple(r[:function_i]), {})
        cells[r[function_i]] = r[ratio_i]
        if r[function_i] == functions[0]:
            cells["library us"] = r[library_i]
    header = [*columns[:function_i], columns[library_i], *functions]
    rows = [[*shape, cells.get("library us", ""), *(cells.get(f, "") for f in functions)]
            for shape, cells in shapes.items()]
    return header, rows


def show_end_to_end(lesson: str) -> None:
    """Print a lesson's recorded end-to-end comparison (one row per shape)."""
    data = load(lesson)
    part = (data or {}).get("parts", {}).get("end_to_end")
    if part is None:
        print(f"no recorded end-to-end measurement for {lesson} yet "
              "(benchmarks/end_to_end.py records one on a GPU)")
        return
    print(f"{part['title']}\nmeasured on {part.get('device', data['device'])}, "
          f"{part.get('date', data['date'])}; cells: x {part['columns'][-2][:-3]} "
          "(its time / ours; above 1 is faster)\n")
    print(format_table(*end_to_end_table(part)))
    if part.get("note"):
        print(f"\n{part['note']}")
