"""The Dagster layer's software-defined assets, one package per product (``assets/<product>/``:
its assets, checks, jobs, sensors and its ``Definitions``), over what they share (partitions,
observing and registering inputs, a check's result, errors). Each asset is a thin wrapper over ``hypograph``."""

import warnings

from dagster import BetaWarning, PreviewWarning

# Checks of partitioned assets take the asset's partitions (Dagster 1.13 calls it preview).
warnings.filterwarnings("ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=PreviewWarning)
# Dagster re-creates each sensor with its owners when it binds resources to the sensor's job
# (1.13 calls that parameter beta), whether or not a sensor names owners.
warnings.filterwarnings("ignore", message="Parameter `owners` of initializer `SensorDefinition", category=BetaWarning)
# Observable source assets are "beta" in Dagster 1.13; they are what a partitioned external input is
# (``assets/proximity/source.py``, ``assets/case/source.py``).
warnings.filterwarnings("ignore", message="Function `observable_source_asset`", category=BetaWarning)
