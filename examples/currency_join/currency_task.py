"""The currency join task (``task.class=currency_task:CurrencyJoinTask``).

Per message:

* ``currency-codes`` (bootstrap): remember ``code -> symbol`` in the ``currency-symbols`` store;
* ``transactions`` / ``transactions-replay``: look up the symbol, send
  ``{"amount": "$1234"}`` (key: the transaction id) to ``amounts``, and add the amount to
  the currency's running total in the logged ``currency-totals`` store.

Every ``task.window.ms`` the totals that changed are sent to ``currency-totals`` as
``{"currency", "total", "count"}`` (key: the currency code); at end of stream every total is
sent once more, so the last message per currency is its final total. Output goes to the
partition the task reads, so tasks never share an output partition.
"""

from __future__ import annotations

from weir import (EndOfStreamListenerTask, InitableTask, OutgoingMessageEnvelope, StreamTask,
                  SystemStream, WindowableTask)

__all__ = ["CurrencyJoinTask", "UnknownCurrencyError", "CODES", "AMOUNTS", "TOTALS"]

CODES = "currency-codes"
AMOUNTS = SystemStream("filelog", "amounts")
TOTALS = SystemStream("filelog", "currency-totals")


class UnknownCurrencyError(Exception):
    """A transaction names a currency the bootstrap stream did not define."""


class CurrencyJoinTask(StreamTask, InitableTask, WindowableTask, EndOfStreamListenerTask):
    def init(self, context):
        self.symbols = context.store("currency-symbols")
        self.totals = context.store("currency-totals")
        self.partition = min(context.ssps).partition
        self.changed: set[str] = set()

    def process(self, envelope, collector, coordinator):
        if envelope.ssp.stream == CODES:
            self.symbols.put(envelope.key, envelope.message["symbol"])
            return
        tx = envelope.message
        currency, amount = tx["currency"], tx["amount"]
        symbol = self.symbols.get(currency)
        if symbol is None:
            raise UnknownCurrencyError(
                f"transaction {tx['id']} is in {currency!r}, which currency-codes does not "
                f"define; add the code to the bootstrap stream")
        collector.send(OutgoingMessageEnvelope(AMOUNTS, {"amount": f"{symbol}{amount}"},
                                               key=tx["id"], partition=self.partition))
        total = self.totals.get(currency) or {"total": 0, "count": 0}
        self.totals.put(currency, {"total": total["total"] + amount,
                                   "count": total["count"] + 1})
        self.changed.add(currency)

    def window(self, collector, coordinator):
        for currency in sorted(self.changed):
            self._send_total(collector, currency, self.totals.get(currency))
        self.changed.clear()

    def on_end_of_stream(self, collector, coordinator):
        with self.totals.all() as totals:
            for currency, total in totals:
                self._send_total(collector, currency, total)
        self.changed.clear()

    def _send_total(self, collector, currency, total):
        collector.send(OutgoingMessageEnvelope(
            TOTALS, {"currency": currency, "total": total["total"], "count": total["count"]},
            key=currency, partition=self.partition))
