"""The event stream of one watch request (see `ClusterClient.watch`)."""

from __future__ import annotations

import contextlib
import json
import socket

import urllib3

from .kube import KubeError


class WatchStream:
    """The events of one watch response, one JSON object a line."""

    def __init__(self, response):
        self._response = response
        self._ended = False

    def __iter__(self):
        buffer = b""
        try:
            for chunk in self._response.stream(65536):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield self._event(line)
            self._ended = True
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise KubeError(0, "Unreachable", f"the watch broke off: {exc}") from exc
        finally:
            self.close()

    @staticmethod
    def _event(line: bytes) -> dict:
        event = json.loads(line)
        if event.get("type") == "ERROR":
            status = event.get("object") or {}
            raise KubeError(int(status.get("code") or 500), status.get("reason", ""), status.get("message", ""))
        return event

    def close(self) -> None:
        """End the stream (safe from another thread: the blocked read returns). A stream read to its end gives its
        connection back to the pool; one cut short closes it."""
        response = self._response
        if self._ended:
            response.release_conn()
            return
        sock = getattr(getattr(getattr(response, "_fp", None), "fp", None), "raw", None)
        sock = getattr(sock, "_sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            response.close()
