"""Hypograph's domain core: plain Python, no Dagster import anywhere in this package."""

__version__ = "0.1.0"
