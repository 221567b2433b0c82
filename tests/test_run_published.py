"""Published whole runs against the run layer (``ledger.run.published``), each beside
its step-time error: Llama 3.1 405B's 30.84M H100 GPU-hours, DeepSeek-V3's 2,664K +
119K H800 GPU-hours, BLOOM's 1,082,990 A100 GPU-hours, OPT-175B's logbook.

The bar (issue 23): GPU-hours within 15% of the published total wherever the run's step
time is within 15% of its published step time; where it is not, the run priced at the
published step time must be (the run layer's own error), and the step error explains
the rest."""
import pytest

from ledger.run.published import OPT_LOGBOOK, held, whole_runs

BAR = 0.15
RUNS = {w.label: w for w in whole_runs()}


@pytest.mark.parametrize("label", [k for k, w in RUNS.items() if w.gpu_hours])
def test_gpu_hours_within_the_bar(label):
    h = held(RUNS[label])
    published = h.run.gpu_hours
    step_ok = all(abs(e) <= BAR for _, e in h.step_errors)
    if step_ok:
        assert abs(h.predicted.gpu_hours / published - 1) <= BAR
    assert abs(h.at_published_step.gpu_hours / published - 1) <= BAR, (
        label, h.at_published_step.gpu_hours, published)


def _deepseek_part(what: str) -> float:
    h = held(RUNS["DeepSeek-V3"])
    _, idx, published = next(p for p in h.run.parts if p[0] == what)
    return h.gpu_hours(h.at_published_step, idx) / published - 1


def test_deepseek_parts():
    """Table 1: pre-training 2,664K H800 GPU-hours; the extension's 125.8B tokens at 32K
    and 128K, 1,000 steps each."""
    assert abs(_deepseek_part("pre-training")) <= BAR
    h = held(RUNS["DeepSeek-V3"])
    ext = [s for s in h.at_published_step.segments if s.segment.seq_len > 4096]
    assert sum(s.segment.tokens for s in ext) == 1000 * 32768 * 1920 + 1000 * 131072 * 480


@pytest.mark.xfail(strict=True, reason=(
    "Table 1's 119K context-extension GPU-hours: its placement is not published, and "
    "DualPipe (the report's schedule, an even m >= 2 pp) cannot run 1,920 sequences on 128 "
    "DP ranks (m = 15): the rule moves DP ranks to CP (32K: dp 32 x cp 4; 128K: dp 8 x "
    "cp 16, a ring across nodes exposing 75 s of a 254 s step), +45% (1F1B on the same "
    "placement instead: +90%)"))
def test_deepseek_context_extension():
    """Table 1: context extension 119K H800 GPU-hours, 5.25x the pre-training rate per
    token, which only its sequence lengths (attention) and placement explain."""
    assert abs(_deepseek_part("context extension")) <= BAR


def test_llama3_goodput_as_published():
    """Llama 3 sec. 3.3.4: 'higher than 90% effective training time' over the 54-day
    snapshot, at the snapshot's own interruption rate."""
    h = held(RUNS["Llama 3.1 405B"])
    assert h.at_published_step.goodput > 0.90
    assert sum(s.segment.tokens for s in h.predicted.segments) == pytest.approx(15.6e12)


def test_bloom_checkpoint_write_as_measured():
    """chronicles.md L36: 'A checkpoint is saved in 40 secs' (2.3 TB at 57.5 GB/s); the
    ledger's 14 B x 176.2e9 over the same bandwidth, every 100 steps as the run did."""
    h = held(RUNS["BLOOM-176B"])
    main = h.at_published_step.main
    assert main.checkpoint.write_s == pytest.approx(40, rel=0.10)
    assert main.interval_steps == 100
    assert main.step_s == pytest.approx(104.70)  # the published step, the full batch


def test_opt_logbook():
    """OPT-175B: no GPU-hour total is published. Its checkpoint '1.6TB ... 992 files,
    each ~1.7GB' is 10 B a parameter (fp16 weights, fp32 Adam, no master); the ledger's
    FSDP2 convention saves 12, 20% more - explained, not fitted. Its '~90 restarts' in
    56 days include loss-spike restarts and roll-backs the failure model does not
    price: the hardware interruptions it predicts at OPT's own rate ('~2 machines go
    down every day') over the failure-free training are fewer."""
    h = held(RUNS["OPT-175B"])
    q = h.at_published_step
    ck = q.main.checkpoint
    assert ck.bytes / OPT_LOGBOOK["checkpoint_bytes"] == pytest.approx(12 / 10 * 1.09, rel=0.05)
    assert ck.bytes_per_gpu * OPT_LOGBOOK["files"] == pytest.approx(ck.bytes)
    assert q.interruptions < OPT_LOGBOOK["restarts"] and q.days < OPT_LOGBOOK["days"]


def test_every_run_names_its_step_error():
    for w in RUNS.values():
        h = held(w)
        assert h.step_errors and all(isinstance(e, float) for _, e in h.step_errors)
