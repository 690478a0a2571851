"""Draw the plugin's icon, .claude-plugin/icon.png: the report's progress chart in miniature.

Grey dots are discarded runs, the green steps the running best going down as runs are kept
(lower is better), one red cross a crash. Drawn with the standard library only (signed
distances, anti-aliased over one pixel, written as an 8-bit RGBA PNG), so the same script
gives the same bytes anywhere:

    python3 scripts/draw_icon.py            # writes .claude-plugin/icon.png (512 x 512)
"""

import math
import os
import struct
import sys
import zlib

SIZE = 512
BACKGROUND = (20, 33, 61)
GRID = (44, 60, 92)
GREY = (141, 153, 174)
GREEN = (46, 194, 126)
RED = (229, 72, 77)
# The running best: (x, y) corners of the step line; a kept run sits at each drop.
STEPS = [(96, 150), (196, 150), (196, 250), (300, 250), (300, 318), (420, 318)]
KEPT = [(96, 150), (196, 250), (300, 318)]
DISCARDS = [(146, 108), (236, 196), (264, 168), (346, 266), (384, 284), (412, 240)]   # all above the best then
CRASH = (240, 100)   # no value: drawn at the top edge, as the report does
DOWN = 44            # the drawing moved down to sit in the middle of the square


class Canvas:
    def __init__(self, size):
        self.size = size
        self.px = [[0.0, 0.0, 0.0, 0.0] for _ in range(size * size)]   # premultiplied RGBA, 0..1

    def paint(self, colour, distance, box, opacity=1.0):
        """Cover the pixels inside `distance` (a signed distance: < 0 inside) within `box`."""
        r, g, b = (c / 255 for c in colour)
        x0, y0, x1, y1 = (max(0, min(self.size, int(v))) for v in box)
        for y in range(y0, y1):
            for x in range(x0, x1):
                a = min(1.0, max(0.0, 0.5 - distance(x + 0.5, y + 0.5))) * opacity
                if a:
                    p = self.px[y * self.size + x]
                    keep = 1 - a
                    p[0], p[1], p[2], p[3] = r * a + p[0] * keep, g * a + p[1] * keep, b * a + p[2] * keep, a + p[3] * keep

    def png(self):
        rows = []
        for y in range(self.size):
            row = bytearray([0])   # filter: none
            for p in self.px[y * self.size:(y + 1) * self.size]:
                a = p[3]
                rgb = [round(min(1.0, c / a) * 255) if a else 0 for c in p[:3]]
                row += bytes(rgb + [round(a * 255)])
            rows.append(bytes(row))

        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        header = struct.pack(">IIBBBBB", self.size, self.size, 8, 6, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                + chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b""))


def rounded_square(size, radius):
    def d(x, y):
        qx = abs(x - size / 2) - (size / 2 - radius)
        qy = abs(y - size / 2) - (size / 2 - radius)
        return math.hypot(max(qx, 0), max(qy, 0)) + min(max(qx, qy), 0) - radius
    return d


def circle(cx, cy, r):
    return lambda x, y: math.hypot(x - cx, y - cy) - r


def segment(ax, ay, bx, by, half_width):
    dx, dy = bx - ax, by - ay
    length2 = dx * dx + dy * dy

    def d(x, y):
        t = max(0.0, min(1.0, ((x - ax) * dx + (y - ay) * dy) / length2))
        return math.hypot(x - ax - t * dx, y - ay - t * dy) - half_width
    return d


def around(points, pad):
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return min(xs) - pad, min(ys) - pad, max(xs) + pad + 1, max(ys) + pad + 1


def draw():
    c = Canvas(SIZE)
    c.paint(BACKGROUND, rounded_square(SIZE, 96), (0, 0, SIZE, SIZE))
    steps, kept, discards = ([(x, y + DOWN) for x, y in points] for points in (STEPS, KEPT, DISCARDS))
    for y in (150 + DOWN, 250 + DOWN, 350 + DOWN):   # faint grid, as on the report's chart
        c.paint(GRID, segment(80, y, 432, y, 1.5), (76, y - 4, 436, y + 5))
    for x, y in discards:
        c.paint(GREY, circle(x, y, 13), around([(x, y)], 15))
    for (ax, ay), (bx, by) in zip(steps, steps[1:]):
        c.paint(GREEN, segment(ax, ay, bx, by, 9), around([(ax, ay), (bx, by)], 11))
    for x, y in kept:
        c.paint(GREEN, circle(x, y, 22), around([(x, y)], 24))
        c.paint(BACKGROUND, circle(x, y, 9), around([(x, y)], 11))
    x, y = CRASH[0], CRASH[1] + DOWN
    for sx in (-1, 1):
        c.paint(RED, segment(x - 14, y - 14 * sx, x + 14, y + 14 * sx, 6), around([(x, y)], 22))
    return c.png()


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = argv[1] if len(argv) > 1 else os.path.join(root, ".claude-plugin", "icon.png")
    with open(target, "wb") as f:
        f.write(draw())
    print(f"wrote {target} ({SIZE} x {SIZE})")


if __name__ == "__main__":
    main(sys.argv)
