"""Write the currency example's input streams to the file log, and what the job must output.

Streams (created here, all bounded and ended once written, so the job stops by itself):

* ``currency-codes``, 4 partitions: key = currency code, message ``{"symbol", "name"}``;
* ``transactions`` and ``transactions-replay``, 4 partitions each: key = transaction id,
  message ``{"id", "currency", "amount"}``, partitioned by currency code like the codes;
* the job's outputs ``amounts`` and ``currency-totals`` (4 partitions, empty).

Usage (from the repository root; paths come from the job config)::

    python examples/currency_join/generate.py [--transactions 20000] [--replay 10000]
    weir run examples/currency_join/job.properties
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from weir.engine.config.job import load_config
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, partition_for
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config

__all__ = ["CURRENCIES", "PARTITIONS", "Truth", "generate", "main"]

PARTITIONS = 4
SYSTEM = "filelog"
CURRENCIES: dict[str, tuple[str, str]] = {
    "USD": ("$", "US dollar"), "EUR": ("€", "euro"), "GBP": ("£", "pound sterling"),
    "JPY": ("¥", "yen"), "CHF": ("Fr.", "Swiss franc"), "INR": ("₹", "Indian rupee"),
    "KRW": ("₩", "won"), "BRL": ("R$", "real"), "CAD": ("C$", "Canadian dollar"),
    "AUD": ("A$", "Australian dollar"), "SEK": ("kr", "Swedish krona"),
    "PLN": ("zł", "złoty"), "TRY": ("₺", "Turkish lira"), "ZAR": ("R", "rand"),
    "MXN": ("Mex$", "Mexican peso"), "ILS": ("₪", "shekel"), "THB": ("฿", "baht"),
    "VND": ("₫", "dong"), "NGN": ("₦", "naira"), "UAH": ("₴", "hryvnia"),
}
INPUTS = ("currency-codes", "transactions", "transactions-replay")
OUTPUTS = ("amounts", "currency-totals")


@dataclass
class Truth:
    """What the job must produce for the generated input."""

    amounts: dict[str, str] = field(default_factory=dict)
    """Transaction id -> ``"$1234"``."""
    totals: dict[str, dict[str, int]] = field(default_factory=dict)
    """Currency code -> ``{"total", "count"}`` over both transaction streams."""
    records: dict[str, int] = field(default_factory=dict)
    """Records written per input stream."""

    def add(self, tx: dict) -> None:
        code, amount = tx["currency"], tx["amount"]
        self.amounts[tx["id"]] = f"{CURRENCIES[code][0]}{amount}"
        total = self.totals.setdefault(code, {"total": 0, "count": 0})
        total["total"] += amount
        total["count"] += 1


def partition_of(code: str) -> int:
    """The partition of a currency code, and of every transaction in it."""
    return partition_for(code.encode(), PARTITIONS)


def _transactions(rng: random.Random, prefix: str, n: int) -> list[dict]:
    codes = list(CURRENCIES)
    weights = [1.0 / (rank + 1) for rank in range(len(codes))]  # USD busiest, UAH quietest
    picks = rng.choices(codes, weights, k=n)
    return [{"id": f"{prefix}{i:07d}", "currency": code, "amount": rng.randint(1, 9999)}
            for i, code in enumerate(picks)]


def generate(config: Config, *, transactions: int = 20_000, replay: int = 10_000,
             seed: int = 2024) -> Truth:
    """Create the example's streams under ``systems.filelog.root`` and fill them.

    Raises SystemExit with a hint when the streams already exist (delete the root first)."""
    registry = SystemRegistry(config)
    admin = registry.admin(SYSTEM)
    existing = [s for s in INPUTS + OUTPUTS if admin.stream_exists(s)]
    if existing:
        raise SystemExit(f"streams {', '.join(existing)} already exist under "
                         f"{config.get('systems.filelog.root')}; delete that directory and the "
                         f"job's {config.get('job.data.dir') or 'data directory'} (state and "
                         f"checkpoints) to generate fresh data")
    for stream in INPUTS:
        admin.create_stream(StreamSpec(stream, PARTITIONS, bounded=True))
    for stream in OUTPUTS:
        admin.create_stream(StreamSpec(stream, PARTITIONS))
    rng = random.Random(seed)
    truth = Truth()
    producer = registry.producer(SYSTEM)
    producer.register("generate")
    producer.start()
    try:
        codes = SystemStream(SYSTEM, "currency-codes")
        serdes = registry.serdes_for(codes)
        for code, (symbol, name) in CURRENCIES.items():
            producer.send("generate", OutgoingMessageEnvelope(
                codes, serdes.serialize_message({"symbol": symbol, "name": name}),
                key=serdes.serialize_key(code), partition=partition_of(code)))
        truth.records["currency-codes"] = len(CURRENCIES)
        for stream, prefix, n in (("transactions", "t", transactions),
                                  ("transactions-replay", "r", replay)):
            ss = SystemStream(SYSTEM, stream)
            serdes = registry.serdes_for(ss)
            for tx in _transactions(rng, prefix, n):
                producer.send("generate", OutgoingMessageEnvelope(
                    ss, serdes.serialize_message(tx), key=serdes.serialize_key(tx["id"]),
                    partition=partition_of(tx["currency"])))
                truth.add(tx)
            truth.records[stream] = n
        producer.flush("generate")
        for stream in INPUTS:
            producer.end_stream(stream)
    finally:
        producer.stop()
    return truth


def main(argv: Sequence[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(here / "job.properties"))
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE")
    parser.add_argument("--transactions", type=int, default=20_000)
    parser.add_argument("--replay", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)
    config = load_config(args.config, args.overrides)
    started = time.perf_counter()
    truth = generate(config, transactions=args.transactions, replay=args.replay,
                     seed=args.seed)
    total = sum(truth.records.values())
    print(f"wrote {total:,} records ({', '.join(f'{s} {n:,}' for s, n in truth.records.items())}) "
          f"to {config.get('systems.filelog.root')} in {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
