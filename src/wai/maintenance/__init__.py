"""Leader-elected maintenance: promotion of due jobs and rescue of abandoned attempts."""

from __future__ import annotations

from wai.maintenance._leader import Elector
from wai.maintenance._service import PeriodicService
from wai.maintenance.promoter import Promoter, PromoterResult
from wai.maintenance.rescuer import Rescuer, RescuerResult

__all__ = ["Elector", "PeriodicService", "Promoter", "PromoterResult", "Rescuer", "RescuerResult"]
