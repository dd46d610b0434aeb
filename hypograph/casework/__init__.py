"""Case batches (docs/case.md): a capped, budgeted initial batch of causal hypotheses for one
confirmed case, with a pinned policy, an immutable creation registry, atomic publication,
retry/defer/block results and crash replay. Plain Python: no Dagster here.

```python
policy = HypothesisConfig.load("config/analysis.local.toml")
builder = HypothesisBuilder(CaseStore(cases_root), CaseGateway.from_config(policy), policy)
result = await builder.build(case_id, package_id)
```
"""

from hypograph.casework.builder import BuildResult, HypothesisBuilder
from hypograph.casework.config import HypothesisConfig, HypothesisLimits, HypothesisPolicy, RetryPolicy
from hypograph.casework.dispatch import Status, due_retries
from hypograph.casework.gateway import CaseGateway, NeedsModel
from hypograph.casework.interpret import DraftReport, draft_interpretation
from hypograph.casework.new_case import case_add, case_new
from hypograph.casework.package import CaseBusy, CasePackage, CaseStore

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
    "due_retries",
]
