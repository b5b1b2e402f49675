"""``engram serve``'s supervisor over tests/support/stub_server.py, as a process of its own.

python -m tests.support.supervise_child --data-dir D --port P --mode obedient
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from engram.models.settings import Settings
from engram.serve.supervisor import supervise

STUB = Path(__file__).with_name("stub_server.py")


@dataclass(frozen=True)
class StubCommand:
    mode: str
    data_dir: Path

    def argv(self, parent_fd: int) -> list[str]:
        return [
            sys.executable,
            str(STUB),
            "--parent-fd",
            str(parent_fd),
            "--mode",
            self.mode,
            "--data-dir",
            str(self.data_dir),
        ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", default="obedient")
    args = parser.parse_args()
    settings = Settings(
        storage={"data_dir": args.data_dir},
        serve={"port": args.port, "stop_grace_s": 0, "stop_timeout_s": 9},
        metrics={"export_port": 0},
    )
    return supervise(settings, StubCommand(args.mode, args.data_dir))


if __name__ == "__main__":
    sys.exit(main())
