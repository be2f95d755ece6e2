"""A TCP forwarder on loopback that a test can cut and mend: one replica's network partition
from a real Redis that the other replicas keep reaching."""

from __future__ import annotations

import contextlib
import socket
import threading


class Cuttable:
    """Forwards every connection to `target`; `cut()` drops them all and refuses new ones
    (connections are reset, as a broken network does), `mend()` lets them through again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open = True
        #: Connections accepted, cut or not: how often a client tried this address.
        self.accepted = 0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def cut(self) -> None:
        with self._lock:
            self._open = False
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._sockets.clear()

    def mend(self) -> None:
        with self._lock:
            self._open = True

    def close(self) -> None:
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                if not self._open:
                    client.close()
                    continue
                try:
                    upstream = socket.create_connection(self._target)
                except OSError:
                    client.close()
                    continue
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    for sock in (source, sink):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
