"""Generate Wikipedia edit events as hello-samza's WikipediaFeed writes them to
``wikipedia-raw``: one JSON object per line, ``{"channel", "raw", "time", "source"}``, where
``raw`` is the IRC line of one edit (title, flags, diff URL, user, byte diff, summary).

    python3 generate_edits.py 10000 > edits.jsonl
    python3 generate_edits.py 10000 | weir log produce wikipedia-raw --format json \\
        --root ./weir-data/log --end

Deterministic for a seed (``--seed``). One line in 50 is not an edit (a channel notice the
parser cannot parse), as the live feed has.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator

__all__ = ["edits", "NOT_AN_EDIT"]

NOT_AN_EDIT = "*** Notice -- the channel is moderated"
_TITLES = ([f"Article {i}" for i in range(400)] + [f"Talk:Article {i}" for i in range(40)]
           + [f"Special:Log/upload {i}" for i in range(10)])
_USERS = [f"Editor{i}" for i in range(120)] + ["ClueBot NG", "Sam Sailor"]
_FLAGS = ["", "M", "N", "!", "B", "MB", "N!", "M!"]


def edits(count: int, seed: int = 7) -> Iterator[dict]:
    """``count`` feed events (1 in 50 not an edit)."""
    rng = random.Random(seed)
    time = 1_540_408_899_419
    for i in range(count):
        time += rng.randint(5, 900)
        if rng.random() < 0.02:
            raw = NOT_AN_EDIT
        else:
            title = rng.choice(_TITLES[:60]) if rng.random() < 0.3 else rng.choice(_TITLES)
            flags = rng.choice(_FLAGS)
            diff = rng.randint(-2_000, 5_000)
            url = f"https://en.wikipedia.org/w/index.php?diff={865_574_761 + i}&oldid={861_177_329 + i}"
            sign = "+" if diff >= 0 else ""
            raw = (f"[[{title}]] {flags} {url} * {rng.choice(_USERS)} * ({sign}{diff}) "
                   f"summary of edit {i}")
        yield {"channel": "#en.wikipedia", "raw": raw, "time": time, "source": "rc-pmtpa"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Wikipedia feed events as JSON lines.")
    parser.add_argument("count", type=int)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    out = sys.stdout
    for event in edits(args.count, args.seed):
        out.write(json.dumps(event) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
