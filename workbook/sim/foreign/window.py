"""Shared memory as the PTX emulation sees it: host addresses and shared-window addresses."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbook.sim import sanitizer
from workbook.sim.foreign.common import WINDOW_ALIGN, ForeignEmulationError, _stats_lock
from workbook.sim.watchdog import StoppableLock


@dataclass
class _Region:
    host: int
    nbytes: int
    window: int | None
    flat: np.ndarray  # uint8 view of the array's bytes
    label: str


class _SharedWindow:
    """The shared arrays of one launch and their window addresses (stable once given)."""

    def __init__(self, shared):
        self.shared = shared
        self.regions: list[_Region] = []
        self.known: set[int] = set()
        self.next = 0
        self.lock = StoppableLock()  # taken by simulated threads

    def _refresh(self) -> None:
        arrays = list(self.shared._allocations.values())
        dyn = self.shared._dynshared
        arrays += [dyn] if dyn.size else []
        alignments = getattr(self.shared, "_workbook_alignment", {})
        for array in arrays:
            if id(array) in self.known:
                continue
            self.known.add(id(array))
            align = max(WINDOW_ALIGN, alignments.get(id(array), 0))
            start = -(-self.next // align) * align
            self.next = start + array.nbytes
            label = f"a shared array of {array.size} {array.dtype} (shape {array.shape})"
            flat = np.asarray(array).reshape(-1).view(np.uint8)  # plain ndarray: no logging
            self.regions.append(_Region(array.__array_interface__["data"][0], array.nbytes,
                                        start, flat, label))

    def by_host(self, address: int) -> _Region | None:
        with self.lock:
            for attempt in (0, 1):
                for region in self.regions:
                    if region.host <= address < region.host + region.nbytes:
                        return region
                if attempt == 0:
                    self._refresh()
        return None

    def by_window(self, address: int) -> _Region | None:
        with self.lock:
            for attempt in (0, 1):
                for region in self.regions:
                    if region.window <= address < region.window + region.nbytes:
                        return region
                if attempt == 0:
                    self._refresh()
        return None

    def generic_hint(self, address: int) -> str:
        """Words for an address that is the generic (host) address of shared memory."""
        with self.lock:
            self._refresh()
            for region in self.regions:
                for base in (region.host, region.host & 0xFFFFFFFF):
                    if base <= address < base + region.nbytes:
                        return (f" It is the generic address of byte {address - base} of "
                                f"{region.label}: a .shared instruction needs the shared-window "
                                "address that __cvta_generic_to_shared(p) returns.")
        return ""


def _window() -> _SharedWindow:
    from numba.cuda.simulator import kernel

    context = kernel._get_kernel_context()
    if context is None:
        raise ForeignEmulationError("foreign functions can only be called inside a kernel")
    window = getattr(context, "_workbook_window", None)
    if window is None:
        with _stats_lock:
            window = getattr(context, "_workbook_window", None)
            if window is None:
                # the simulator's FakeCUDAShared, where every shared array is listed
                # (``context.shared`` may be a proxy installed by another extension)
                window = _SharedWindow(getattr(context, "_shared", None) or context.shared)
                context._workbook_window = window
    return window


def _shared_bytes(address: int, nbytes: int, what: str) -> tuple[np.ndarray, int]:
    """(uint8 view, offset) of ``nbytes`` at shared-window ``address``."""
    window = _window()
    region = window.by_window(address)
    if region is None or address + nbytes > region.window + region.nbytes:
        hint = window.generic_hint(address)
        raise ForeignEmulationError(
            f"{what}: shared-space address {address:#x} is outside every shared array "
            f"(on a GPU: an illegal address or wrong data).{hint}")
    return region.flat, address - region.window


def report_shared(thread, site, label: str, kind: int, address: int, nbytes: int,
                  generic: bool = False) -> None:
    """Report an access of ``thread`` to ``nbytes`` bytes of shared memory to the sanitizer
    (racecheck, initcheck), as if the kernel's line ``site`` made it; ``address`` is a
    shared-window address, or a generic (host) one if ``generic``. ``label`` tells the
    access apart in messages (``"ldmatrix row 3 of matrix 0"``). Addresses outside shared
    memory are not reported."""
    shared = sanitizer.memory_space("shared")
    if shared is None or thread.__dict__.get(sanitizer.BLOCK) is None:
        return
    window = _window()
    region = window.by_host(address) if generic else window.by_window(address)
    if region is None:
        return
    offset = address - (region.host if generic else region.window)
    where = f"{label}: {nbytes} bytes at shared address {region.window + offset:#x}"
    shared.access_bytes(thread, region.host + offset, nbytes, kind,
                        sanitizer.labelled_site(site, where))
