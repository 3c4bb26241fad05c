"""Writer process of the crash tests (run as a script, killed with SIGKILL).

Appends records whose value starts with their own offset (``b"<offset>|" + padding``),
flushes after a random number of them and prints the last acknowledged offset after each
flush. With ``tear`` it finally writes the first bytes of one more record straight into the
active segment (what a crash in the middle of a write leaves behind), prints ``torn`` and
waits to be killed.

Usage: python _crash_writer.py <repo> <root> <seed> <acks-before-tear|0>
"""

import random
import sys
import time

sys.path.insert(0, sys.argv[1])

from weir.engine.systems.filelog._format import encode_record  # noqa: E402
from weir.engine.systems.filelog.segment import list_segments  # noqa: E402
from tests.engine.systems.filelog.conftest import Log  # noqa: E402

root, seed, tear_after = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
log = Log(root, segment_bytes="20000", producer_buffer_bytes="2000")
writer = log.writer()
rng = random.Random(seed)
acks = 0
while True:
    for _ in range(rng.randint(1, 40)):
        offset = writer.upcoming
        writer.append(b"k%d" % rng.randint(0, 9), b"%d|" % offset + b"x" * rng.randint(0, 300))
    writer.flush()
    print(writer.upcoming - 1, flush=True)
    acks += 1
    if tear_after and acks >= tear_after:
        frame = encode_record(b"torn", b"%d|" % writer.upcoming + b"y" * 200)
        with open(list_segments(log.pdir())[-1].path, "ab") as f:
            f.write(frame[:rng.randint(1, len(frame) - 1)])
        print("torn", flush=True)
        time.sleep(600)
