"""Draw the README's picture from lesson 02's recorded GPU run (workbook/data/02_reduction.json).

    python docs/img/reduction_bandwidth.py   # writes docs/img/reduction-bandwidth.png
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("torch.sum", "cupy.sum")


def main() -> None:
    import sys

    sys.path.insert(0, str(ROOT))
    from workbook.recorded import load

    data = load("02_reduction")
    section = data["parts"]["bandwidth"]
    k = section["columns"].index("GB/s")
    rows = section["rows"][::-1]
    labels = [f"{r[0]}  ({r[1]})" for r in rows]
    colours = ["#8c8c8c" if r[0] in LIBRARIES else "#76b900" for r in rows]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.barh(labels, [r[k] for r in rows], color=colours)
    for y, row in enumerate(rows):
        ax.text(row[k] + 40, y, f"{row[k]:,.0f}", va="center", fontsize=9)
    ax.set_xlabel("GB/s (sum of 2^28 float32, bytes read once)")
    ax.set_xlim(0, max(r[k] for r in rows) * 1.15)
    ax.set_title(f"Lesson 02's kernels (green) against torch and cupy\n"
                 f"{section.get('device', data['device'])}, {data['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(Path(__file__).with_name("reduction-bandwidth.png"), dpi=100)


if __name__ == "__main__":
    main()
