"""The sensitive-content policy (P5) applied to what each write path stores: structured requests,
extracted facts, updated content and import lines. The detection itself is ``models.rules.sensitive``."""

from __future__ import annotations

from dataclasses import replace

from engram.actors import statements
from engram.actors.extraction import Fact
from engram.models.api import AddStructuredRequest, Decision
from engram.models.enums import Status
from engram.models.errors import EngramError, ErrorCode
from engram.models.privacy import ExportedMemory
from engram.models.provenance import source_of
from engram.models.rules import poisoning
from engram.models.rules.sensitive import refusal_message, screen, scrub
from engram.models.settings import SensitivePolicy


def screened_content(text: str, policy: SensitivePolicy, app_id: str | None) -> str:
    """The text to store for one app; 40004 when the policy refuses what it holds."""
    result = screen(text, policy.for_app(app_id))
    if result.refused:
        raise EngramError(ErrorCode.SENSITIVE_CONTENT_REFUSED, refusal_message(result.refused))
    return result.text


def screened_request(request: AddStructuredRequest, policy: SensitivePolicy) -> AddStructuredRequest:
    """The request with its content and context redacted; 40004 when either is refused."""
    text = screened_content(request.content, policy, request.app_id)
    context = None if request.context is None else screened_content(request.context, policy, request.app_id)
    if text == request.content and context == request.context:
        return request
    return request.model_copy(update={"content": text, "context": context})


def screened_fact(fact: Fact, policy: SensitivePolicy, app_id: str | None) -> Fact | Decision:
    """The fact redacted (entities taken again from the redacted text), or a SKIPPED decision.

    Its context (the message before) is another message's words: redacted, whatever the policy
    says of refusing, so a secret there neither lands in the store nor costs the fact."""
    modes = policy.for_app(app_id)
    result = screen(fact.text, modes)
    if result.refused:
        return Decision(op="SKIPPED", reason=f"{refusal_message(result.refused)}; not stored")
    context = None if fact.context is None else scrub(fact.context, modes)
    if result.text == fact.text:
        return fact if context == fact.context else replace(fact, context=context)
    return replace(fact, text=result.text, entities=statements.entities(result.text), context=context)


def screened_line(item: ExportedMemory, policy: SensitivePolicy) -> ExportedMemory | None:
    """An import line with content and change log (texts and reasons) redacted (its vector dropped
    so that it is embedded again), or None when the policy refuses its content."""
    modes = policy.for_app(item.app_id)
    result = screen(item.content, modes)
    if result.refused:
        return None
    changes = [
        c.model_copy(
            update={
                "content_before": scrub(c.content_before, modes) if c.content_before else c.content_before,
                "content_after": scrub(c.content_after, modes) if c.content_after else c.content_after,
                # A reason may quote the fact (an LLM's evolution reason): screened like the texts.
                "reason": scrub(c.reason, modes) if c.reason else c.reason,
            }
        )
        for c in item.changes
    ]
    update: dict[str, object] = {"changes": changes}
    if item.context:
        update["context"] = scrub(item.context, modes)
    if result.text != item.content:
        update |= {"content": result.text, "vector": None, "entities": statements.entities(result.text)}
    return item.model_copy(update=update)


def held_line(item: ExportedMemory) -> ExportedMemory:
    """An import line, held for review (QUARANTINED, P5) when it is ACTIVE and reads as an
    instruction to the agent from its source."""
    if item.status is not Status.ACTIVE:
        return item
    if not poisoning.assess(item.content, source_of(item.source_type, item.ownership)).quarantine:
        return item
    return item.model_copy(update={"status": Status.QUARANTINED, "vector": None})
