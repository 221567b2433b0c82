"""Every file reader refuses malformed input in one line: random bytes, a valid file cut
short anywhere, and a valid file with one value of the wrong type, fed by hypothesis to
the readers a user reaches - a Hugging Face ``config.json``, a ``--system`` file (JSON and
TOML), Megatron-LM arguments (``--from-megatron``) and a torchtitan job TOML
(``--from-torchtitan``). Each run ends in exit status 0 or in one line on stderr, exit
status 2, no traceback (the CLI runs in-process, ``test_bad_input.run``)."""
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_bad_input import assert_refused, run

EXAMPLES = Path(__file__).parent.parent / "examples"
MISTRAL = {"model_type": "mistral", "hidden_size": 256, "intermediate_size": 512,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "vocab_size": 1000, "sliding_window": 128, "max_position_embeddings": 4096}
JAMBA = {"model_type": "jamba", "hidden_size": 256, "intermediate_size": 512,
         "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
         "vocab_size": 1000, "num_experts": 4, "num_experts_per_tok": 2,
         "attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
         "expert_layer_offset": 1}
SYSTEM = {"gpu": "h100-sxm", "gpus_per_node": 8, "intra_GBps": 450, "inter_GBps": 50}
SYSTEM_TOML = 'gpu = "h100-sxm"\ngpus_per_node = 8\nintra_GBps = 450\ninter_GBps = 50\n'

# reader -> (file suffix, valid text, argv given the file's path)
READERS = {
    "config.json": (".json", json.dumps(MISTRAL), lambda p: ["report", p]),
    "config.json (hybrid)": (".json", json.dumps(JAMBA), lambda p: ["report", p]),
    "system json": (".json", json.dumps(SYSTEM),
                    lambda p: ["estimate", "llama3-8b", "--system", p]),
    "system toml": (".toml", SYSTEM_TOML, lambda p: ["estimate", "llama3-8b", "--system", p]),
    "megatron": (".sh", (EXAMPLES / "llama3_8b.sh").read_text(),
                 lambda p: ["report", "--from-megatron", p]),
    "torchtitan": (".toml", (EXAMPLES / "llama3_8b.toml").read_text(),
                   lambda p: ["report", "--from-torchtitan", p, "--gpus", "8"]),
}
SLOW = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.function_scoped_fixture])
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70)
                           | st.floats(allow_nan=True) | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                           max_leaves=6)
TOML_VALUES = st.sampled_from(['"x"', "-1", "0", "1e400", "nan", "inf", "true", "[1, 2]",
                               "{a = 1}", '""', "2**3", "1_000", "0x10", "[[1]]", "1979-05-27"])


def _feed(tmp_path, reader: str, data: bytes):
    suffix, _, argv = READERS[reader]
    path = tmp_path / f"input{suffix}"
    path.write_bytes(data)
    args = argv(str(path))
    code, out, err = run(args)
    if code != 0:
        assert_refused(args, code, out, err)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_the_valid_file_reads(tmp_path, reader):
    suffix, text, argv = READERS[reader]
    path = tmp_path / f"input{suffix}"
    path.write_text(text)
    code, out, err = run(argv(str(path)))
    assert code == 0, err


@pytest.mark.parametrize("reader", sorted(READERS))
@settings(max_examples=25, **SLOW)
@given(data=st.binary(max_size=300))
def test_random_bytes(tmp_path, reader, data):
    _feed(tmp_path, reader, data)


@pytest.mark.parametrize("reader", sorted(READERS))
@settings(max_examples=25, **SLOW)
@given(cut=st.floats(0.0, 1.0))
def test_truncated(tmp_path, reader, cut):
    text = READERS[reader][1].encode()
    _feed(tmp_path, reader, text[: int(len(text) * cut)])


@pytest.mark.parametrize("reader", sorted(r for r in READERS if READERS[r][0] == ".json"))
@settings(max_examples=40, **SLOW)
@given(data=st.data())
def test_json_value_of_the_wrong_type(tmp_path, reader, data):
    cfg = json.loads(READERS[reader][1])
    key = data.draw(st.sampled_from(sorted(cfg)))
    cfg[key] = data.draw(JSON_VALUES)
    _feed(tmp_path, reader, json.dumps(cfg).encode())


@pytest.mark.parametrize("reader", sorted(r for r in READERS if READERS[r][0] == ".toml"))
@settings(max_examples=40, **SLOW)
@given(data=st.data())
def test_toml_value_of_the_wrong_type(tmp_path, reader, data):
    lines = READERS[reader][1].splitlines()
    at = data.draw(st.sampled_from([i for i, ln in enumerate(lines) if " = " in ln]))
    lines[at] = lines[at].split(" = ")[0] + " = " + data.draw(TOML_VALUES)
    _feed(tmp_path, reader, "\n".join(lines).encode())


@settings(max_examples=40, **SLOW)
@given(data=st.data())
def test_megatron_argument_of_the_wrong_type(tmp_path, data):
    words = READERS["megatron"][1].split()
    at = data.draw(st.sampled_from([i for i, w in enumerate(words)
                                    if not w.startswith("-") and i and
                                    words[i - 1].startswith("--")]))
    words[at] = data.draw(st.sampled_from(["x", "-1", "0", "1e400", "nan", "''", "1.5",
                                           "99999999999999999999", "--", "="]))
    _feed(tmp_path, "megatron", " ".join(words).encode())


def test_a_stray_parenthesis_is_refused(tmp_path):
    """Found by test_random_bytes: b"\\x01)\\x01" as a launch file made the shell parser
    append empty statements forever (no statement starts with ")")."""
    _feed(tmp_path, "megatron", b"\x01)\x01")
    code, _, err = run(["report", "--from-megatron", str(tmp_path / "input.sh")])
    assert code == 2 and "unexpected ')'" in err


@pytest.mark.parametrize("data, op", [(b"<", "'<'"), (b"cat <<", "'<<'"),
                                      (b"pretrain_gpt.py --num-layers 2 >", "'>'")])
def test_a_redirection_without_its_word_is_refused(tmp_path, data, op):
    """Found by test_random_bytes: b"<" as a launch file ran the lexer past the text's end
    (IndexError); bash refuses it as a syntax error before the newline."""
    _feed(tmp_path, "megatron", data)
    code, _, err = run(["report", "--from-megatron", str(tmp_path / "input.sh")])
    assert code == 2 and f"syntax error: {op} with no word after it" in err, err
