"""Case batches (seed 004): a capped, budgeted initial batch of causal hypotheses for one
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
from hypograph.casework.gateway import CaseGateway
from hypograph.casework.package import CasePackage, CaseStore

__all__ = ["BuildResult", "CaseGateway", "CasePackage", "CaseStore", "HypothesisBuilder", "HypothesisConfig",
           "HypothesisLimits", "HypothesisPolicy", "RetryPolicy", "Status", "due_retries"]
