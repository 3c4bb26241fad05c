"""hello-samza's WikipediaParserStreamTask, ported to Weir.

The Java original (samza-hello-samza, ``samza.examples.wikipedia.task``) reads the raw IRC
feed events of ``wikipedia-raw`` and writes each parsed edit to ``wikipedia-edits``. The
port keeps its structure line by line; docs/PORTING.md explains each change:

* ``new OutgoingMessageEnvelope(OUTPUT_STREAM, parsedJsonObject)`` keeps its order (stream,
  message): only a *key* must be passed by keyword (``key=...``);
* ``WikipediaParser.parseLine`` is the same regular expression; Java's
  ``Integer.parseInt`` is ``int``;
* the task reads and writes Python dicts: the JSON serde of ``systems.kafka.samza.msg.serde``
  does the (de)serialization, as Samza's JsonSerde did.
"""

from __future__ import annotations

import re
import sys

from weir import OutgoingMessageEnvelope, StreamTask, SystemStream

__all__ = ["WikipediaParserStreamTask", "parse_event", "parse_line"]

OUTPUT_STREAM = SystemStream("kafka", "wikipedia-edits")

_LINE = re.compile(r"\[\[(.*)\]\]\s(.*)\s(.*)\s\*\s(.*)\s\*\s\(\+?(.\d*)\)\s(.*)")


def parse_line(line: str) -> dict:
    """One edit of the raw feed: title, user, flags, diff bytes, diff URL, summary (Samza's
    ``WikipediaParser.parseLine``; a line that does not match raises ValueError)."""
    m = _LINE.search(line)
    if m is None:
        raise ValueError(f"not a Wikipedia edit line: {line!r}")
    title, flags, diff_url, user, byte_diff, summary = m.groups()
    return {
        "title": title,
        "user": user,
        "unparsed-flags": flags,
        "diff-bytes": int(byte_diff),
        "diff-url": diff_url,
        "summary": summary,
        "flags": {
            "is-minor": "M" in flags,
            "is-new": "N" in flags,
            "is-unpatrolled": "!" in flags,
            "is-bot-edit": "B" in flags,
            "is-special": title.startswith("Special:"),
            "is-talk": title.startswith("Talk:"),
        },
    }


def parse_event(event: dict) -> dict | None:
    """Samza's ``WikipediaParser.parseEvent``: the parsed line plus the event's channel,
    source and time; None (and a line on standard error) when the line does not parse."""
    try:
        parsed = parse_line(event["raw"])
    except (KeyError, TypeError, ValueError):
        print(f"Unable to parse line: {event}", file=sys.stderr)
        return None
    parsed["channel"] = event.get("channel")
    parsed["source"] = event.get("source")
    parsed["time"] = event.get("time")
    return parsed


class WikipediaParserStreamTask(StreamTask):
    def process(self, envelope, collector, coordinator):
        parsed = parse_event(envelope.message)
        if parsed is not None:
            collector.send(OutgoingMessageEnvelope(OUTPUT_STREAM, parsed))
