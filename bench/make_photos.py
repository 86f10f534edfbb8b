#!/usr/bin/python3
"""Photo-like JPEGs for benchmarks (issue 26): COUNT images of about 0.19 Mpix
(500x375, one in four portrait 375x500), JPEG quality 90, 4:2:0, written once into
DIR/class-K/NNNNN.jpg (10 class folders).

What makes them photo-like rather than synthetic: a smooth multi-octave noise field per
channel (sky, shading: most of a photo's energy is at low frequencies), 6-20 shapes
with blurred edges (objects: the edges JPEG spends its bits on), and sensor-like noise
(sigma 2-6), so the entropy-coded size lands where camera photos at q90 do (about
1.5-3 bits per pixel) instead of the 0.3 bpp of flat synthetic images. Deterministic
(seeded per image). Needs python3-numpy and python3-pil (Debian).

    /usr/bin/python3 bench/make_photos.py DIR [--count 2000] [--seed 0]
"""
import argparse
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


def field(rng, h, w):
    out = np.zeros((h, w), np.float32)
    for octave, weight in ((4, 1.0), (12, 0.5), (40, 0.25), (120, 0.12)):
        small = rng.standard_normal((max(2, h * octave // 500), max(2, w * octave // 500)))
        img = Image.fromarray(small.astype(np.float32), mode="F").resize((w, h), Image.BICUBIC)
        out += weight * np.asarray(img)
    return out


def photo(seed, portrait):
    rng = np.random.default_rng(seed)
    w, h = (375, 500) if portrait else (500, 375)
    base = np.stack([field(rng, h, w) for _ in range(3)], axis=-1)
    tint = rng.uniform(60, 190, 3)
    img = np.clip(tint + 35 * base, 0, 255).astype(np.uint8)
    pil = Image.fromarray(img, "RGB")
    shapes = Image.new("RGBA", (w, h), (0, 0, 0, 0))
    draw = ImageDraw.Draw(shapes)
    for _ in range(int(rng.integers(6, 21))):
        x0, y0 = int(rng.integers(-w // 4, w)), int(rng.integers(-h // 4, h))
        x1, y1 = x0 + int(rng.integers(20, w // 2)), y0 + int(rng.integers(20, h // 2))
        color = tuple(int(c) for c in rng.integers(0, 256, 3)) + (int(rng.integers(120, 256)),)
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), fill=color)
    shapes = shapes.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.5, 2.5))))
    pil.paste(shapes, (0, 0), shapes)
    arr = np.asarray(pil).astype(np.float32)
    arr += rng.normal(0, rng.uniform(2, 6), arr.shape)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    done = os.path.join(a.dir, ".complete")
    if os.path.exists(done):
        return
    total = 0
    for i in range(a.count):
        folder = os.path.join(a.dir, f"class-{i % 10}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{i:05d}.jpg")
        photo(a.seed * 1_000_003 + i, i % 4 == 3).save(path, quality=90, subsampling=2)
        total += os.path.getsize(path)
    with open(done, "w") as f:
        f.write(f"{a.count}\n")
    print(f"make_photos: {a.count} images, {total / a.count / 1024:.1f} KiB each on average, "
          f"{8 * total / a.count / (500 * 375):.2f} bits per pixel", file=sys.stderr)


if __name__ == "__main__":
    main()
