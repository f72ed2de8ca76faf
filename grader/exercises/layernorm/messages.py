"""How lesson 04's messages list rows and columns."""

from __future__ import annotations

import numpy as np


def rows_text(rows: np.ndarray, total: int, noun: str = "rows") -> str:
    shown = ", ".join(str(int(r)) for r in rows[:8])
    more = f", ... ({rows.size} of {total} {noun})" if rows.size > 8 else f" (of {total})"
    return f"[{shown}{more}]"
