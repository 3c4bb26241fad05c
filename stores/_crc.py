"""CRC-32C (Castagnoli), the checksum of every framed record Weir writes.

``crc32c`` here is the ``crc32c`` package's C function (hardware-accelerated where the CPU has
SSE 4.2 or ARMv8 CRC). It is loaded from the package's extension module without running the
package's ``__init__``, which imports ``importlib.metadata`` (for ``__version__``) and
``argparse`` (for its command line): ~20 ms of every ``weir run`` start, 6% of the whole
process's start-up (bench/RESULTS.md). Where the extension cannot be found that way (another
layout of the package), the package is imported as usual; the function is the same.

Example::

    >>> crc32c(b"123456789") == 0xE3069283
    True
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable

__all__ = ["crc32c"]

_MODULE = "crc32c._crc32c"


def _load() -> Callable[..., int]:
    loaded = sys.modules.get(_MODULE)
    if loaded is not None:
        return loaded.crc32c
    spec = importlib.util.find_spec("crc32c")  # finds the package without executing it
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_crc32c" + suffix)
            if not os.path.isfile(path):
                continue
            loader = importlib.machinery.ExtensionFileLoader(_MODULE, path)
            ext_spec = importlib.util.spec_from_file_location(_MODULE, path, loader=loader)
            if ext_spec is None:
                continue
            module = importlib.util.module_from_spec(ext_spec)
            loader.exec_module(module)
            # A later ``import crc32c`` finds its extension here instead of loading it again.
            sys.modules[_MODULE] = module
            return module.crc32c
    from crc32c import crc32c as packaged  # noqa: PLC0415 - the usual import, as a fallback

    return packaged


crc32c: Callable[..., int] = _load()
