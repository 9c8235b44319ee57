"""Argument values for probe requests: from schemas, from names, and harvested from answers."""
