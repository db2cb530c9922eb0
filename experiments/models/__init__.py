"""Models of the experiments domain, one module per area."""

from experiments.models.alerts import (
    Alert,
    Delivery,
    MatrixSchedule,
    ScheduleFiring,
    Subscription,
)
from experiments.models.beegfs import BeegfsConfigChange
from experiments.models.changes import ChangePoint, ChangeScan
from experiments.models.common import OwnedModel, PublishedModel
from experiments.models.inventory import (
    Architecture,
    Drive,
    HardwareProfile,
    MirrorGroup,
    Nic,
    Node,
    StoragePool,
    Target,
    Testbed,
    TestbedNode,
)
from experiments.models.matrices import CellState, LaunchMode, Matrix, RunOrder
from experiments.models.noderequests import NodeRequest
from experiments.models.params import RunParam
from experiments.models.reports import Report, ShareLink
from experiments.models.runs import Metric, NodeLease, Run
from experiments.models.summaries import ConfigSummary
from experiments.models.telemetry import RunTelemetry
from experiments.models.tuning import TuningParameter, TuningRevision, TuningSet
from experiments.models.workers import Worker

__all__ = [
    "Alert",
    "Delivery",
    "MatrixSchedule",
    "ScheduleFiring",
    "Subscription",
    "Architecture",
    "BeegfsConfigChange",
    "CellState",
    "ChangePoint",
    "ChangeScan",
    "ConfigSummary",
    "Drive",
    "HardwareProfile",
    "LaunchMode",
    "Matrix",
    "MirrorGroup",
    "Metric",
    "Nic",
    "Node",
    "NodeLease",
    "NodeRequest",
    "OwnedModel",
    "PublishedModel",
    "Report",
    "Run",
    "RunOrder",
    "RunParam",
    "RunTelemetry",
    "ShareLink",
    "StoragePool",
    "Target",
    "Testbed",
    "TestbedNode",
    "TuningParameter",
    "TuningRevision",
    "TuningSet",
    "Worker",
]
