#!/usr/bin/python3
"""A payload-verifying TCP stream (tests/integration/faults_test.cc).

  checked_stream.py server PORT            accept one connection, verify, print JSON
  checked_stream.py client HOST PORT BYTES send BYTES of checkable data, print JSON

The stream is an 16-byte header (length, seed) and then blocks of SHA-256
output keyed by the seed and the block number, so the receiver checks every
byte it gets against what must have been sent: a lost, duplicated, reordered
or corrupted byte shows as a mismatch or a short count.
"""
import hashlib
import json
import os
import socket
import struct
import sys
import time

BLOCK = 32 * 1024


def block(seed, i):
    h = hashlib.sha256(struct.pack(">QQ", seed, i)).digest()
    return h * (BLOCK // len(h))


def server(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(1)
    s.settimeout(120)
    c, _ = s.accept()
    c.settimeout(120)
    hdr = b""
    while len(hdr) < 16:
        d = c.recv(16 - len(hdr))
        if not d:
            break
        hdr += d
    total, seed = struct.unpack(">QQ", hdr) if len(hdr) == 16 else (0, 0)
    got, bad_at, buf, i = 0, -1, b"", 0
    t0 = time.time()
    try:
        while got < total:
            d = c.recv(1 << 20)
            if not d:
                break
            buf += d
            while len(buf) >= BLOCK or (got + len(buf) >= total and buf):
                n = min(BLOCK, len(buf), total - got)
                if bad_at < 0 and buf[:n] != block(seed, i)[:n]:
                    bad_at = got
                buf = buf[n:]
                got += n
                i += 1
    except socket.timeout:
        pass
    c.sendall(b"k" if got == total and bad_at < 0 else b"x")
    c.close()
    print(json.dumps({"expected": total, "received": got, "first_bad": bad_at,
                      "ok": got == total and bad_at < 0, "seconds": time.time() - t0}))


def client(host, port, total):
    seed = int.from_bytes(os.urandom(8), "big")
    deadline = time.time() + 15
    while True:
        try:
            c = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    c.settimeout(120)
    c.sendall(struct.pack(">QQ", total, seed))
    sent, i = 0, 0
    while sent < total:
        n = min(BLOCK, total - sent)
        c.sendall(block(seed, i)[:n])
        sent += n
        i += 1
    verdict = c.recv(1)
    c.close()
    print(json.dumps({"sent": sent, "verdict_ok": verdict == b"k"}))


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]))
    else:
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
