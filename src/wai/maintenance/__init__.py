"""Leader-elected maintenance: promotion of due jobs (and, later, rescue and cleanup)."""

from __future__ import annotations

from wai.maintenance._leader import Elector
from wai.maintenance._service import PeriodicService
from wai.maintenance.promoter import Promoter, PromoterResult

__all__ = ["Elector", "PeriodicService", "Promoter", "PromoterResult"]
