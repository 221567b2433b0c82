"""A tiny Llama in plain torch (GQA, SwiGLU, RMSNorm, rotary), and its ModelSpec.

Sizes divide by 4 everywhere, so FSDP2's per-parameter dim-0 sharding needs no padding
and TP can split heads, K/V heads and the MLP over 2 or 4 ranks.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ledger.model import ModelSpec

LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, SEQ = 2, 64, 4, 2, 128, 128, 16


def spec(seq: int = SEQ) -> ModelSpec:
    return ModelSpec(name="tiny-llama", layers=LAYERS, hidden=HIDDEN, heads=HEADS,
                     kv_heads=KV_HEADS, ffn_hidden=FFN, vocab=VOCAB, seq_len=seq)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * (x * r)


def rotary(seq: int, dim: int, device=None):
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=device).float() / dim))
    ang = torch.outer(torch.arange(seq, device=device).float(), inv)
    emb = torch.cat([ang, ang], -1)
    return emb.cos(), emb.sin()


def _rotate_half(x):
    a, b = x.chunk(2, -1)
    return torch.cat([-b, a], -1)


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, flash: bool = True):
        super().__init__()
        self.heads, self.kv_heads, self.dim = heads, kv_heads, hidden // heads
        self.wq = nn.Linear(hidden, heads * self.dim, bias=False)
        self.wk = nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.wv = nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.wo = nn.Linear(heads * self.dim, hidden, bias=False)
        self.flash = flash
        self.selective = False  # recompute the attention core in the backward (Korthikanti)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, self.dim).transpose(1, 2)
        k = self.wk(x).view(b, s, -1, self.dim).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, self.dim).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        if self.flash:  # a fused kernel: GQA natively, no score matrix kept
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            rep = q.shape[1] // k.shape[1]  # local heads per local K/V head (TP keeps it)
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            core = self.core if not self.selective else (
                lambda *a: checkpoint(self.core, *a, use_reentrant=False))
            out = core(q, k, v)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))

    def core(self, q, k, v):
        """Materialised attention, as pre-2022 kernels ran it: scores, mask, softmax."""
        s = q.shape[2]
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.dim)
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        return torch.softmax(scores.masked_fill(mask, float("-inf")), -1) @ v


class MLP(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    """``norm=nn.RMSNorm`` gives torchtitan's llama3 block (nn.RMSNorm, SDPA with
    enable_gqa, w2(silu(w1 x) * w3 x)) in place of the op-by-op RMSNorm above."""

    def __init__(self, hidden=HIDDEN, heads=HEADS, kv_heads=KV_HEADS, ffn=FFN, flash=True,
                 norm=RMSNorm):
        super().__init__()
        self.attn_norm = norm(hidden, eps=1e-6)
        self.attn = Attention(hidden, heads, kv_heads, flash)
        self.mlp_norm = norm(hidden, eps=1e-6)
        self.mlp = MLP(hidden, ffn)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class TinyLlama(nn.Module):
    def __init__(self, seq: int = SEQ, flash: bool = True):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Block(flash=flash) for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN)
        self.output = nn.Linear(HIDDEN, VOCAB, bias=False)
        cos, sin = rotary(seq, HIDDEN // HEADS)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.output(self.norm(x))


def batch(seed: int, micro_batch: int = 2, seq: int = SEQ):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (micro_batch, seq + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
