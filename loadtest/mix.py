"""The request mix of ``engram loadtest``: which routes, in what proportions (#11).

Written as ``recall=18,add=1,add_structured=1`` (the default: an agent that recalls far more often
than it writes). ``/healthz``, the trivial route, always runs beside the mix with weight 1, so that
every run measures its routes against the Serve floor of the same moment.
"""

from __future__ import annotations

from collections.abc import Mapping

ROUTES = ("recall", "add", "add_structured", "batch_add_structured")
DEFAULT_MIX = "recall=18,add=1,add_structured=1"
HEALTHZ_WEIGHT = 1


def parse_mix(text: str) -> dict[str, int]:
    """``route=weight`` pairs, comma separated; ValueError naming what is wrong."""
    mix: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        route, sep, weight = part.partition("=")
        if not sep or route not in ROUTES:
            raise ValueError(f"mix entries are route=weight with a route among {', '.join(ROUTES)}: {part!r}")
        if not weight.isdigit():
            raise ValueError(f"the weight of {route} must be a whole number: {weight!r}")
        mix[route] = mix.get(route, 0) + int(weight)
    mix = {route: weight for route, weight in mix.items() if weight > 0}
    if not mix:
        raise ValueError("the mix needs at least one route with a positive weight")
    return mix


def format_mix(mix: Mapping[str, int]) -> str:
    """The inverse of ``parse_mix`` (how the mix travels to the locust process)."""
    return ",".join(f"{route}={weight}" for route, weight in mix.items())


def total_rate(mix: Mapping[str, int], rate: float) -> float:
    """Requests per second to offer in all, ``/healthz`` included, for ``rate``: the offered recall
    rate when the mix recalls, else the offered rate of its writes."""
    total = sum(mix.values()) + HEALTHZ_WEIGHT
    anchor = mix.get("recall") or sum(mix.values())
    return rate * total / anchor
