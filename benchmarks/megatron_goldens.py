"""Megatron-LM's functional tests against the memory model: every golden file that logs
``mem-max-allocated-bytes`` (ledger.validation.megatron_goldens, at the Megatron-LM commit its
data file names), each case's launch read by ``--from-megatron`` as a user's file is
(ledger.cli.goldens), the last rank's peak and after-step bytes against the golden's last
step; the goldens the rule or the reader leaves out, counted with why; the summary by
family, platform and feature. Then the memory validation's measured rows
(ledger.validation.memory) with and without these rows (the memory_speed cases it already
holds counted once)."""
from ledger.cli.goldens import price
from ledger.render.goldens import goldens_table
from ledger.validation.megatron_goldens import goldens


def held(golden) -> bool:
    """The golden is one of memory.py's own Megatron rows (its memory_speed cases)."""
    from ledger.validation.memory import peaks

    for r in peaks():
        words = r.label.split()
        case = next((w for w in words if w.endswith("memory_speed")), None)
        if case and golden.case.endswith(case) and golden.platform == \
                words[words.index(case) + 1]:
            return True
    return False


def joined(priced) -> list[str]:
    """benchmarks/memory.py's measured rows' summary alone, and with these rows."""
    from ledger.validation.memory import error, peaks

    own = [error(r) for r in peaks() if r.metric != "outcome" and r.role != "chosen"]
    new = [p.error for p in priced if not held(p.golden)]
    peaks_only = [p.error for p in priced if not held(p.golden) and p.metric == "allocated"]
    out = []
    for name, errs in (("memory.py's measured rows", own), ("with these rows", own + new),
                       ("with their max-alloc rows", own + peaks_only)):
        out.append(f"{name:<26} mean |error| {sum(map(abs, errs)) / len(errs):5.1%}  signed "
                   f"{sum(errs) / len(errs):+6.1%}  max {max(map(abs, errs)):5.1%}  "
                   f"({len(errs)} rows)")
    return out


if __name__ == "__main__":
    rows = goldens()
    priced, left = price(rows)
    print(goldens_table(rows, priced, left))
    print("\n".join(joined(priced)))
