"""Choice sets named in the OpenAPI schema (SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]):
several models have fields called kind, status or tool with different choices."""

from experiments.models import ChangePoint, Run
from experiments.models.inventory import DriveKind, NicKind, TargetKind
from experiments.models.runs import Tool
from runners.tools import ADAPTERS

DRIVE_KIND = DriveKind.choices
NIC_KIND = NicKind.choices
TARGET_KIND = TargetKind.choices
RUN_STATUS = Run.Status.choices
INGEST_STATUS = ["imported", "succeeded", "failed"]
INGEST_RESULT = ["created", "existing", "invalid"]
TOOL = Tool.choices
MATRIX_TOOL = sorted(ADAPTERS)
SHARE_LINK_STATE = ["active", "expired", "revoked"]
CHANGE_STATE = ChangePoint.State.choices
