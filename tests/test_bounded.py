"""Issue 35: every file read with limits, every range checked before it is expanded, every
page written whole. Each hostile input of the issue is a row here: one line on stderr
naming the file (or flag) and the cause, exit 2, no traceback, no hang (SIGALRM bounds
each case), no unbounded memory (the reader reads at most its cap plus one byte)."""
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import LedgerError, clip
from ledger.io import files
from test_bad_input import assert_refused, run

EST = ["estimate", "llama3-8b", "--gpus", "64", "--global-batch", "512"]
# each input that names a file, as the command line that hands it over
INPUTS = {
    "model": lambda p: ["report", p],
    "system": lambda p: EST + ["--system", p],
    "phases": lambda p: EST + ["--phases", p],
    "from_megatron": lambda p: ["estimate", "--from-megatron", p, "--gpus", "8"],
    "from_torchtitan": lambda p: ["estimate", "--from-torchtitan", p, "--gpus", "8"],
}


def _fifo(tmp, suffix):
    p = tmp / f"pipe{suffix}"
    os.mkfifo(p)
    return str(p), "is a named pipe (FIFO), not a regular file"


def _loop(tmp, suffix):
    p = tmp / "loop"  # no .json: a loop must not read as an unknown model name
    os.symlink(p, p)
    return str(p), "is a loop of symbolic links"


def _sparse(tmp, suffix):
    p = tmp / f"huge{suffix}"
    with open(p, "wb") as f:
        f.truncate(200 << 20)  # 200 MiB of holes: the stat refuses it, nothing is read
    return str(p), "is 200 MiB, over the"


def _write(name, data):
    def make(tmp, suffix):
        p = tmp / f"{name}{suffix}"
        p.write_bytes(data(suffix))
        return str(p), _WHY[name]
    return make


_WHY = {"deep": "nests deeper than the", "digits": "holds an integer of more than 4,300 digits",
        "binary": "is not UTF-8 text (byte 0xff at offset 1)", "inline": "nests deeper than the"}
KINDS = {
    "fifo": _fifo,
    "zero": lambda tmp, s: ("/dev/zero", "is a character device, not a regular file"),
    "urandom": lambda tmp, s: ("/dev/urandom", "is a character device, not a regular file"),
    "folder": lambda tmp, s: (str(tmp), "is a folder, not a regular file"),
    "empty path": lambda tmp, s: ("", "the path is empty ('')"),
    "symlink loop": _loop,
    "200 MiB": _sparse,
    "deep": _write("deep", lambda s: (b"a = " if s == ".toml" else b"") + b"[" * 100_000),
    "inline": _write("inline", lambda s: b"a = " + b"{b = " * 5_000 if s == ".toml"
                     else b'{"a":' * 5_000),
    "digits": _write("digits", lambda s: (b"rope_theta = " if s == ".toml" else
                                          b'{"rope_theta": ') + b"9" * 5_000
                     + (b"" if s == ".toml" else b"}")),
    "binary": _write("binary", lambda s: b"a\xff"),
}
SUFFIX = {"model": ".json", "system": ".json", "phases": ".toml", "from_megatron": ".sh",
          "from_torchtitan": ".toml"}
PARSED = {"deep", "inline", "digits"}  # what a parser meets; a launch script is not parsed so


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("field", INPUTS)
def test_every_input_file_is_read_bounded(tmp_path, field, kind):
    if kind in PARSED and field == "from_megatron":
        pytest.skip("a launch script is read by the bash reader, not a JSON/TOML parser")
    path, why = KINDS[kind](tmp_path, SUFFIX[field])
    if kind == "folder" and field == "model":  # a folder holding a config.json
        path, why = str(tmp_path), f"no such file: {tmp_path}/config.json"
    if kind == "empty path" and field == "model":
        argv = ["report", ""]
    else:
        argv = INPUTS[field](path)
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert why in err, err
    assert path in err or kind == "empty path", err


def test_the_system_file_and_phases_name_their_own_field(tmp_path):
    path, _ = _fifo(tmp_path, ".toml")
    code, out, err = run(EST + ["--phases", path])
    assert err.startswith("error: phases: ")


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=300), cap=st.integers(0, 200))
def test_never_more_than_the_cap_plus_one_byte(tmp_path_factory, data, cap):
    """A regular file of any size under any cap: its bytes whole, or a refusal, and never
    more than cap + 1 bytes asked of the kernel."""
    p = tmp_path_factory.mktemp("cap") / "f"
    p.write_bytes(data)
    asked = []
    real = os.read

    def counted(fd, n):
        asked.append(len(got := real(fd, n)))
        return got
    os.read, saved = counted, os.read
    try:
        try:
            got = files.read_bytes(p, "system", cap=cap)
        except LedgerError as e:
            assert len(data) > cap and "over the" in str(e)
        else:
            assert got == data and len(data) <= cap
    finally:
        os.read = saved
    assert sum(asked) <= cap + 1


def test_a_file_whose_size_the_stat_does_not_tell_stops_at_the_cap():
    """/proc files are regular and say 0 bytes: the read itself stops at cap + 1."""
    with pytest.raises(LedgerError, match="is over 16 B, the most read"):
        files.read_bytes("/proc/self/maps", "system", cap=16)


def test_a_long_value_is_echoed_clipped():
    assert len(clip("9" * 900_000)) == 200
    code, out, err = run(["report", "llama3-8b", "--tp", "9" * 900_000])
    assert_refused(["--tp"], code, out, err)
    assert len(err) < 400, len(err)


def test_a_name_with_terminal_escapes_is_printed_escaped(tmp_path):
    import json

    here = os.path.dirname(__file__)
    with open(os.path.join(here, "fixtures/hf/mistral-7b-v0.1.json")) as f:
        cfg = json.load(f)
    cfg["_name_or_path"] = "\x1b[2Jevil\x07"
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    code, out, err = run(["report", str(p)])
    assert code == 0 and "\x1b" not in out and "\x07" not in out
    assert out.startswith("\\x1b[2Jevil\\x07 (s=4096")


# ---------------------------------------------------------------- pages written whole
def test_a_page_is_replaced_whole_and_a_failed_write_keeps_the_old_one(tmp_path, monkeypatch):
    import errno

    page = tmp_path / "page.html"
    code, out, err = run(["report", "llama3-8b", "--html", str(page)])
    assert code == 0, err
    before = page.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(files.os, "fsync", full)
    argv = ["report", "llama3-70b", "--html", str(page)]
    code, out, err = run(argv)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err == (f"error: html: cannot write {page}: No space left on device; the "
                   f"previous file is unchanged\n")
    assert page.read_bytes() == before
    assert os.listdir(tmp_path) == ["page.html"]  # no temporary file left beside it


def test_a_file_size_limit_keeps_the_old_page(tmp_path):
    """ulimit -f: the write fails with EFBIG (Python ignores SIGXFSZ); the old page stays."""
    import resource
    import subprocess
    import sys

    page = tmp_path / "t.svg"
    page.write_text("<svg>old</svg>")
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # noqa: E731
    r = subprocess.run([sys.executable, "-m", "ledger", "schedule", "1f1b", "--pp", "4",
                        "--microbatches", "64", "--svg", str(page)], capture_output=True,
                       text=True, timeout=60, preexec_fn=limit)
    assert r.returncode == 2 and r.stderr == (f"error: svg: cannot write {page}: File too "
                                              f"large; the previous file is unchanged\n")
    assert page.read_text() == "<svg>old</svg>" and os.listdir(tmp_path) == ["t.svg"]


def test_two_writers_and_a_reader_never_see_a_torn_page(tmp_path):
    import threading

    page = tmp_path / "p.svg"
    texts = ["a" * 100_000, "b" * 50_000]
    files.write_whole(page, texts[0], "svg")
    seen, stop = set(), threading.Event()

    def write(text):
        for _ in range(40):
            files.write_whole(page, text, "svg")

    def read():
        while not stop.is_set():
            seen.add(page.read_text())
    writers = [threading.Thread(target=write, args=(t,)) for t in texts]
    reader = threading.Thread(target=read)
    reader.start()
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    reader.join()
    assert seen <= set(texts)


@pytest.mark.parametrize("flag", ["--html", "--system", "--phases", "--from-megatron"])
def test_an_empty_path_is_refused(flag):
    argv = EST + [flag, ""]
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert err.endswith("the path is empty ('')\n"), err
