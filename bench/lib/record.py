"""Dated bench records for the Python benches (bench/lib/record.sh for the shell ones).

Each bench writes into bench/results/<bench>/: YYYY-MM-DD-<commit>-<what>.jsonl,
one JSON object per measurement carrying the run's header (commit, date,
machine: nproc and load, args), and latest.md, the table of the newest run.
ROWAN_BENCH_RESULTS overrides bench/results.
"""
import datetime
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Record:
    """bench: the folder under bench/results; what: the record's name part; args: the
    bench's own arguments; commit: the code measured when it is not the checkout's HEAD
    (e.g. a binary built from an export); out: the folder instead of bench/results/<bench>."""

    def __init__(self, bench, what, args, commit=None, out=None, truncate=True):
        self.commit = commit or subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
            text=True).stdout.strip() or "unknown"
        now = datetime.datetime.now(datetime.timezone.utc)
        self.dir = out or os.path.join(os.environ.get("ROWAN_BENCH_RESULTS",
                                                      os.path.join(ROOT, "bench/results")), bench)
        os.makedirs(self.dir, exist_ok=True)
        self.path = os.path.join(self.dir, f"{now:%Y-%m-%d}-{self.commit}-{what}.jsonl")
        self.header = {"bench": bench, "commit": self.commit,
                       "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "machine": {"nproc": os.cpu_count(), "load": os.getloadavg()[0]},
                       "args": list(args)}
        if truncate:
            open(self.path, "w").close()

    def add(self, obj):
        with open(self.path, "a") as f:
            f.write(json.dumps({**self.header, **obj}) + "\n")

    def latest(self, text, name="latest.md"):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)
