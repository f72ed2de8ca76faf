"""BlobAnalysis variant: resolve_rank_kernel in the scan's shape (SCAN_THREADS x SCAN_ITEMS,
1024 x 4 on a GPU), as the lesson launched it before it took RESOLVE_THREADS x RESOLVE_ITEMS
(512 x 8). The lesson's own source (inspect), compiled again with those constants. Exec'd
into a copy of the lesson's namespace by ../h200-2026-11-28-ccl-readback-last/run_times.py."""
import inspect as _inspect

_lesson_kernel = resolve_rank_kernel  # noqa: F821  (the lesson's, in the namespace)
RESOLVE_THREADS, RESOLVE_ITEMS = SCAN_THREADS, SCAN_ITEMS  # noqa: F821
exec(_inspect.getsource(getattr(_lesson_kernel, "py_func", None) or _lesson_kernel.fn))
_scan_shaped_resolve = resolve_rank_kernel  # noqa: F821  (defined by the exec)


class BlobAnalysis(BlobAnalysis):  # noqa: F821
    def label_launches(self, d_image, connectivity):
        launches = super().label_launches(d_image, connectivity)
        if self.labelling == "blocks":
            tile_sums = self.levels[0][0]
            launches[2] = lambda: self.launch(
                ("resolve", "scan shape"), _scan_shaped_resolve, tile_sums.size,
                RESOLVE_THREADS, self.forest, self.roots, tile_sums, self.size)
        return launches
