"""Which keys each partition set holds, so every job offers what it can run and nothing else.

* ``offered_round``: a registered library's next round (its interrupted one, else a new one), the
  key its ``library_round`` runs next and its ``library_rescore`` re-scores once generated. It is
  offered only where a round could run: a model is configured (with none, no round can run, and
  the jobs' descriptions say so; ``assets.partitions``). ``assets.partitions.new_keys`` adds it when a library is
  registered; the ``partition_keys`` sensor adds it again after each round.
* ``stray_keys``: keys a person typed in the UI's "Add a partition" (or left by an input since
  removed from the registry) that name no registered input of the set's kind, a malformed key, or
  a round or revision past the next one. The ``partition_keys`` sensor removes each, logging one
  line saying why; a key whose input's folder is only missing for now is kept.

Evaluating the sensor writes nothing: Dagster applies the add and delete requests it returns.
"""

from __future__ import annotations

from dagster import DefaultSensorStatus, SensorEvaluationContext, SensorResult, SkipReason, sensor

from assets.groups import described
from assets.partitions import HYPOTHESIS_INPUTS, LIBRARIES, REVISIONS, ROUNDS, VAULTS, offered_round
from hypograph.errors import HypographError
from hypograph.ids import key_number, numbered_key
from hypograph.inputs import InputRecord, split_sub_key
from hypograph.scans import BAD_INPUT, skip_line
from resources import Inputs

KIND_OF_SET = {
    HYPOTHESIS_INPUTS: ("run-dir", "vault", "library"),
    VAULTS: ("vault",),
    LIBRARIES: ("library",),
    ROUNDS: ("library",),
    REVISIONS: ("case",),
}
ADD = "`hypograph add FOLDER` (or the inputs_discovered sensor)"


def stray_keys(name: str, keys: list[str], records: dict[str, InputRecord], log) -> dict[str, str]:
    """Each key of partition set ``name`` that should not be there -> why (one line). A key whose
    input cannot be read now is kept, ``log`` saying why."""
    out = {}
    for key in keys:
        try:
            why = _why_stray(name, key, records)
        except (HypographError, *BAD_INPUT) as e:
            log(skip_line(key, e))
            continue
        if why:
            out[key] = why
    return out


def _why_stray(name: str, key: str, records: dict[str, InputRecord]) -> str | None:
    sub = name in (ROUNDS, REVISIONS)
    if sub:
        try:
            input_id, part = split_sub_key(key)
        except HypographError:
            return f"not of the form <{KIND_OF_SET[name][0]} id>/r0001"
    else:
        input_id, part = key, None
    record = records.get(input_id)
    if record is None or record.kind not in KIND_OF_SET[name]:
        kinds = " or ".join(KIND_OF_SET[name])
        return f"{input_id!r} is no registered {kinds}: register its folder with {ADD}"
    if part is None or not record.path.is_dir():
        return None
    last = _last_sub(record)
    number = _number(part)
    if number is None or number > last:
        what = "round" if name == ROUNDS else "revision"
        return f"{part!r} is no {what} {input_id} has or runs next (its next: {numbered_key(last)})"
    return None


def _last_sub(record: InputRecord) -> int:
    """The highest round (a library: its next one) or revision (a case: its current) there is."""
    if record.kind == "case":
        from hypograph.case.package import CasePackage

        return CasePackage(record.path).manifest()["analysis_revision"]
    from hypograph.library.run import round_to_run

    return key_number(round_to_run(record.path))


def _number(part: str) -> int | None:
    try:
        return key_number(part)
    except HypographError:
        return None


@described(sensor, minimum_interval_seconds=30, default_status=DefaultSensorStatus.RUNNING)
def partition_keys(context: SensorEvaluationContext, inputs: Inputs):
    """Keeps every partition set to what its jobs can run: adds each registered library's next
    round (when a model is configured: with none, no round can run), and removes each key that
    names no registered input (a key typed in "Add a partition", a malformed one, a round or
    revision past the next), logging one line per key saying why. Never removes the key of an
    input whose folder is only missing for now."""
    from assets.partitions import case_revisions, hypothesis_inputs, libraries, library_rounds, vaults

    sets = {
        HYPOTHESIS_INPUTS: hypothesis_inputs,
        VAULTS: vaults,
        LIBRARIES: libraries,
        ROUNDS: library_rounds,
        REVISIONS: case_revisions,
    }
    # the keys first, then the registry: a key added meanwhile was registered before it was added
    keys = {name: list(context.instance.get_dynamic_partitions(name)) for name in sets}
    registry = inputs.registry()
    records = {r.id: r for r in registry.records()}
    requests = []
    for name, defn in sets.items():
        stray = stray_keys(name, keys[name], records, context.log.warning)
        for key, why in stray.items():
            context.log.warning(f"{name}: {key}: removed: {why}")
        if stray:
            requests.append(defn.build_delete_request(sorted(stray)))
    offered = []
    for r in records.values():
        try:
            key = offered_round(r) if r.path.is_dir() else None
        except (HypographError, *BAD_INPUT) as e:
            context.log.warning(skip_line(f"{r.id}: {r.path}", e))
            continue
        if key is not None and key not in keys[ROUNDS]:
            context.log.info(f"{ROUNDS}: {key}: added: the round {r.id} runs next")
            offered.append(key)
    if offered:
        requests.append(library_rounds.build_add_request(sorted(offered)))
    if not requests:
        return SkipReason("every partition set holds what its jobs can run")
    return SensorResult(dynamic_partitions_requests=requests)
