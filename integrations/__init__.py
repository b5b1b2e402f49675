"""Engram inside agent frameworks (#29): memory as tools for pydantic-ai and the OpenAI Agents SDK.

Needs the ``integrations`` extra (``pip install 'engram[integrations]'``); the base install pulls
none of the frameworks. Each adapter wraps ``memory_tools.MemoryTools``, one user's four tools.
"""
