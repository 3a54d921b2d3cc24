#!/usr/bin/python3
"""Atomics end to end: both sites FETCH_ADD one counter at the same time, and
it must end at the exact sum (tests/interop, AtomicsFromBothSites).

  atomic_peer.py server --gid-index G [--port P] [--ops M]
  atomic_peer.py client --gid-index G --server ADDR [--port P] [--ops N]
                        [--depth D] [--warmup W]

Runs inside a soft-RoCE guest with Debian's python3-pyverbs (hence
/usr/bin/python3). The server's host owns a 64-bit counter in a memory region
open to remote atomics. The client (the other site) first sends W RDMA
WRITEs on its RC QP (so that a split-mode gateway pairs the flow), then
N FETCH_ADDs of 1 with D outstanding, while the server's host adds 1000 M
times through a loopback QP pair of its own. With N and M below 1000, every
value a FETCH_ADD returns says how many of each side's adds came before it:
the client's i-th add must see exactly i of its own (none lost, none done
twice: a replayed atomic that executes again adds twice), the server's j-th
exactly j of its own, and each side's view of the other's count must only
grow. The counter must end at N + 1000 M. Then the client's COMPARE_SWAP with
that value swaps it (returning it), a second one with a stale value does not,
and an RDMA READ sees the swapped value. Prints ok/FAIL per check and one
JSON line "result: {...}"; exits 0 when every check holds.
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

ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
          e.IBV_ACCESS_REMOTE_ATOMIC)
SERVER_ADD = 1000
SWAP_STEP = 7
# The server's region: the counter at 0, its own adds' results from
# LOCAL_RESULTS, the client's warm-up WRITEs at WRITE_AREA.
SERVER_MR = 16384
LOCAL_RESULTS = 64
WRITE_AREA = 12288
check = Checks()


class Side:
    """One PD, one MR (the counter or the results at `results`), RC QPs."""

    def __init__(self, gid_index: int, size: int):
        self.ctx = Context(name="rxe0")
        self.pd = PD(self.ctx)
        self.mr = MR(self.pd, size, ACCESS)
        self.mr.write(bytes(size), size, 0)
        self.gid_index = gid_index
        self.gid = str(self.ctx.query_gid(1, gid_index))

    def qp(self, depth: int):
        cq = CQ(self.ctx, 4 * depth + 64)
        cap = QPCap(max_send_wr=4 * depth + 64, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
        return QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap)), cq

    def u64(self, offset: int) -> int:
        return int.from_bytes(self.mr.read(8, offset), "little")

    def post(self, qp, wr_id: int, opcode: int, offset: int, length: int, rkey: int, addr: int,
             compare_add: int = 0, swap: int = 0) -> None:
        sge = SGE(self.mr.buf + offset, length, self.mr.lkey)
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge],
                    send_flags=e.IBV_SEND_SIGNALED)
        if opcode in (e.IBV_WR_ATOMIC_FETCH_AND_ADD, e.IBV_WR_ATOMIC_CMP_AND_SWP):
            wr.set_wr_atomic(rkey, addr, compare_add, swap)
        else:
            wr.set_wr_rdma(rkey, addr)
        qp.post_send(wr)


def fetch_adds(side: Side, qp, cq, count: int, depth: int, add: int, rkey: int, addr: int,
               results: int, what: str) -> list:
    """`count` FETCH_ADDs of `add`, `depth` outstanding; returns the values in issue order."""
    posted = done = 0
    bad = []
    while done < count:
        while posted < count and posted - done < depth:
            side.post(qp, posted, e.IBV_WR_ATOMIC_FETCH_AND_ADD, results + 8 * posted, 8, rkey,
                      addr, compare_add=add)
            posted += 1
        for wc in poll(cq, 1, what):
            done += 1
            if wc.status != e.IBV_WC_SUCCESS:
                bad.append((wc.wr_id, status_name(wc.status)))
    check(not bad, f"{what}: {count} FETCH_ADDs complete" + (f" (errors: {bad[:4]})" if bad else ""))
    return [side.u64(results + 8 * i) for i in range(count)]


def check_sequence(values: list, own: int, what: str) -> None:
    """own = 1: the client's adds (low digits), own = SERVER_ADD: the server's."""
    mine = [(v % SERVER_ADD) if own == 1 else (v // SERVER_ADD) for v in values]
    other = [(v // SERVER_ADD) if own == 1 else (v % SERVER_ADD) for v in values]
    first_wrong = next((i for i, m in enumerate(mine) if m != i), None)
    check(first_wrong is None,
          f"{what}: the i-th add saw exactly i of its own" +
          ("" if first_wrong is None else
           f" (add {first_wrong} saw {mine[first_wrong]}: lost or executed twice)"))
    check(all(b >= a for a, b in zip(other, other[1:])),
          f"{what}: the other site's count only grew")


def server(args) -> int:
    results = LOCAL_RESULTS
    side = Side(args.gid_index, SERVER_MR)
    ch = accept(args.port)
    remote = ch.recv()
    depth = remote["depth"]
    rqp, _ = side.qp(depth)
    # The local adds: a loopback pair on the host's own device.
    lqa, lcq = side.qp(depth)
    lqb, _ = side.qp(depth)
    ch.send({"gid": side.gid, "qpn": rqp.qp_num, "psn": 0x500000, "rkey": side.mr.rkey,
             "addr": side.mr.buf})
    rc_to_rts(rqp, args.gid_index, ACCESS, 0x500000, remote["gid"], remote["qpn"], remote["psn"],
              depth)
    rc_to_rts(lqa, args.gid_index, ACCESS, 0x510000, side.gid, lqb.qp_num, 0x520000, depth)
    rc_to_rts(lqb, args.gid_index, ACCESS, 0x520000, side.gid, lqa.qp_num, 0x510000, depth)
    go = ch.recv()
    assert go == "go", go
    mine = fetch_adds(side, lqa, lcq, args.ops, depth, SERVER_ADD, side.mr.rkey, side.mr.buf,
                      results, "server")
    check_sequence(mine, SERVER_ADD, "server")
    n = ch.recv()["done"]
    counter = side.u64(0)
    want = n + SERVER_ADD * args.ops
    check(counter == want, f"the counter is {counter}, {n} + {SERVER_ADD} x {args.ops} = {want}")
    ch.send({"counter": counter})
    ch.recv()  # the client's COMPARE_SWAPs are done
    final = side.u64(0)
    check(final == counter + SWAP_STEP, f"after the COMPARE_SWAPs the counter is {final}")
    ch.send("checked")
    print("result: " + json.dumps({"server_ops": args.ops, "client_ops": n, "counter": counter,
                                   "final": final}), flush=True)
    return 1 if check.failures else 0


def client(args) -> int:
    results = 64
    side = Side(args.gid_index, results + 8 * args.ops + 4096)
    qp, cq = side.qp(args.depth)
    ch = connect(args.server, args.port)
    ch.send({"gid": side.gid, "qpn": qp.qp_num, "psn": 0x600000, "depth": args.depth})
    remote = ch.recv()
    rc_to_rts(qp, args.gid_index, ACCESS, 0x600000, remote["gid"], remote["qpn"], remote["psn"],
              args.depth)
    rkey, addr = remote["rkey"], remote["addr"]
    # WRITEs away from the counter, one at a time: the first ACKs that come
    # back let a split gateway pair the flow.
    ok = True
    for i in range(args.warmup):
        side.post(qp, 10000 + i, e.IBV_WR_RDMA_WRITE, 0, 64, rkey,
                  addr + WRITE_AREA + 64 * (i % 8))
        ok = ok and poll(cq, 1, "warm-up WRITE")[0].status == e.IBV_WC_SUCCESS
    check(ok, f"{args.warmup} warm-up WRITEs complete")
    ch.send("go")
    mine = fetch_adds(side, qp, cq, args.ops, args.depth, 1, rkey, addr, results, "client")
    check_sequence(mine, 1, "client")
    ch.send({"done": args.ops})
    counter = ch.recv()["counter"]
    scratch = results + 8 * args.ops
    side.post(qp, 20000, e.IBV_WR_ATOMIC_CMP_AND_SWP, scratch, 8, rkey, addr,
              compare_add=counter, swap=counter + SWAP_STEP)
    side.post(qp, 20001, e.IBV_WR_ATOMIC_CMP_AND_SWP, scratch + 8, 8, rkey, addr,
              compare_add=counter, swap=counter + 99)
    side.post(qp, 20002, e.IBV_WR_RDMA_READ, scratch + 16, 8, rkey, addr)
    wcs = poll(cq, 3, "COMPARE_SWAPs and READ")
    check(all(wc.status == e.IBV_WC_SUCCESS for wc in wcs),
          "the COMPARE_SWAPs and the READ complete: " + ", ".join(status_name(w.status) for w in wcs))
    swapped, stale, read = side.u64(scratch), side.u64(scratch + 8), side.u64(scratch + 16)
    check(swapped == counter, f"the COMPARE_SWAP with {counter} returned {swapped}")
    check(stale == counter + SWAP_STEP, f"the stale COMPARE_SWAP returned {stale} (no swap)")
    check(read == counter + SWAP_STEP, f"the READ after them sees {read}")
    ch.send("swapped")
    check(ch.recv() == "checked", "the server checked its counter")
    print("result: " + json.dumps({"client_ops": args.ops, "depth": args.depth, "counter": counter,
                                   "read": read}), flush=True)
    return 1 if check.failures else 0


def main() -> int:
    ap = peer_parser(__doc__, 18620)
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=12)
    args = ap.parse_args()
    if not 0 < args.ops < SERVER_ADD:
        ap.error(f"--ops must be within 1..{SERVER_ADD - 1}")
    return run_role(ap, args, server, client)


if __name__ == "__main__":
    sys.exit(main())
