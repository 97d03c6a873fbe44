"""A progress line that works in a terminal and in a notebook: tqdm when it is installed, else one `\r` line."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, description: str, stream=None):
        self.stream = stream or sys.stderr
        self.bar = None
        try:
            from tqdm.auto import tqdm  # notebook widget or terminal bar, whichever fits
        except ImportError:
            tqdm = None
        if tqdm is not None and stream is None:
            self.bar = tqdm(total=None, desc=description, bar_format="{desc}: {postfix} [{elapsed}]")
        self.description = description
        self.last = ""

    def update(self, status: str) -> None:
        if status == self.last:
            return
        self.last = status
        if self.bar is not None:
            self.bar.set_postfix_str(status)
            return
        # Pad so a shorter status fully covers a longer one on the same line.
        self.stream.write(f"\r{self.description}: {status}".ljust(79))
        self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            self.stream.write("\n")
            self.stream.flush()
