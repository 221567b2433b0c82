"""Processes left behind by a launched world: the tests' check that a run ends them all."""
import os


def leftovers(tag: str) -> list[int]:
    """Other processes whose environment carries ``tag`` (children inherit it)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if tag.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found
