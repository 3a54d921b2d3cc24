"""What the pyverbs peers of tests/interop share (rkey_error_peer.py,
atomic_peer.py): the TCP exchange of QP numbers and keys, moving an RC QP to
RTS, polling a CQ without spinning, and the ok/FAIL lines. Imported from the
peer's own folder (interop_test stages both files side by side for the
guests); runs inside a soft-RoCE guest with Debian's python3-pyverbs.
"""

import argparse
import json
import socket
import time

import pyverbs.enums as e
from pyverbs.addr import GID, AHAttr, GlobalRoute
from pyverbs.qp import QPAttr


class Channel:
    """JSON lines over TCP."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.rfile = sock.makefile("r")

    def send(self, obj) -> None:
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def recv(self):
        line = self.rfile.readline()
        if not line:
            raise SystemExit("peer closed the connection")
        return json.loads(line)


def accept(port: int, timeout_s: float = 180) -> Channel:
    lsock = socket.create_server(("", port), family=socket.AF_INET, reuse_port=True)
    lsock.settimeout(timeout_s)
    sock, _ = lsock.accept()
    return Channel(sock)


def connect(server: str, port: int, patience_s: float = 120) -> Channel:
    """Connects, retrying while the server is not listening yet."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return Channel(socket.create_connection((server, port), timeout=180))
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def rc_to_rts(qp, gid_index: int, access: int, psn: int, remote_gid: str, remote_qpn: int,
              remote_psn: int, rd_atomic: int = 1) -> None:
    """INIT -> RTR -> RTS toward one remote RC QP (timeout 14: 67 ms, as perftest
    and ibv_rc_pingpong; 7 retries)."""
    attr = QPAttr(qp_state=e.IBV_QPS_INIT)
    attr.qp_access_flags = access
    attr.port_num = 1
    attr.pkey_index = 0
    qp.to_init(attr)
    gr = GlobalRoute(dgid=GID(remote_gid), sgid_index=gid_index, hop_limit=64)
    attr = QPAttr(qp_state=e.IBV_QPS_RTR)
    attr.ah_attr = AHAttr(is_global=1, port_num=1, gr=gr)
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = remote_qpn
    attr.rq_psn = remote_psn
    attr.max_dest_rd_atomic = rd_atomic
    attr.min_rnr_timer = 12
    qp.to_rtr(attr)
    attr.qp_state = e.IBV_QPS_RTS
    attr.sq_psn = psn
    attr.timeout = 14
    attr.retry_cnt = 7
    attr.rnr_retry = 7
    attr.max_rd_atomic = rd_atomic
    qp.to_rts(attr)


def poll(cq, count: int, what: str, timeout_s: float = 60.0) -> list:
    """Polls `count` completions (sleeping between polls: no busy loop)."""
    done = []
    deadline = time.monotonic() + timeout_s
    while len(done) < count:
        n, wcs = cq.poll(count - len(done))
        if n:
            done.extend(wcs[:n])
            continue
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: timed out: {len(done)} of {count} completions")
        time.sleep(0.002)
    return done


class Checks:
    """Prints "ok" or "FAIL" per check and counts the failures."""

    def __init__(self):
        self.failures = 0

    def __call__(self, cond: bool, what: str) -> None:
        print(("ok    " if cond else "FAIL  ") + what, flush=True)
        if not cond:
            self.failures += 1


def status_name(s: int) -> str:
    names = {e.IBV_WC_SUCCESS: "success", e.IBV_WC_REM_ACCESS_ERR: "remote access error",
             e.IBV_WC_WR_FLUSH_ERR: "flushed", e.IBV_WC_RETRY_EXC_ERR: "retries exceeded",
             e.IBV_WC_REM_OP_ERR: "remote operational error",
             e.IBV_WC_REM_INV_REQ_ERR: "remote invalid request"}
    return names.get(s, f"status {s}")


def peer_parser(doc: str, port: int) -> argparse.ArgumentParser:
    """The peers' command line: ROLE --gid-index G [--server ADDR] [--port P];
    each peer adds its own options."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("role", choices=["server", "client"])
    ap.add_argument("--gid-index", type=int, required=True)
    ap.add_argument("--server")
    ap.add_argument("--port", type=int, default=port)
    return ap


def run_role(ap: argparse.ArgumentParser, args, server, client) -> int:
    """Runs server(args) or client(args) by the role (a client needs --server)."""
    if args.role == "server":
        return server(args)
    if not args.server:
        ap.error("client needs --server")
    return client(args)
