"""Memory switches (SPEC P1, D4) as pure decisions over a user's switch map.

A switch map holds ``{app_id: enabled}``, "" being the user's global switch; a switch never set is
on. Global off: nothing is stored or recalled (list and delete still work). One app off: that app
neither stores nor recalls, while recall from it still sees the user's global memories.
"""

from __future__ import annotations

from collections.abc import Mapping

from engram.models.api import ProfileRequest, RecallRequest, RecallScope
from engram.models.domain import GLOBAL_APP
from engram.models.errors import EngramError, ErrorCode

Switches = Mapping[str, bool]


def is_on(switches: Switches, app_id: str | None = None) -> bool:
    """True when the global switch is on and, for an app, that app's switch too."""
    if not switches.get(GLOBAL_APP, True):
        return False
    return not app_id or switches.get(app_id, True)


def check_store(switches: Switches, app_id: str | None) -> None:
    """40301 unless a memory of ``app_id`` (None: global) may be stored now."""
    if not is_on(switches, app_id):
        raise EngramError(ErrorCode.MEMORY_SWITCHED_OFF, "memory is switched off for this user or app")


def gate_recall(switches: Switches, request: RecallRequest) -> RecallRequest:
    """The recall the switches allow: unchanged, narrowed to global memories, or 40301 when none is."""
    if not is_on(switches):
        raise EngramError(ErrorCode.MEMORY_SWITCHED_OFF, "memory is switched off for this user")
    app_id = request.scope.app_id
    if app_id is None or is_on(switches, app_id):
        return request
    if not request.scope.include_global:
        raise EngramError(ErrorCode.MEMORY_SWITCHED_OFF, "memory is switched off for this app")
    # The app's (and its sessions') memories are out; the user's global memories stay visible.
    narrowed = RecallScope(include_global=True, cross_app=request.scope.cross_app)
    return request.narrowed_by_switch(narrowed)


def gate_profile(switches: Switches, request: ProfileRequest) -> ProfileRequest:
    """The profile the switches allow, as for recall: 40301 when memory is off, an app switched off
    narrows it to the user's global facts."""
    if not is_on(switches):
        raise EngramError(ErrorCode.MEMORY_SWITCHED_OFF, "memory is switched off for this user")
    if request.app_id is None or is_on(switches, request.app_id):
        return request
    return request.model_copy(update={"app_id": None})
