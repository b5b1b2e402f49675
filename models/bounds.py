"""Ranges of the values the stores take (C1): a value outside them is a bad parameter (40001).

Datetimes must carry a timezone and lie within ``EARLIEST``..``LATEST``: a year near 1 or 9999
overflows on the first arithmetic (``expire + delta``, a conversion to UTC), so a margin of a
thousand years is kept on both sides. Integers fit the narrowest column that stores them:
PostgreSQL ``integer`` is 32-bit, SQLite's and ``bigint`` 64-bit.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, Field, StringConstraints
from pydantic_core import PydanticCustomError

EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
"""Datetimes accepted: ``EARLIEST <= value < LATEST``."""

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def check_instant(value: datetime) -> datetime:
    """``value`` when it is aware and within range; a pydantic error naming the range otherwise."""
    if value.utcoffset() is None:
        raise PydanticCustomError("timezone_aware", "Input should have timezone info")
    # Compared as they are: converting a year-1 value with a positive offset to UTC overflows.
    if not EARLIEST <= value < LATEST:
        raise PydanticCustomError(
            "datetime_range",
            "Input should lie between {earliest} and {latest}",
            {"earliest": EARLIEST.isoformat(), "latest": LATEST.isoformat()},
        )
    return value


def in_range(value: datetime) -> bool:
    """True when ``value`` is an ``Instant`` (aware and within range)."""
    return value.utcoffset() is not None and EARLIEST <= value < LATEST


def _check_int64_text(value: str) -> str:
    if int(value) > INT64_MAX:
        raise PydanticCustomError("int_range", "Input should be at most {most}", {"most": INT64_MAX})
    return value


Instant = Annotated[AwareDatetime, AfterValidator(check_instant)]
"""A timezone-aware datetime between ``EARLIEST`` and ``LATEST``."""

Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
"""A count stored in a 32-bit ``integer`` column."""

Int64Text = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,19}$"), AfterValidator(_check_int64_text)]
"""A non-negative 64-bit integer written in decimal (the change log's cursor)."""

UnitFloat = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
"""A finite float in [0, 1] (weights, confidence)."""
