"""``hypograph library``: seed 001's rounds, each run as its Dagster partition (``input|rNNNN``) on the
shared instance, then ``hypothesis_library`` materialized, so the UI shows every round's lineage."""

from __future__ import annotations

from pathlib import Path

from assets.partitions import ROUNDS, round_partition
from hypograph.errors import HypographError
from hypograph.library.rounds import RoundSettings
from hypograph.library.run import round_survivors
from pipelines.instance import failures, open_instance, register, run_config


def dagster_round_runner(args):
    """The ``round_runner`` for ``run_library``: round ``key`` of ``args.dir`` through the
    ``library_round`` job (registering the input and the round), then the library asset."""
    root = Path(args.dir).resolve()
    offline = True if args.llm == "offline" else None

    def run(key: str, settings: RoundSettings) -> int:
        from pipelines.definitions import defs

        library = {**settings.model_dump(exclude={"neighbours", "auto_drop"}), "search_url": args.search_url}
        config = run_config(offline=offline)
        config["resources"]["library"] = {"config": {k: v for k, v in library.items() if v is not None}}
        with open_instance() as instance:
            input_key = register(instance, root)
            if not instance.has_dynamic_partition(ROUNDS, key):
                instance.add_dynamic_partitions(ROUNDS, [key])
            result = defs.resolve_job_def("library_round").execute_in_process(
                instance=instance, partition_key=round_partition(input_key, key), raise_on_error=False,
                run_config=config)
            if not result.success:
                raise HypographError(f"round {key} failed: " + "; ".join(failures(result)))
            defs.resolve_job_def("library").execute_in_process(
                instance=instance, partition_key=input_key, raise_on_error=False, run_config=run_config())
        return round_survivors(root, key)

    return run
