"""Headless Chromium for the page tests: screenshots (decoded here, with zlib) and the browser's DOM."""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

import processes

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
DARK = "--blink-settings=preferredColorScheme=0"  # prefers-color-scheme: dark (1 is light)


def chromium() -> str:
    """The chromium binary; the test is skipped, saying why, where it is not installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed here and `make test` could not install it (apt-get install chromium)")
    return found


def _run(page: Path, *flags: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        # Chromium starts a process tree (zygote, renderer): processes.run ends all of it
        return processes.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *flags, page.resolve().as_uri()])


def screenshot(page: Path, out: Path, width: int = 1000, height: int = 1400, dark: bool = False) -> "Image":
    proc = _run(page, f"--screenshot={out}", f"--window-size={width},{height}", *([DARK] if dark else []))
    assert out.exists(), f"chromium wrote no screenshot: {proc.stderr.decode(errors='replace')[-500:]}"
    return read_png(out)


def dump_dom(page: Path) -> "Node":
    """The document as the browser built it (after parsing, with the SVG in it)."""
    proc = _run(page, "--dump-dom")
    assert proc.returncode == 0 and proc.stdout, proc.stderr.decode(errors="replace")[-500:]
    return parse(proc.stdout.decode("utf-8"))


# ---------------------------------------------------------------------------
# PNG, decoded without pillow
# ---------------------------------------------------------------------------


@dataclass
class Image:
    width: int
    height: int
    channels: int
    rows: list[bytes]  # unfiltered scanlines

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        i = x * self.channels
        return tuple(self.rows[y][i:i + 3])

    def count(self, box: tuple[int, int, int, int], want, tolerance: int = 40) -> int:
        """Pixels in box (x0, y0, x1, y1) within `tolerance` of colour `want` on each channel."""
        x0, y0, x1, y1 = box
        return sum(
            1 for y in range(y0, min(y1, self.height)) for x in range(x0, min(x1, self.width))
            if all(abs(a - b) <= tolerance for a, b in zip(self.pixel(x, y), want))
        )

    def not_background(self, box: tuple[int, int, int, int]) -> int:
        background = self.pixel(2, 2)
        x0, y0, x1, y1 = box
        total = (min(x1, self.width) - x0) * (min(y1, self.height) - y0)
        return total - self.count(box, background, tolerance=8)


def read_png(path: Path) -> Image:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    rows, prev = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        rows.append(prev := _unfilter(raw[start], bytearray(raw[start + 1:start + 1 + stride]), prev, channels))
    return Image(width, height, channels, rows)


def _unfilter(kind: int, line: bytearray, prev: bytes, bpp: int) -> bytes:
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + a) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + b) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (a + b) // 2) & 0xFF
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
    return bytes(line)


# ---------------------------------------------------------------------------
# The DOM, as a small tree
# ---------------------------------------------------------------------------


@dataclass
class Node:
    tag: str
    attrs: dict
    children: list
    text: str = ""

    def find_all(self, tag: str, **attrs) -> list[Node]:
        found = []
        for child in self.children:
            if child.tag == tag and all(child.attrs.get(k.rstrip("_")) == v for k, v in attrs.items()):
                found.append(child)
            found += child.find_all(tag, **attrs)
        return found

    def find(self, tag: str, **attrs) -> Node:
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag} {attrs}>"
        return found[0]

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)

    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())


VOID = {"meta", "br", "img", "input", "link", "hr"}


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, [])
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), [])
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, dict(attrs), []))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(Node("#text", {}, [], data))


def parse(text: str) -> Node:
    builder = _Builder()
    builder.feed(text)
    return builder.root
