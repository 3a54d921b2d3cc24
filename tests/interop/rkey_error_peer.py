#!/usr/bin/python3
"""A wrong R_Key must reach the requester as an error completion, whatever
sits between the two soft-RoCE hosts (tests/interop, RemoteAccessError).

  rkey_error_peer.py server --gid-index G [--port P]
  rkey_error_peer.py client --gid-index G --server ADDR [--port P] [--warmup N]

Runs inside a soft-RoCE guest with Debian's python3-pyverbs (hence
/usr/bin/python3). The peers exchange QP numbers, PSNs, GIDs and memory keys
over TCP (default port 18610); the client then runs two cases, each on an RC
QP of its own:

  write: N good RDMA WRITEs (so that a split-mode gateway pairs the flow and
         acknowledges them itself), then one RDMA WRITE with a wrong R_Key,
         then an RDMA READ with the right one. The server's data must hold
         the good WRITEs and not the bad one. Either the bad WRITE completes
         with a remote access error (end to end: direct, passthrough), or it
         completes as a success (split mode's local ACK, docs/split-mode.md)
         and the READ after it fails with a remote access error. A READ that
         succeeds after a WRITE that "succeeded" is the silent success this
         program exists to catch.
  read:  N good RDMA WRITEs, then an RDMA READ with a wrong R_Key: it must
         complete with a remote access error (a READ always travels end to
         end).

Prints ok/FAIL per check and one JSON line "result: {...}" with the statuses;
exits 0 when every check holds.
"""

import json
import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

from verbs_common import (Checks, accept, connect, peer_parser, poll, rc_to_rts, run_role,
                          status_name)

MR_SIZE = 65536
CHUNK = 4096  # one good WRITE
BAD_AREA = 61440  # where the bad WRITE aims (must stay untouched)
CASES = ["write", "read"]


def pattern(n: int, seed: int) -> bytes:
    return bytes((seed * 7 + i) & 0xFF for i in range(n))


class Side:
    """One PD and MR, one RC QP per case."""

    def __init__(self, gid_index: int, psn_base: int):
        self.ctx = Context(name="rxe0")
        self.pd = PD(self.ctx)
        access = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
                  e.IBV_ACCESS_REMOTE_READ)
        self.mr = MR(self.pd, MR_SIZE * len(CASES), access)
        self.gid_index = gid_index
        self.gid = self.ctx.query_gid(1, gid_index)
        self.cqs = {}
        self.qps = {}
        self.psns = {}
        for i, case in enumerate(CASES):
            cq = CQ(self.ctx, 64)
            cap = QPCap(max_send_wr=64, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
            self.cqs[case] = cq
            self.qps[case] = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                                    cap=cap))
            self.psns[case] = psn_base + i * 0x1000

    def base(self, case: str) -> int:
        return self.mr.buf + CASES.index(case) * MR_SIZE

    def info(self) -> dict:
        return {"gid": str(self.gid), "rkey": self.mr.rkey,
                "qps": {c: {"qpn": self.qps[c].qp_num, "psn": self.psns[c],
                            "addr": self.base(c)} for c in CASES}}

    def connect(self, remote: dict) -> None:
        access = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
                  e.IBV_ACCESS_REMOTE_READ)
        for case in CASES:
            r = remote["qps"][case]
            rc_to_rts(self.qps[case], self.gid_index, access, self.psns[case], remote["gid"],
                      r["qpn"], r["psn"])

    def post(self, case: str, wr_id: int, opcode: int, offset: int, length: int,
             remote_addr: int, rkey: int) -> None:
        sge = SGE(self.base(case) + offset, length, self.mr.lkey)
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rkey, remote_addr)
        self.qps[case].post_send(wr)

    def wait(self, case: str, count: int) -> list:
        return poll(self.cqs[case], count, case)


check = Checks()


def server(args) -> int:
    side = Side(args.gid_index, 0x300000)
    for case in CASES:
        side.mr.write(bytes(MR_SIZE), MR_SIZE, CASES.index(case) * MR_SIZE)
    ch = accept(args.port)
    remote = ch.recv()
    ch.send(side.info())
    side.connect(remote)
    done = ch.recv()  # {"warmup": N}
    n = done["warmup"]
    for case in CASES:
        off = CASES.index(case) * MR_SIZE
        good = all(side.mr.read(CHUNK, off + (i % 8) * CHUNK) == pattern(CHUNK, i % 8)
                   for i in range(min(n, 8)))
        check(good, f"{case}: the good WRITEs landed")
        check(side.mr.read(CHUNK, off + BAD_AREA) == bytes(CHUNK),
              f"{case}: the wrong R_Key wrote nothing")
    ch.send("checked")
    return 1 if check.failures else 0


def client(args) -> int:
    side = Side(args.gid_index, 0x400000)
    ch = connect(args.server, args.port)
    ch.send(side.info())
    remote = ch.recv()
    side.connect(remote)
    rkey = remote["rkey"]
    bad_rkey = rkey ^ 0x00A5A500
    result = {}
    for case in CASES:
        raddr = remote["qps"][case]["addr"]
        for i in range(8):
            side.mr.write(pattern(CHUNK, i), CHUNK, CASES.index(case) * MR_SIZE + i * CHUNK)
        # Good WRITEs one at a time: the first ACKs that come back let a
        # split gateway pair the flow; the later ones it acknowledges itself.
        ok = True
        for i in range(args.warmup):
            off = (i % 8) * CHUNK
            side.post(case, i, e.IBV_WR_RDMA_WRITE, off, CHUNK, raddr + off, rkey)
            wc = side.wait(case, 1)[0]
            ok = ok and wc.status == e.IBV_WC_SUCCESS
        check(ok, f"{case}: {args.warmup} good WRITEs complete")
        if case == "write":
            side.post(case, 100, e.IBV_WR_RDMA_WRITE, 0, CHUNK, raddr + BAD_AREA, bad_rkey)
            w = side.wait(case, 1)[0]
            side.post(case, 101, e.IBV_WR_RDMA_READ, 8 * CHUNK, CHUNK, raddr, rkey)
            r = side.wait(case, 1)[0]
            result[case] = {"write": status_name(w.status), "read_after": status_name(r.status)}
            print(f"{case}: bad WRITE: {status_name(w.status)}, READ after it: "
                  f"{status_name(r.status)}", flush=True)
            check(w.status == e.IBV_WC_REM_ACCESS_ERR or
                  (w.status == e.IBV_WC_SUCCESS and r.status == e.IBV_WC_REM_ACCESS_ERR),
                  f"{case}: the wrong R_Key reached the requester as a remote access error")
            check(r.status != e.IBV_WC_SUCCESS, f"{case}: no silent success (the READ after "
                  "the bad WRITE did not succeed)")
        else:
            side.post(case, 100, e.IBV_WR_RDMA_READ, 8 * CHUNK, CHUNK, raddr, bad_rkey)
            r = side.wait(case, 1)[0]
            result[case] = {"read": status_name(r.status)}
            print(f"{case}: READ with a wrong R_Key: {status_name(r.status)}", flush=True)
            check(r.status == e.IBV_WC_REM_ACCESS_ERR,
                  f"{case}: the READ with a wrong R_Key failed with a remote access error")
    ch.send({"warmup": args.warmup})
    check(ch.recv() == "checked", "server checked its memory")
    print("result: " + json.dumps(result), flush=True)
    return 1 if check.failures else 0


def main() -> int:
    ap = peer_parser(__doc__, 18610)
    ap.add_argument("--warmup", type=int, default=12)
    return run_role(ap, ap.parse_args(), server, client)


if __name__ == "__main__":
    sys.exit(main())
