"""Pages told apart by their images, so that a page answered as rotated is known when it comes back turned.

A page is named by the sha1 (its first 12 hex digits) of the first image of it seen. Once the stand-in has answered a
page ``rotated`` R, it knows the page's upright orientation, and reads its pixels in all four turns: an image that is
any of them is that page, turned some degrees from the first image. olmocr re-asks with the image turned by the
correction (``Image.Transpose.ROTATE_<R>``, anticlockwise), and a model shown the page still askew would again say how
to turn it, so the stand-in does too.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .png import ROTATIONS, NotAPng, PngHeader, Undecodable, read_pixels

PAGE_ID_CHARS = 12


@dataclass(frozen=True)
class View:
    """One image of a page: the page, how far it is turned (anticlockwise) from the page's first image, and the
    correction the page still needs (None: the page was never answered as rotated, so it is taken as upright)."""

    page: str
    rotation: int
    correction: int | None


class Pages:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_sha1: dict[str, tuple[str, int]] = {}
        self._by_pixels: dict[str, tuple[str, int]] = {}
        self._upright: dict[str, int] = {}  # page -> its turn from its first image that makes it upright
        self._turned_sizes: set[tuple[int, int]] = set()  # the sizes of the pixel views held: no other image is decoded

    def identify(self, png: bytes, header: PngHeader, sha1: str) -> View:
        with self._lock:
            known = self._by_sha1.get(sha1)
            may_be_turned = (header.width, header.height) in self._turned_sizes
        if known is None and may_be_turned:
            known = self._by_pixels_of(png)
        with self._lock:
            page, rotation = known or self._by_sha1.get(sha1) or (sha1[:PAGE_ID_CHARS], 0)
            self._by_sha1.setdefault(sha1, (page, rotation))
            upright = self._upright.get(page)
        return View(page, rotation, None if upright is None else (upright - rotation) % 360)

    def _by_pixels_of(self, png: bytes) -> tuple[str, int] | None:
        try:
            key = read_pixels(png).key()
        except (NotAPng, Undecodable):
            return None
        with self._lock:
            return self._by_pixels.get(key)

    def turned(self, view: View, png: bytes, correction: int) -> None:
        """The stand-in answered ``view`` as needing ``correction`` degrees: hold the page's upright turn and its pixels."""
        with self._lock:
            self._upright[view.page] = (view.rotation + correction) % 360
            if any(page == view.page for page, _ in self._by_pixels.values()):
                return
        try:
            pixels = read_pixels(png)
        except (NotAPng, Undecodable):
            return  # told apart by its bytes alone: a re-ask with a turned image is a new page
        views = {pixels.rotated(turn).key(): (view.page, (view.rotation + turn) % 360) for turn in ROTATIONS}
        with self._lock:
            self._by_pixels.update(views)
            self._turned_sizes.update({(pixels.header.width, pixels.header.height), (pixels.header.height, pixels.header.width)})

    def reset(self) -> None:
        with self._lock:
            self._by_sha1.clear()
            self._by_pixels.clear()
            self._upright.clear()
            self._turned_sizes.clear()
