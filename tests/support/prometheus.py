"""Reading a Prometheus text exposition (Ray's metrics export port) in as few words as tests need."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
_SERIES = re.compile(r"\bray_[a-z_]+")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class Sample:
    """One line of the exposition: a series name, its labels and its value."""

    name: str
    labels: dict[str, str]
    value: float


def parse(text: str) -> list[Sample]:
    """The samples of an exposition (comments and blank lines skipped; label escapes undone)."""
    samples = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if line.startswith("#") or match is None:
            continue
        labels = {
            key: value.replace(r"\"", '"').replace(r"\n", "\n").replace("\\\\", "\\")
            for key, value in _LABEL.findall(match["labels"] or "")
        }
        samples.append(Sample(match["name"], labels, float(match["value"])))
    return samples


def scrape(url: str) -> list[Sample]:
    """The samples the endpoint serves now."""
    with urllib.request.urlopen(url, timeout=10) as response:  # a local test endpoint
        return parse(response.read().decode("utf-8"))


def total(samples: list[Sample], name: str, **labels: str) -> float:
    """Sum of ``name`` over every series whose labels include ``labels`` (series are per process)."""
    wanted = labels.items()
    return sum(s.value for s in samples if s.name == name and wanted <= s.labels.items())


def wait_for(
    url: str, ready: Callable[[list[Sample]], bool], *, deadline_s: float = 60.0, every_s: float = 0.5
) -> list[Sample]:
    """Scrape until ``ready(samples)`` holds (Ray exports every few seconds); fail past the deadline."""
    end = time.monotonic() + deadline_s
    samples: list[Sample] = []
    while time.monotonic() < end:
        try:
            samples = scrape(url)
        except OSError:  # the exporter may not listen yet right after start
            samples = []
        if ready(samples):
            return samples
        time.sleep(every_s)
    names = sorted({s.name for s in samples if s.name.startswith("ray_engram_")})
    raise AssertionError(f"metrics at {url} not as expected after {deadline_s} s; engram series: {names}")


def settled(
    url: str,
    read: Callable[[list[Sample]], object],
    *,
    quiet_s: float,
    deadline_s: float = 90.0,
    every_s: float = 0.5,
) -> list[Sample]:
    """Scrape until ``read(samples)`` has stayed the same for ``quiet_s`` (longer than Ray's report
    interval: what earlier work recorded has all been exported); fail past the deadline."""
    end = time.monotonic() + deadline_s
    samples = scrape(url)
    last, since = read(samples), time.monotonic()
    while time.monotonic() < end:
        time.sleep(every_s)
        samples = scrape(url)
        value = read(samples)
        if value != last:
            last, since = value, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return samples
    raise AssertionError(f"metrics at {url} still moving after {deadline_s} s")


def dashboard_series(dashboard: dict[str, Any]) -> set[str]:
    """Every series name (``ray_...``) the panels' PromQL expressions read."""
    names: set[str] = set()
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            names.update(_SERIES.findall(target["expr"]))
    return names
