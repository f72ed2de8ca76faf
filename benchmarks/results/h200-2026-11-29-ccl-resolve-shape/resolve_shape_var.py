"""BlobAnalysis variant: resolve_rank_kernel with RESOLVE_SHAPE = (threads, cells per thread)
(set by the file exec'd before this one) instead of the lesson's (SCAN_THREADS, SCAN_ITEMS).
The product stays SCAN_TILE, so the tiles' offsets, which the write reads, are laid out as
before. The kernel is the lesson's own source (inspect), compiled again with those
constants. Exec'd into a copy of the lesson's namespace by
../h200-2026-11-28-ccl-readback-last/run_times.py."""
import inspect as _inspect

_lesson_kernel = resolve_rank_kernel  # noqa: F821  (the lesson's, in the namespace)
SCAN_THREADS, SCAN_ITEMS = RESOLVE_SHAPE  # noqa: F821  (set before)
assert SCAN_THREADS * SCAN_ITEMS == SCAN_TILE  # noqa: F821
exec(_inspect.getsource(getattr(_lesson_kernel, "py_func", None) or _lesson_kernel.fn))
_shaped_resolve = resolve_rank_kernel  # noqa: F821  (defined by the exec)


class BlobAnalysis(BlobAnalysis):  # noqa: F821
    def label_launches(self, d_image, connectivity):
        launches = super().label_launches(d_image, connectivity)
        if self.labelling == "blocks":
            tile_sums = self.levels[0][0]
            launches[2] = lambda: self.launch(
                ("resolve", SCAN_THREADS), _shaped_resolve, tile_sums.size, SCAN_THREADS,
                self.forest, self.roots, tile_sums, self.size)
        return launches
