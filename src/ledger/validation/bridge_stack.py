"""What each Megatron-Bridge release's container ran beneath Megatron-Core, where the ledger
prices a difference: the TransformerEngine its uv.lock pins (the fused grouped MLP's recipes,
``ledger.step.eager.FUSED_MLP_RECIPES_AT``) and the torch its base image ships (PyTorch's
own cuBLAS workspace, ``ledger.placement.buffers``). A row's release is its recipe's ref
(``ledger.validation.bridge.BridgeRow.recipe``)."""
from __future__ import annotations

# The TransformerEngine each release's recipes ran (uv.lock at the tag: L4872-4873 @ v0.5.0,
# L4854-4855 @ v0.5.1, L4866-4867 @ v0.6.0); the fused grouped MLP's recipes follow it
# (ledger.step.eager.FUSED_MLP_RECIPES_AT). No earlier release sets the fused MLP.
RELEASE_TE = {"v0.5.0": "4220403e", "v0.5.1": "b9d690e0", "v0.6.0": "4329ff84"}

# The torch each release's container ran (docker/Dockerfile.ci BASE_IMAGE at the tag:
# nvcr.io/nvidia/pytorch 25.11 at v0.3.x, 26.02 at v0.4.x, 26.04 at v0.5.x, 26.06 at
# v0.6.0; docs/releases/software-versions.md: 2.10.0a0, 2.11.0a0+eb65b36914.nv26.02,
# 2.12.0a0+0291f960b6; 25.09 / 25.11's 2.8.0a0, 2.9.0a0 before them). Those before 26.04's
# precede pytorch/pytorch#175344 (merged 2026-02-19; 26.02's is a 2.11.0a0 main snapshot
# in a February container, taken as before it, its commit not checked): PyTorch's own
# cuBLAS workspace is ":4096:2:16:8" off sm_90 there (ledger.placement.buffers).
TORCH_BEFORE_175344 = ("v0.1.0rc3", "v0.2.0", "v0.3.0", "v0.3.1", "v0.4.0", "v0.4.1", "v0.4.2")


def torch_workspace_of(row) -> int | None:
    """PyTorch's cuBLAS workspace bytes the row's container defaults to on its Blackwell GPU
    where it differs from the ledger's torch (TORCH_BEFORE_175344), else None (the default)."""
    from ledger.placement.buffers import TORCH_WORKSPACE_BYTES
    from ledger.system import GPUS

    blackwell = getattr(GPUS.get(row.gpu), "generation", "") == "blackwell"
    old = blackwell and row.recipe.get("ref") in TORCH_BEFORE_175344
    return TORCH_WORKSPACE_BYTES if old else None


def te_fused_mlp(row) -> tuple[str, ...]:
    """The recipes the TransformerEngine ``row``'s release pins (RELEASE_TE) runs the fused
    grouped MLP in; () before v0.5.0."""
    from ledger.step.eager import FUSED_MLP_RECIPES_AT

    te = RELEASE_TE.get(row.recipe.get("ref"))
    return FUSED_MLP_RECIPES_AT[te] if te else ()


def fused_mlp_of(row, precision: str | None) -> bool:
    """Whether the row ran TE's fused grouped MLP: a MoE recipe setting the op fuser (the 0.5
    configs' cutedsl_fused_grouped_mlp, the 0.6 recipes' use_transformer_engine_op_fuser) in
    a recipe the TE its release pins fuses (``te_fused_mlp``; ``precision``: the ledger's)."""
    fuser = True in (row.setting("cutedsl_fused_grouped_mlp"),
                     row.setting("use_transformer_engine_op_fuser"))
    recipe = str(precision).split("+")[0].split("-")[-1]
    return bool(row.moe and fuser and recipe in te_fused_mlp(row))
