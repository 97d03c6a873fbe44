"""A state file so a standalone sandbox keeps its objects across restarts."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from pathlib import Path

from .store import Store


class StateFile:
    """Loads the store at start, saves it (debounced) after changes and at stop, atomically (temp file + rename)."""

    def __init__(self, store: Store, path: str | os.PathLike, debounce: float = 0.5):
        self.store = store
        self.path = Path(path)
        self.debounce = debounce
        self._dirty = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe = None

    def load(self) -> int:
        """Objects loaded (0 when the file does not exist yet)."""
        if not self.path.exists():
            return 0
        return self.store.restore(json.loads(self.path.read_text()))

    def start(self) -> None:
        self._unsubscribe = self.store.subscribe(lambda *_: self._dirty.set())
        self._thread = threading.Thread(target=self._run, name="sandbox-state", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            if self._dirty.wait(0.5) and not self._stopping.wait(self.debounce):
                self._dirty.clear()
                self.save()

    def save(self) -> None:
        data = json.dumps(self.store.snapshot(), separators=(",", ":"))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(data)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.save()
