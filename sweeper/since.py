"""`--since` for operator commands: an ISO date or datetime, or a duration back from now (90m, 36h, 7d, 2w)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

_DURATION = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(raw: str, *, now: datetime | None = None) -> datetime:
    """The moment `raw` names; ValueError with the accepted forms when it names none."""
    text = raw.strip()
    duration = _DURATION.match(text)
    if duration:
        return (now or timezone.now()) - timedelta(**{_UNITS[duration[2]]: int(duration[1])})
    value = parse_datetime(text)
    if value is None:
        day = parse_date(text)
        if day is None:
            raise ValueError(f"--since: not a date, datetime or duration (90m, 36h, 7d, 2w): {raw!r}")
        value = datetime(day.year, day.month, day.day)
    return value if timezone.is_aware(value) else timezone.make_aware(value, timezone.get_current_timezone())
