"""Write a small multi-label image dataset as one CSV file: the format a dataset of one's own
needs to enter the pipeline by config alone (docs/extending.md).

    python examples/extending/make_shapes.py --out data/raw/shapes [--images 120] [--seed 0]

Each image is 16 x 16 px with up to four coloured quadrants; its labels are the colours it
shows. shapes.csv has a header and one row per image: `image` (the PNG's path relative to the
CSV's folder) and `tags` (the colours, joined by ';').
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

from PIL import Image

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220), "yellow": (230, 220, 20)}
SIDE = 16  # pixels; each colour owns one 8 x 8 quadrant


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write shapes.csv and images/ into")
    parser.add_argument("--images", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    (args.out / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for index in range(args.images):
        shown = [colour for colour in COLOURS if rng.random() < 0.4] or [rng.choice(list(COLOURS))]
        image = Image.new("RGB", (SIDE, SIDE))
        for quadrant, colour in enumerate(COLOURS):
            if colour in shown:
                left, top = (quadrant % 2) * SIDE // 2, (quadrant // 2) * SIDE // 2
                image.paste(COLOURS[colour], (left, top, left + SIDE // 2, top + SIDE // 2))
        name = f"images/{index:04d}.png"
        image.save(args.out / name)
        rows.append({"image": name, "tags": ";".join(shown)})
    with open(args.out / "shapes.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["image", "tags"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.out / 'shapes.csv'} ({len(rows)} images)")


if __name__ == "__main__":
    main()
