"""What the interop tests share: failing with a message, running a program with its log kept."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(cmd, log):
    """Runs `cmd`, writes its output to `log`; on a non-zero exit prints its end and fails."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(log, "w") as f:
        f.write(p.stdout)
    if p.returncode:
        print(p.stdout[-4000:])
        fail(f"{' '.join(cmd)} exited {p.returncode} (log: {log})")
    return p.stdout
