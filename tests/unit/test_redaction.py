"""Secrets never printed (issue #27, P3): ``engram config`` and a refused config name no secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import SecretStr

from engram.models.redaction import REDACTED, redact_url, redacted
from engram.models.settings import Settings, SettingsError, load_settings
from engram.serve.cli import main

pytestmark = pytest.mark.unit

# Each configured secret, distinct enough that finding any part of it in the output is a leak.
API_KEY = "api-key-of-ops-5f1c2e9a7b3d"
APP_KEY = "api-key-of-shop-8e4d1a0c6f2b"
ENGINE_KEY = "sk-engine-3c9e7a1f5d2b8e6a"
EMBEDDER_KEY = "sk-embedder-7a2e4c6b9d1f3e5a"
MILVUS_TOKEN = "root:milvus-token-4b8d2f6a1c"
DB_PASSWORD = "db-pass-9f3b7d1e5a2c"
KEYS_PASSWORD = "keys-pass-2d6f0b4e8a1c"
MILVUS_PASSWORD = "milvus-pass-6e0a4c8b2d7f"
S3_SIGNATURE = "s3sig0a1b2c3d4e5f6a7b8c9d"
URL_TOKEN = "url-token-1a3c5e7b9d2f4a"
ENV_ENGINE_KEY = "sk-from-the-environment-5b7d9f1a"
SECRETS = [
    API_KEY,
    APP_KEY,
    ENGINE_KEY,
    EMBEDDER_KEY,
    MILVUS_TOKEN,
    DB_PASSWORD,
    KEYS_PASSWORD,
    MILVUS_PASSWORD,
    S3_SIGNATURE,
    URL_TOKEN,
]


def config_file(tmp_path: Path) -> Path:
    config = {
        "auth": {
            "api_keys": [
                {"name": "ops", "key": API_KEY, "admin": True},
                {"name": "shop", "key": APP_KEY, "app_ids": ["shop"]},
            ]
        },
        "engine": {
            "name": "openai",
            "base_url": "http://llm.internal/v1",
            "model": "m",
            "api_key": ENGINE_KEY,
        },
        "embedder": {
            "provider": "openai",
            "base_url": f"https://embed.internal/v1?api_key={URL_TOKEN}&model=e5",
            "model": "e5",
            "api_key": EMBEDDER_KEY,
        },
        "storage": {
            "data_dir": str(tmp_path / "data"),
            "database_url": f"postgresql+asyncpg://engram:{DB_PASSWORD}@db.internal:5432/engram",
            "key_database_url": f"postgresql+asyncpg://keys:{KEYS_PASSWORD}@keys.internal/keys",
            "milvus_uri": f"http://root:{MILVUS_PASSWORD}@milvus.internal:19530",
            "milvus_token": MILVUS_TOKEN,
        },
        "lifecycle": {"archive": {"s3_endpoint_url": f"https://s3.internal/?X-Amz-Signature={S3_SIGNATURE}"}},
    }
    path = tmp_path / "engram.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_engram_config_prints_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_file(tmp_path)
    assert main(["--config", str(config), "config"]) == 0
    out = capsys.readouterr().out
    for secret in SECRETS:
        assert secret not in out, secret
    printed = json.loads(out)
    # What is not secret is still shown, so that the output stays useful.
    storage = printed["storage"]
    assert storage["database_url"] == f"postgresql+asyncpg://engram:{REDACTED}@db.internal:5432/engram"
    assert storage["milvus_uri"] == f"http://root:{REDACTED}@milvus.internal:19530"
    assert storage["milvus_token"] == REDACTED
    assert printed["engine"]["api_key"] == REDACTED
    assert printed["engine"]["base_url"] == "http://llm.internal/v1"
    assert printed["embedder"]["base_url"] == f"https://embed.internal/v1?api_key={REDACTED}&model=e5"
    assert [k["name"] for k in printed["auth"]["api_keys"]] == ["ops", "shop"]
    assert {k["key"] for k in printed["auth"]["api_keys"]} == {REDACTED}
    # A secret from the environment, too.
    monkeypatch.setenv("ENGRAM_ENGINE__API_KEY", ENV_ENGINE_KEY)
    assert main(["--config", str(config), "config"]) == 0
    assert ENV_ENGINE_KEY not in capsys.readouterr().out


def test_a_refused_config_names_fields_not_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    short_key = "short-key-3a9"  # under 16 characters: refused, yet still a secret
    config = tmp_path / "bad.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "auth": {"api_keys": [{"name": "ops", "key": short_key}]},
                "storage": {"milvus_token": 12345, "database_url": [f"postgresql://u:{DB_PASSWORD}@h/db"]},
            }
        )
    )
    assert main(["--config", str(config), "config"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    for secret in (short_key, DB_PASSWORD, "12345"):
        assert secret not in captured.err
    assert "auth.api_keys.0.key" in captured.err and "storage.database_url" in captured.err
    with pytest.raises(SettingsError) as refused:
        load_settings(config)
    assert short_key not in str(refused.value) and refused.value.__cause__ is None


def test_secret_settings_are_secret_types() -> None:
    settings = Settings(engine={"api_key": ENGINE_KEY}, storage={"milvus_token": MILVUS_TOKEN})
    assert isinstance(settings.engine.api_key, SecretStr) and isinstance(
        settings.storage.milvus_token, SecretStr
    )
    assert ENGINE_KEY not in repr(settings) and MILVUS_TOKEN not in repr(settings)
    assert settings.engine.api_key.get_secret_value() == ENGINE_KEY


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+asyncpg://u:p4ss@h:5432/db", f"postgresql+asyncpg://u:{REDACTED}@h:5432/db"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("sqlite+aiosqlite:////var/lib/engram/engram.db", "sqlite+aiosqlite:////var/lib/engram/engram.db"),
        ("http://h/x?token=t0k&a=1", f"http://h/x?token={REDACTED}&a=1"),
        (
            "https://h/?X-Amz-Credential=c&X-Amz-Signature=s",
            f"https://h/?X-Amz-Credential={REDACTED}&X-Amz-Signature={REDACTED}",
        ),
        ("http://u:p%40ss@h:1/?a=1&b=2", f"http://u:{REDACTED}@h:1/?a=1&b=2"),
        ("postgresql://u:pa/ss?@h/db", f"postgresql://u:{REDACTED}@h/db"),
    ],
)
def test_urls_lose_their_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_secret_names_are_masked_wherever_they_nest() -> None:
    dump = {"a": {"api_key": "k", "password": "p", "client_secret": "s", "token": "", "max_tokens": 8}}
    assert redacted(dump) == {
        "a": {
            "api_key": REDACTED,
            "password": REDACTED,
            "client_secret": REDACTED,
            "token": "",
            "max_tokens": 8,
        }
    }
    assert redacted({"master_key_env": "ENGRAM_MASTER_KEY"}) == {"master_key_env": "ENGRAM_MASTER_KEY"}
