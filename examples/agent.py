#!/usr/bin/env python3
"""What an agent does with a sandbox: write the code it generated to a file,
run it, read what came out, and fix and retry when it failed.

    PYTHONPATH=sdk/python HUTCH_API_KEY=$(sudo cat /var/lib/hutch/admin.key) \
        python3 examples/agent.py

Here the "model" is a list of two attempts, the first with a bug.
"""
import sys

from hutch import Sandbox

ATTEMPTS = [
    "def mean(xs):\n    return sum(xs) / len(x)\n\nprint(mean([1, 2, 3, 4]))\n",
    "def mean(xs):\n    return sum(xs) / len(xs)\n\nprint(mean([1, 2, 3, 4]))\n",
]


def main():
    with Sandbox.create(timeout=120, memory_mb=512, metadata={"example": "agent"}) as sbx:
        print(f"sandbox {sbx.id}")
        for n, code in enumerate(ATTEMPTS, 1):
            sbx.files.write("solution.py", code)
            r = sbx.commands.run("python3 solution.py", timeout=30,
                                 on_stdout=lambda s: print("  out:", s, end=""))
            if r.ok:
                print(f"attempt {n}: ok in {r.wall_ms:.1f} ms, answer {r.stdout.strip()}")
                kept = [e["name"] for e in sbx.files.list("failures")]
                print(f"kept for the next prompt: {kept}")
                return 0
            last = r.stderr.strip().splitlines()[-1]
            sbx.files.write(f"failures/attempt-{n}.txt", r.stderr)
            print(f"attempt {n}: {r.status} (exit {r.exit_code}): {last}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
