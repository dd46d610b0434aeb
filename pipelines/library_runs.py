"""``hypograph library``: each round run as its Dagster partition (``<library id>/rNNNN``) of the
``library_round`` job on the shared instance, so the UI shows every round's lineage."""

from __future__ import annotations

from pathlib import Path

from hypograph.library.rounds import RoundSettings
from hypograph.library.run import round_survivors
from pipelines.instance import run_job


def dagster_round_runner(args):
    """The ``round_runner`` for ``run_library``: round ``key`` of ``args.dir`` through the
    ``library_round`` job (registering the library and the round)."""
    root = Path(args.dir).resolve()
    offline = True if args.llm == "offline" else None

    def run(key: str, settings: RoundSettings) -> int:
        library = {
            **settings.model_dump(exclude={"neighbours"}),
            "invocation": settings.invocation,
            "search_url": args.search_url,
            "openalex_url": getattr(args, "openalex_url", None),
        }
        run_job(root, "library_round", {"library": library}, offline, sub=key, kind="library")
        return round_survivors(root, key)

    return run
