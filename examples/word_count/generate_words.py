"""Print N JSON lines ``{"word": ...}`` drawn from a vocabulary of 50,000 words (N is the first
argument, default 500,000), for ``weir log produce words --format json --key-field word``.

The vocabulary is larger than the store's object cache (1,000 entries by default), so the job
writes changelog records between commits: after a ``kill -9`` the restart has uncommitted
changes to revert, and says how many.
"""

import json
import random
import sys

count = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
rng = random.Random(2024)
out = sys.stdout
for _ in range(count):
    out.write(json.dumps({"word": f"w{rng.randrange(50_000):05d}"}) + "\n")
