"""Args whose fields use every type the args codec carries, with postponed annotations.

``from __future__ import annotations`` leaves every hint a string here: decoding must
resolve them against this module.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Literal, Optional


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mode(enum.StrEnum):
    FAST = "fast"
    SAFE = "safe"


@dataclass(frozen=True)
class Profile:
    created: datetime
    birthday: date | None = None


@dataclass(frozen=True)
class Rich:
    user_id: int
    at: datetime
    naive: datetime
    day: date
    clock: time
    token: uuid.UUID
    amount: Decimal
    color: Color
    level: Level
    mode: Mode
    profile: Profile
    history: list[Profile]
    pair: tuple[int, str]
    scores: tuple[float, ...]
    by_name: dict[str, Profile]
    note: Optional[str]  # noqa: UP045 - Optional is one of the cases
    parent: int | None
    plan: Literal["free", "pro"]
    tags: list[str] = field(default_factory=list[str])


def sample() -> Rich:
    """A Rich with every field set to a value that JSON alone would not bring back."""
    paris = timezone(timedelta(hours=2))
    return Rich(
        user_id=7,
        at=datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=paris),
        naive=datetime(2024, 5, 1, 12, 30),
        day=date(2024, 2, 29),
        clock=time(23, 59, 58, 5),
        token=uuid.UUID("12345678-1234-5678-1234-567812345678"),
        amount=Decimal("12345678901234567890.000000001"),
        color=Color.BLUE,
        level=Level.HIGH,
        mode=Mode.SAFE,
        profile=Profile(created=datetime(2020, 1, 1, tzinfo=UTC), birthday=date(1990, 7, 4)),
        history=[Profile(created=datetime(2021, 3, 4, 5, 6, tzinfo=UTC))],
        pair=(3, "x"),
        scores=(0.5, 1.25),
        by_name={"home": Profile(created=datetime(2022, 1, 1))},
        note=None,
        parent=None,
        plan="pro",
        tags=["a", "b"],
    )
