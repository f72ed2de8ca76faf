"""BlobAnalysis variant: the packed statistics always in the thread shape of PIXELS_FORCED
pixels per thread (set by the file exec'd before this one), whatever packed_stats_for would
pick from the image's blobs per pixel. Exec'd into a copy of the lesson's namespace by
../h200-2026-11-28-ccl-readback-last/run_times.py."""

_forced = PACKED_STATS[PIXELS_FORCED]  # noqa: F821  (the lesson's kernels; set before)


class BlobAnalysis(BlobAnalysis):  # noqa: F821  (the lesson's, in the namespace)
    def statistics(self, count, kernel=None):
        return super().statistics(count, _forced if kernel is None else kernel)
