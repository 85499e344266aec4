"""Leader-elected maintenance: promotion, rescue, cleanup, aging, cron, statistics, records,
depth samples, index rebuilds."""

from __future__ import annotations

from wai.maintenance._leader import Elector, new_instance_id
from wai.maintenance._service import PeriodicService
from wai.maintenance.aging import Aging, AgingResult
from wai.maintenance.analyzer import Analyzer, AnalyzerResult
from wai.maintenance.cleaner import Cleaner, CleanerResult
from wai.maintenance.cron import CronFirer, CronResult
from wai.maintenance.depth import DepthResult, DepthSampler
from wai.maintenance.outbox import OutboxSweeper, SweepResult
from wai.maintenance.promoter import Promoter, PromoterResult
from wai.maintenance.reaper import InstanceReaper, InstanceReaperResult
from wai.maintenance.reindexer import Reindexer, ReindexerResult
from wai.maintenance.rescuer import Rescuer, RescuerResult

__all__ = [
    "Aging",
    "AgingResult",
    "Analyzer",
    "AnalyzerResult",
    "Cleaner",
    "CleanerResult",
    "CronFirer",
    "CronResult",
    "DepthResult",
    "DepthSampler",
    "Elector",
    "InstanceReaper",
    "InstanceReaperResult",
    "OutboxSweeper",
    "PeriodicService",
    "Promoter",
    "PromoterResult",
    "Reindexer",
    "ReindexerResult",
    "Rescuer",
    "RescuerResult",
    "SweepResult",
    "new_instance_id",
]
