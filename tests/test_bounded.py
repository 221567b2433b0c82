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


def test_an_error_line_is_one_clipped_line_whatever_a_file_holds(tmp_path):
    """A key no reader clips (an unknown TOML key of 100,000 characters, a newline and an
    escape in it) still ends as one line of at most 4,000 characters."""
    p = tmp_path / "job.toml"
    p.write_text('[job]\n"' + "k" * 100_000 + '\\n\\u001b[2J" = 1\n')
    argv = ["estimate", "--from-torchtitan", str(p), "--gpus", "8"]
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert len(err) <= 4000 + len("error: \n") and "\x1b" not in err


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


# ---------------------------------------------------------------- checked before expanded
CUSTOM = ["report", "custom", "--layers", "8", "--hidden", "64", "--heads", "4", "--ffn", "128",
          "--vocab", "100"]
MOE = ["--num-experts", "4", "--top-k", "1", "--moe-ffn", "32"]
LAYOUT = ["--pp", "2", "--pipeline-model-parallel-layout"]
EXPANSIONS = [  # (flags, what the one line says); each would build GBs if expanded first
    (MOE + ["--moe-layers", "0-3000000000"], "--moe-layers: layer 3000000000 is past the "
                                             "model's 8 layers (indices 0..7)"),
    (["--sliding-window", "4", "--local-layers", "0-30000000"], "--local-layers: layer "
                                                                "30000000 is past the model"),
    (MOE + ["--moe-layers", "5-2"], "--moe-layers: expected layer indices like"),
    (["--mixers", "A*3000000000"], "--mixers: names more than the model's 8 layers"),
    (["--mixers", "MA*3000000000,A"], "--mixers: names more than the model's 8 layers"),
    (["--mixers", "A*" + "9" * 5000], "--mixers: expected letters"),
    (LAYOUT + ["t*99999999999999"], "unrolls to more than"),
    (LAYOUT + ["(t*1000000000|)*2"], "unrolls to more than"),
    (LAYOUT + ["(t*" + "9" * 5000 + "|)*2"], "unrolls to more than"),
]


@pytest.mark.parametrize("flags,line", EXPANSIONS, ids=range(len(EXPANSIONS)))
def test_ranges_and_patterns_are_bounded_before_they_are_expanded(flags, line):
    argv = CUSTOM + flags
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert line in err and len(err) < 600, err


def test_a_layers_count_past_the_limit_is_refused_before_a_per_layer_list():
    argv = [*CUSTOM[:3], "16000000", *CUSTOM[4:], "--sliding-window", "4",
            "--local-layers", "every:1"]
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert err == "error: --layers: layers(16,000,000) exceeds the limit of 65,536\n"


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet="Etm|L()*0123456789,", max_size=40))
def test_any_layout_string_is_one_line_or_a_split(text):
    from ledger.io import parse_layout

    try:
        stages, vp = parse_layout(text, 2, 8)
    except LedgerError as e:
        assert "\n" not in str(e) and len(str(e)) < 700
    else:
        assert sum(stages) == 8 and len(stages) == 2 * vp


LAUNCHES = {  # launch scripts that grow without bound in bash itself
    "string doubled x34": "X=ab\n" + "X=$X$X\n" * 34,
    "string appended x34": "X=ab\n" + "X+=$X\n" * 34,
    "array doubled x34": 'A=(a b)\n' + 'A=("${A[@]}" "${A[@]}")\n' * 34,
    "array appended x34": 'A=(a b)\n' + 'A+=("${A[@]}")\n' * 34,
    "one word of many arrays": 'A=(' + "x " * 40_000 + ')\necho ' + '"${A[@]}"' * 4 + "\n",
    "default doubled": "X=ab\n" + 'Y=${Y:=$X$X}; X=$Y; unset Y\n' * 34,
}


@pytest.mark.parametrize("name", LAUNCHES)
def test_the_launch_reader_caps_every_value_it_builds(tmp_path, name):
    p = tmp_path / "train.sh"
    p.write_text(LAUNCHES[name] + "torchrun pretrain_gpt.py --num-layers 2\n")
    argv = ["report", "--from-megatron", str(p)]
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert "grows past 1,048,576 characters or 65,536 words" in err, err


def test_launch_arithmetic_wraps_at_64_bits_as_bash_does():
    from ledger.io.shell.run import commands

    _, env = commands("X=3\n" + "X=$((X*X))\n" * 40, "t.sh")
    assert -(1 << 63) <= int(env["X"]) < (1 << 63)
    _, env = commands("X=$((9223372036854775807 + 1))\n", "t.sh")
    assert env["X"] == "-9223372036854775808"  # bash: echo $((9223372036854775807 + 1))


@pytest.mark.parametrize("terms", [5_032])
def test_moe_layer_freq_of_thousands_of_joined_terms_is_one_line(tmp_path, terms):
    p = tmp_path / "flags.txt"
    p.write_text("--num-layers 8 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size "
                 "128 --seq-length 128 --max-position-embeddings 128 --num-experts 4 "
                 "--moe-router-topk 1 --vocab-size 100 --moe-layer-freq '"
                 + "+".join(["[0]"] * terms) + "'\n")
    argv = ["report", "--from-megatron", str(p)]
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert "--moe-layer-freq: invalid moe_freq_type value: '[0]+[0]" in err and len(err) < 600


def test_phase_steps_past_the_token_limit_are_refused(tmp_path):
    """2^40 steps of 512 x 8192 tokens is 4.6e18 tokens: docs/inputs.md says 10^15."""
    p = tmp_path / "p.toml"
    p.write_text("[[phase]]\nsteps = 1099511627776\n")
    argv = EST + ["--phases", str(p)]
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert err == (f"error: phases: {p}: the phases train on 4.612e+18 tokens, past the "
                   f"limit of 1e+15 (docs/inputs.md)\n")
