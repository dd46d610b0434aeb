"""Case step settings as run config; declared once, in ``hypograph/case/settings.py``."""

from hypograph.case.settings import CaseSettings
from resources.settings import settings_resource

CaseResource = settings_resource(
    CaseSettings, "Where the analysis policy comes from, the attempt id, and the vault a batch flows into."
)
