"""BlobAnalysis variant: block_init_compress_kernel on a thread block of SHAPE (set by the
file exec'd before this one) instead of the lesson's BLOCK. The kernel and its helpers are
the lesson's own source, read from the solution notebook and compiled again with the tile
constants of SHAPE; every other launch is the lesson's. Exec'd into a copy of the lesson's
namespace by ../h200-2026-11-28-ccl-readback-last/run_times.py."""
import ast as _ast
import json as _json

_HELPERS = ("jump_to_roots", "in_tile_unions", "union_cells", "store_root",
            "block_init_compress_kernel")


def _lesson_source(names):
    notebook = _json.load(open("solutions/05_ccl/ccl.ipynb"))
    for cell in notebook["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "code" and "def block_init_compress_kernel" in text:
            tree = _ast.parse(text)
            return "\n\n".join(_ast.get_source_segment(text, node, padded=False)
                               if not node.decorator_list else
                               "\n".join(text.splitlines()[node.decorator_list[0].lineno - 1:
                                                           node.end_lineno])
                               for node in tree.body
                               if isinstance(node, _ast.FunctionDef) and node.name in names)
    raise LookupError("no cell defines block_init_compress_kernel")


BLOCK = SHAPE  # noqa: F821  (set by the file before)
TILE_COLS = BLOCK[0]
TILE_CELLS = 2 * BLOCK[0] * BLOCK[1]
exec(_lesson_source(_HELPERS))
_shaped_init = block_init_compress_kernel  # noqa: F821  (defined by the exec)


class BlobAnalysis(BlobAnalysis):  # noqa: F821  (the lesson's, in the namespace)
    def label_launches(self, d_image, connectivity):
        launches = super().label_launches(d_image, connectivity)
        if self.labelling != "blocks":
            return launches
        h, w = self.height, self.width
        grid = ((((w + 1) // 2) + SHAPE[0] - 1) // SHAPE[0],  # noqa: F821
                (((h + 1) // 2) + SHAPE[1] - 1) // SHAPE[1])  # noqa: F821
        launches[0] = lambda: self.launch(
            ("init", SHAPE), _shaped_init, grid, SHAPE, d_image, self.roots,  # noqa: F821
            self.forest, self.links, h, w, connectivity, self.tables[connectivity])
        return launches
