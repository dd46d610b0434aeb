"""``hypograph structure``'s flow: proximity on the vault, step 4, then proximity again if step 4
rewrote the vault's hypotheses (so proximity/ describes the structured vault), each a run of its
job on the vault's partition, as ``assets/structure/next_job.py`` plans them (the same planner the
``hypotheses_changed`` sensor follows)."""

from __future__ import annotations

from pathlib import Path

from hypograph.errors import HypographError


def run_structure(root: Path, proximity, offline: bool | None = None, instance=None, on_run=None) -> list:
    """Proximity, step 4, and proximity again if step 4 rewrote the vault, as the planner plans
    them (a job whose settings differ from its last run's runs at least once); the results, in
    order: none when the vault's results are current. Stops at a failed run (its result is the
    last). ``on_run(job, result, why)`` is called after each run (``why``: the reason it ran)."""
    from pipelines.instance import open_instance, register

    if instance is None:
        with open_instance() as shared:
            return run_structure(root, proximity, offline, shared, on_run)
    from assets.structure.next_job import FLOW, next_step, settings_changed
    from hypograph.inputs import fingerprint
    from pipelines.launch import execute, run_config

    record = register(instance, root)
    if record.kind != "vault":
        raise HypographError(f"{root}: not a vault (structure needs step-3 nodes in hypotheses/*.md)")
    settings = {"proximity": proximity}
    rerun = settings_changed(instance, record.id, run_config(settings, offline)["resources"])
    results = []
    while len(results) <= len(FLOW) + 1:  # proximity, step 4, proximity: never more
        step = next_step(instance, record, fingerprint(record.path, record.kind), rerun)
        if step is None:
            break
        job, why = step
        result = execute(root, job, settings, offline, instance=instance)
        results.append(result)
        rerun.pop(job, None)
        if on_run is not None:
            on_run(job, result, why)
        if not result.success:
            break
    return results
