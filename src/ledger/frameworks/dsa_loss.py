"""Megatron's indexer loss for DeepSeek-V4's compressed sparse attention
(``ParallelConfig.indexer_loss``): the KL divergence that trains the lightning indexer to
match the main attention's distribution over the compressed entries.

Read off Megatron-LM's dev branch, the commit Megatron-Bridge 0.6.0 pins for DeepSeek-V4
(``.dev.commit`` 43e45e13074f36da68b34c7a189cd997a01d1b41):
megatron/core/transformer/transformer_config.py L337-342 (``dsa_indexer_loss_coeff``, default
None: no loss; ``dsa_indexer_use_sparse_loss``, default False: the dense loss) and
megatron/core/transformer/experimental_attention_variant/csa_kernels.py
(``FusedCSAIndexerSparseAttnFunc``, the training path under ``apply_dsa_kernel_fusion``,
csa.py L1870-1921):

- the indexer reads detached inputs (csa.py L1886-1887): the loss trains the indexer alone;
- its scores over every causal compressed entry are computed for the top-k either way
  (L1098-1110; ``ledger.step.gemm.indexer_core_s``);
- the loss's target is the main attention's softmax over the compressed entries, computed
  again from the attention's q (every head, head_dim wide) and the compressed keys: over
  the indexer's top-k (``sparse``, ``_compute_attn_target`` L1198-1235) or over every
  causal entry (``dense``, ``_compute_dense_attn_score`` L1236-1272);
- the indexer's backward (d q_I, d k_I, d weights) runs eagerly in the forward over the
  same entries (L1274-1367) and is saved; the backward only scales it (L1014-1016). With
  no loss the saved gradients are zeros (L1368-1371): the indexer's scores have no
  backward.

``INDEXER_LOSSES``: "none" (Megatron's default), "sparse", "dense";
``ledger.step.indexer_loss`` prices it. Not priced: the loss's transient working memory,
the target its forward builds and frees (the main attention's softmax summed over heads,
``_compute_attn_target`` L762-790 and ``_compute_dense_attn_score`` L890-928: tokens x
top-k under the sparse loss, tokens x every causal compressed key under the dense one,
L1198-1272) - the memory figures leave it out.
"""
from __future__ import annotations

from ledger.errors import LedgerError

INDEXER_LOSSES = ("none", "sparse", "dense")


def check_indexer_loss(cfg, fw) -> None:
    """The config's indexer loss is one of ``INDEXER_LOSSES``, and on only under Megatron
    (``framework_problem``): refused at construction, for the Python API and the CLI
    alike."""
    got = getattr(cfg, "indexer_loss", "none")
    if got not in INDEXER_LOSSES:
        raise LedgerError("indexer_loss", f"must be one of {', '.join(INDEXER_LOSSES)}, got "
                                          f"{got!r}")
    if (why := framework_problem(got, fw, cfg.framework)) is not None:
        raise LedgerError("indexer_loss", why)


def framework_problem(loss: str | None, fw, name: str) -> str | None:
    """Why ``loss`` cannot run under the framework ``fw`` (named ``name``), or None: what
    is priced is Megatron's fused kernel with its eager backward (csa_kernels.py
    L1274-1371 @43e45e13), a setting only Megatron has (dsa_indexer_loss_coeff,
    transformer_config.py L337-342 @43e45e13); another framework's step would price a
    loss it does not run."""
    if loss in (None, "none") or fw.family == "megatron":
        return None
    return (f"--dsa-indexer-loss {loss} is a Megatron setting (dsa_indexer_loss_coeff); "
            f"--framework {name} has none: drop it or use --framework megatron")


def check_held_loss(loss: str | None, fw, name: str) -> None:
    """The planner's check of the loss its run holds (``ledger.plan.search.plan``), the
    config's (``framework_problem``): the search under another framework - the CLI's
    DualPipe advice under deepseek among them - refused, not priced with the loss."""
    if (why := framework_problem(loss, fw, name)) is not None:
        raise LedgerError("indexer_loss", why)

def of_megatron(coeff, sparse) -> str:
    """The loss a Megatron config runs: none unless ``dsa_indexer_loss_coeff`` > 0, then
    sparse or dense by ``dsa_indexer_use_sparse_loss`` (default False)."""
    if not isinstance(coeff, (int, float)) or isinstance(coeff, bool) or coeff <= 0:
        return "none"
    return "sparse" if sparse is True else "dense"


def model_problem(model, loss: str) -> str | None:
    """Why ``loss`` prices nothing for ``model`` (a typed flag is then refused): the ledger
    prices the loss of DeepSeek-V4's CSA layers only (a DSA model's own indexer loss,
    Megatron's dsa.py, is not modelled); None where it applies or is off."""
    if loss == "none" or (getattr(model, "attention", None) == "csa"
                          and getattr(model, "index_heads", 0)):
        return None
    return (f"--dsa-indexer-loss {loss}: priced on DeepSeek-V4's CSA layers (attention csa "
            f"with an indexer); {model.name} has none")
