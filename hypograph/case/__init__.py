"""Case batches (docs/case.md): a capped, budgeted initial batch of causal hypotheses for one
confirmed case, with a pinned policy, an immutable creation registry, atomic publication,
retry/defer/block results and crash replay. Plain Python: no Dagster here.

```python
policy = HypothesisConfig.load("config/analysis.local.toml")
builder = HypothesisBuilder(CaseStore(cases_root), CaseGateway.from_config(policy), policy)
result = await builder.build(case_id, package_id)
```
"""

import importlib

# name -> its module: imported on first use, so reading a case package (``case.package``, which
# every job's definitions load) does not import the builder, the gateway and the model client too
_HOME = {
    "BuildResult": "builder",
    "HypothesisBuilder": "builder",
    "HypothesisConfig": "config",
    "HypothesisLimits": "config",
    "HypothesisPolicy": "config",
    "RetryPolicy": "config",
    "Status": "dispatch",
    "due_retry": "dispatch",
    "CaseGateway": "gateway",
    "NeedsModel": "gateway",
    "DraftReport": "interpret",
    "draft_interpretation": "interpret",
    "case_add": "new_case",
    "case_new": "new_case",
    "CaseBusy": "package",
    "CasePackage": "package",
    "CaseStore": "package",
}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)


__all__ = [
    "BuildResult",
    "CaseBusy",
    "CaseGateway",
    "CasePackage",
    "CaseStore",
    "DraftReport",
    "HypothesisBuilder",
    "HypothesisConfig",
    "HypothesisLimits",
    "HypothesisPolicy",
    "NeedsModel",
    "RetryPolicy",
    "Status",
    "case_add",
    "case_new",
    "draft_interpretation",
    "due_retry",
]
