"""Offline evaluation harnesses (LoCoMo evidence retrieval) run by ``engram eval``."""
