"""What one layer (and the embedding and output head) holds under a fine-tune, by state
class and by how tensor and expert parallelism divide it.

Four classes of parameter, each with its own bytes (``ledger.placement.tuned`` prices
them in the framework's dtypes):

  trained   base parameters that train (a full fine-tune, less what is frozen)
  frozen    base parameters kept as loaded, no gradient, no optimizer state
  nf4       QLoRA: the frozen nn.Linear weights bitsandbytes quantises (not biases,
            norms, embeddings, the output head or transformers 5's fused experts)
  adapters  LoRA A and B (and DoRA's magnitude), which train

Each is a ``Counts`` of (split by TP, replicated, routed over the expert grid). An
adapter on a column-parallel matrix keeps A (in x r) whole and splits B (r x out) with
the outputs; on a row-parallel one it splits A with the inputs and keeps B whole - peft's
Megatron layers (tuners/lora/tp_layer.py L40-160), torchtitan's LoRA converter
(torchtitan/components/lora.py L23-54) and peft on DTensor shards (local shapes,
tuners/tuners_utils.py L176-186) all agree.
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.finetune import lora, modules
from ledger.finetune.spec import FineTune
from ledger.model import ModelSpec

CLASSES = ("trained", "frozen", "nf4", "adapters")


@dataclass(frozen=True)
class Counts:
    """Parameters by how they are divided: by tp, by nothing, by the expert grid."""

    split: float = 0.0
    repl: float = 0.0
    routed: float = 0.0

    def __add__(self, o: Counts) -> Counts:
        return Counts(self.split + o.split, self.repl + o.repl, self.routed + o.routed)

    def __sub__(self, o: Counts) -> Counts:
        return Counts(self.split - o.split, self.repl - o.repl, self.routed - o.routed)

    def scaled(self, k: float) -> Counts:
        return Counts(self.split * k, self.repl * k, self.routed * k)

    @property
    def total(self) -> float:
        return self.split + self.repl + self.routed

    def per_gpu(self, tp, expert_grid) -> tuple:
        """(dense, expert) parameters on one GPU."""
        return self.split / tp + self.repl, self.routed / expert_grid


NONE = Counts()


def _weights(lin: modules.Linear) -> Counts:
    n = lin.weights
    if lin.experts > 1:
        return Counts(routed=n)
    return Counts(split=n) if lin.split != "none" else Counts(repl=n)


def _adapter(a: lora.Adapter) -> Counts:
    """An adapter's parameters by division (module docstring)."""
    t, r = a.target, a.rank
    if t.experts > 1:
        return Counts(routed=a.params)
    a_in, b_out = r * t.in_features, r * t.out_features + a.dora * t.out_features
    if t.split == "col":
        return Counts(split=b_out, repl=a_in)
    if t.split == "row":
        return Counts(split=a_in, repl=b_out)
    return Counts(repl=a_in + b_out)


def _base(parts: dict, trains, quantised: dict) -> dict[str, Counts]:
    """The base parameters of ``parts`` (kind -> (split, repl, routed)) by class."""
    out = dict.fromkeys(CLASSES, NONE)
    for kind, (s, r, e) in parts.items():
        whole = Counts(s, r, e)
        if trains(kind):
            out["trained"] += whole
        else:
            q = quantised.get(kind, NONE)
            out["nf4"] += q
            out["frozen"] += whole - q
    return out


def layer_state(model: ModelSpec, ft: FineTune, i: int,
                targets: lora.Targets | None = None) -> dict[str, Counts]:
    """Layer ``i`` by class (CLASSES) and division."""
    kind = model.layer_kind(i)
    frozen_layer = ft.frozen_layer(i)
    quantised: dict[str, Counts] = {}
    if ft.quantized:
        for lin in modules.layer(model, kind):
            if lin.quantised:  # bitsandbytes replaces nn.Linear / Conv1D only
                quantised[lin.kind] = quantised.get(lin.kind, NONE) + _weights(lin)
    out = _base(model.layer_parts(kind), lambda part: not ft.adapters and not frozen_layer
                and part not in ft.freeze, quantised)
    for a in lora.layer_adapters(model, ft, i, targets):
        out["adapters"] += _adapter(a)
    return out


def edge_state(model: ModelSpec, ft: FineTune, kind: str,
               targets: lora.Targets | None = None) -> dict[str, Counts]:
    """The embedding (with learned positions), the final norm or the output head by class;
    ``kind`` one of "embedding", "positions", "norms", "output". A tied output head is
    the embedding's matrix (``ledger.placement.stages`` places its copy)."""
    b = model.breakdown
    parts = {"embedding": (b["embedding"], 0, 0), "positions": (0, b["positions"], 0),
             "norms": (0, model.norm_size, 0),
             "output": (b["output"] or b["embedding"], 0, 0)}
    out = _base({kind: parts[kind]}, lambda k: not ft.adapters and k not in ft.freeze, {})
    for a in lora.edge_adapters(model, ft, targets, kind):
        out["adapters"] += _adapter(a)
    return out


def trainable(model: ModelSpec, ft: FineTune) -> dict[str, int]:
    """Trainable parameters by component (as ``ModelSpec.breakdown`` names them) -
    what peft's ``get_nb_trainable_parameters`` counts in total. A tied output head is
    the embedding: counted once, under "embedding"."""
    targets = lora.resolve(model, ft) if ft.adapters else None
    out = {k: 0 for k in model.breakdown}
    for i in range(model.layers):
        if ft.adapters:
            for a in lora.layer_adapters(model, ft, i, targets):
                out[a.target.kind] += a.params
        elif not ft.frozen_layer(i):
            for kind, (s, r, e) in model.layer_parts(model.layer_kind(i)).items():
                out[kind] += (kind not in ft.freeze) * (s + r + e)
    if ft.adapters:
        for a in lora.edge_adapters(model, ft, targets):
            out[a.target.kind] += a.params
    else:
        b = model.breakdown
        out["embedding"] += b["embedding"] * ("embedding" not in ft.freeze)
        out["positions"] += b["positions"] * ("positions" not in ft.freeze)
        out["norms"] += model.norm_size * ("norms" not in ft.freeze)
        out["output"] += b["output"] * ("output" not in ft.freeze)
    return out
