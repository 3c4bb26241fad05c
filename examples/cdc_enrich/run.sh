#!/bin/sh
# Run the CDC enrichment example end to end (see run_example.py); extra arguments are passed on.
# Uses $PYTHON, else the repository's .venv, else python3.
cd "$(dirname "$0")/../.." || exit 1
if [ -z "$PYTHON" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
exec "$PYTHON" examples/cdc_enrich/run_example.py "$@"
