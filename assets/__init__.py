"""The Dagster layer's software-defined assets, one package per product (``assets/<product>/``:
its assets, checks, jobs, sensors and its ``Definitions``), over what they share (partitions,
the input sources, metadata tables, errors). Each asset is a thin wrapper over ``hypograph``."""

import warnings

from dagster import PreviewWarning

# Checks of partitioned assets take the asset's partitions (Dagster 1.13 calls it preview).
warnings.filterwarnings("ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=PreviewWarning)
