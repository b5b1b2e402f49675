"""Export files on disk (SPEC P2, P3): one sealed JSON line per memory, written and read in pieces.

Each line is encrypted with the user's data key before it touches the disk, so an export file is
as unreadable after a full purge (key shredded) as the rest of the user's content. File names come
from the export's task id (32 hex digits) only: nothing a caller sends becomes part of a path.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from engram.models.ids import is_memory_id
from engram.models.settings import Settings
from engram.storage.crypto import ContentCipher

SUFFIX = ".jsonl.sealed"
EXPORT_KIND = "export"
"""The write-task kind of an export (its file is named by the task's id)."""


def export_root(settings: Settings) -> Path:
    """The export directory (``privacy.export_dir``; a relative one is under the data dir)."""
    root = settings.privacy.export_dir
    return root if root.is_absolute() else settings.storage.data_dir / root


def export_path(root: Path, task_id: str) -> Path:
    """The file of one export task under ``root``; ValueError for anything but a task id."""
    if not is_memory_id(task_id):
        raise ValueError("an export file is named by its task id (32 lowercase hex digits)")
    path = (root / f"{task_id}{SUFFIX}").resolve()
    if path.parent != root.resolve():
        raise ValueError("export path escapes the export directory")
    return path


class SealedLineWriter:
    """Writes sealed lines to a temporary file and moves it into place when complete."""

    def __init__(self, path: Path, cipher: ContentCipher) -> None:
        self._path = path
        self._partial = path.with_name(path.name + ".partial")
        self._cipher = cipher
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self._partial.open("wb")
        self.lines = 0
        self.bytes = 0

    def write(self, line: str) -> None:
        """Seal one JSON line and append it."""
        sealed = base64.b64encode(self._cipher.encrypt(line)) + b"\n"
        self._handle.write(sealed)
        self.lines += 1
        self.bytes += len(line.encode()) + 1

    def commit(self) -> None:
        """Flush to disk and move the file into place (readers never see half an export)."""
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        self._partial.replace(self._path)

    def abort(self) -> None:
        """Drop the partial file."""
        self._handle.close()
        self._partial.unlink(missing_ok=True)


def read_plain(path: Path, cipher: ContentCipher, offset: int, max_bytes: int) -> tuple[bytes, int | None]:
    """Plain JSON lines from byte ``offset`` of a sealed file, about ``max_bytes`` of them.

    Returns the text and the offset to continue from (None at the end). A line that does not open
    (the key was shredded) ends the file: nothing unreadable is ever returned.
    """
    out: list[bytes] = []
    size = 0
    with path.open("rb") as handle:
        handle.seek(offset)
        while size < max_bytes:
            sealed = handle.readline()
            if not sealed:
                return b"".join(out), None
            try:
                plain = cipher.decrypt(base64.b64decode(sealed.strip(), validate=True))
            except ValueError:
                plain = None
            if plain is None:
                return b"".join(out), None
            line = plain.encode() + b"\n"
            out.append(line)
            size += len(line)
        return b"".join(out), handle.tell()


def remove_exports(root: Path, task_ids: list[str]) -> int:
    """Delete the export files of these tasks; returns how many existed."""
    removed = 0
    for task_id in task_ids:
        path = export_path(root, task_id)
        for candidate in (path, path.with_name(path.name + ".partial")):
            if candidate.exists():
                candidate.unlink()
                removed += 1
    return removed
