"""Weir on Spark for pipeline authors: ``from weir.spark import StateOperator, transform_with_state``.

See docs/SPARK.md; the code lives in :mod:`weir.engine.spark`.
"""

from weir.engine.spark import *  # noqa: F401,F403
from weir.engine.spark import __all__ as _engine_all
from weir.engine.spark import __getattr__  # noqa: F401  (lazy names)

__all__ = list(_engine_all)
