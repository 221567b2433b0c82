"""--min-gpus skips the worlds that cannot hold the model's state (ledger.plan.fewest) and
answers what the full sweep answers; its header counts every world it priced (issue 34:
"costed in 2.52 s" was the last world's alone, after 32.5 s). Speed itself is measured in
benchmarks/bench_plan.py, never asserted here."""
import pytest

from ledger.errors import LedgerError
from ledger.finetune import FineTune
from ledger.model import llama3_8b, llama3_70b, llama3_405b
from ledger.plan import Pins, plan
from ledger.plan.fewest import floor_gpus, min_gpus
from ledger.system import system

SYS = system("h100-sxm")
PINS = Pins(max_tp=2, no_cp=True, no_hsdp=True)  # a small grid: the floor does not read it


def sweep(model, batch, **kw) -> int:
    """The fewest GPUs by pricing every world in turn (what min_gpus did before)."""
    for n in list(range(1, 9)) + list(range(16, 1025, 8)):
        try:
            if plan(model, n, SYS, batch, **kw).plans:
                return n
        except LedgerError as e:
            assert e.field == "gpus"
    raise AssertionError("nothing fits")


@pytest.mark.parametrize("model,kw", [
    (llama3_70b(), dict(finetune=FineTune(method="full"))),
    (llama3_405b(), dict(finetune=FineTune(method="qlora", lora_rank=16, lora_alpha=16),
                         framework="deepspeed")),
    (llama3_8b(), {}),
])
def test_min_gpus_answers_what_the_sweep_answers(model, kw):
    kw = dict(kw, pins=PINS, top=1)
    n, result = min_gpus(model, SYS, 16, 1024, **kw)
    assert n == sweep(model, 16, **kw)
    assert result.worlds >= 1 and result.evaluated >= plan(model, n, SYS, 16, **kw).evaluated


def test_the_floor_is_below_every_world_that_fits():
    """70B full fine-tune (16 bytes a parameter under Megatron's mixed precision): at least
    1.13 TB of state, so no world under 14 GPUs of 80 GiB holds it - and one under the
    floor indeed fits nothing."""
    ft = FineTune(method="full")
    floor = floor_gpus(llama3_70b(), SYS, dict(finetune=ft))
    assert floor >= 8
    assert not plan(llama3_70b(), floor - 1 if floor - 1 <= 8 else 8, SYS, 16, finetune=ft,
                    pins=PINS).plans


def test_min_gpus_says_each_world_it_prices_and_counts_them_all():
    seen = []
    n, result = min_gpus(llama3_70b(), SYS, 16, 1024, on_world=lambda *w: seen.append(w),
                         finetune=FineTune(method="full"), pins=PINS, top=1)
    assert [w[0] for w in seen][-1] == n and [w[1] for w in seen] == list(
        range(1, len(seen) + 1))
    assert 1 <= result.worlds <= len(seen)  # a world the batch does not divide is skipped
    assert seen[0][0] >= floor_gpus(llama3_70b(), SYS, dict(finetune=FineTune(method="full")))


def test_the_header_counts_the_whole_sweep():
    from test_bad_input import run

    code, out, _ = run(["plan", "llama3-70b", "--finetune", "full", "--min-gpus", "--top", "1",
                        "--max-tp", "2", "--no-cp", "--no-hsdp"])
    head = out.splitlines()[0]
    assert code == 0 and " worlds costed in " in head, head
