"""Weir on Spark (docs/SPARK.md)."""
