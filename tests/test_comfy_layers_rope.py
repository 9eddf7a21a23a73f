# SPDX-License-Identifier: Apache-2.0
"""ComfyUI's attention blocks call comfy_kitchen's RoPE ops through the registry (issue 21, item 3
for RoPE): a small block of each kind, as ComfyUI's models build them, forward under
torch.inference_mode() and torch.no_grad(), with every op call counted per backend and checked
against eager's on the same arguments (test_comfy_layers.served: bit for bit).

- WAN (comfy/ldm/wan/model.py, WanSelfAttention): q = norm_q(self.q(x)).view(b, s, n, d), an
  RMSNorm over all n * d channels (so not per head), then apply_rope1(q, freqs) with freqs_cis
  [1, L, 1, D/2, 2, 2]; the same for k.
- Flux (comfy/ldm/flux/layers.py and math.py): qkv [B, L, 3, H, D] permuted to q, k, v [B, H, L, D],
  QKNorm (an RMSNorm per head, scale [D]) and then RoPE with pe [B, 1, L, D/2, 2, 2]: one
  rms_rope(q, k, pe, q_scale, k_scale) call.

The whole block's output is also compared with the same block run on eager alone."""
import contextlib

import pytest
import torch
import torch.nn.functional as F

import comfy_kitchen as ck
from comfy_kitchen.backends.eager import rope as E

from conftest import assert_bitwise_equal
from test_comfy_layers import served

B, L, H, D = 1, 12, 4, 64
C = H * D


def _freqs(batch: int, positions: int, d: int) -> torch.Tensor:
    """ComfyUI's rope(pos, dim, theta): [batch, L, d/2, 2, 2] of cos, -sin, sin, cos, float32."""
    pos = torch.arange(positions, dtype=torch.float32).expand(batch, positions)
    scale = torch.linspace(0, (d - 2) / d, steps=d // 2, dtype=torch.float64)
    omega = 1.0 / (10000 ** scale)
    out = torch.einsum("...n,d->...nd", pos, omega)
    out = torch.stack([torch.cos(out), -torch.sin(out), torch.sin(out), torch.cos(out)], dim=-1)
    return out.reshape(*out.shape[:-1], 2, 2).float()


class Weights:
    def __init__(self, dtype):
        g = torch.Generator().manual_seed(0)
        self.qkv = (torch.randn(3 * C, C, generator=g) / C ** 0.5).to(dtype)
        self.out = (torch.randn(C, C, generator=g) / C ** 0.5).to(dtype)
        self.norm_q_wan = (torch.rand(C, generator=g) + 0.5).to(dtype)
        self.norm_k_wan = (torch.rand(C, generator=g) + 0.5).to(dtype)
        self.q_scale = (torch.rand(D, generator=g) + 0.5).to(dtype)
        self.k_scale = (torch.rand(D, generator=g) + 0.5).to(dtype)


def wan_block(w: Weights, x: torch.Tensor, freqs: torch.Tensor, rope1) -> torch.Tensor:
    b, s, _ = x.shape
    q, k, v = F.linear(x, w.qkv).chunk(3, dim=-1)
    q = F.rms_norm(q, (C,), w.norm_q_wan, 1e-6).view(b, s, H, D)
    k = F.rms_norm(k, (C,), w.norm_k_wan, 1e-6).view(b, s, H, D)
    q, k = rope1(q, freqs), rope1(k, freqs)
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.view(b, s, H, D).transpose(1, 2))
    return F.linear(o.transpose(1, 2).reshape(b, s, C), w.out)


def flux_block(w: Weights, x: torch.Tensor, pe: torch.Tensor, rms_rope) -> torch.Tensor:
    b, s, _ = x.shape
    q, k, v = F.linear(x, w.qkv).view(b, s, 3, H, D).permute(2, 0, 3, 1, 4)
    q, k = rms_rope(q, k, pe, w.q_scale, w.k_scale, 1e-6)
    o = F.scaled_dot_product_attention(q, k, v)
    return F.linear(o.transpose(1, 2).reshape(b, s, C), w.out)


@pytest.mark.parametrize("mode", [torch.inference_mode, torch.no_grad], ids=["inference_mode", "no_grad"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_wan_and_flux_blocks_run_rope_in_c(activated, mode, dtype):
    w = Weights(dtype)
    x = torch.randn(B, L, C, generator=torch.Generator().manual_seed(1)).to(dtype)
    wan_freqs = _freqs(1, L, D).unsqueeze(2)      # [1, L, 1, D/2, 2, 2]
    flux_pe = _freqs(B, L, D).unsqueeze(1)        # [B, 1, L, D/2, 2, 2]
    with mode(), served() as calls:
        wan = wan_block(w, x, wan_freqs, ck.apply_rope1)
        flux = flux_block(w, x, flux_pe, ck.rms_rope)
    assert calls == {("apply_rope1", "c"): 2, ("rms_rope", "c"): 1}, calls
    with contextlib.ExitStack() as stack:
        stack.enter_context(mode())
        wan_ref = wan_block(w, x, wan_freqs, E.apply_rope1)
        flux_ref = flux_block(w, x, flux_pe, E.rms_rope)
    assert_bitwise_equal(wan, wan_ref, "WAN block")
    assert_bitwise_equal(flux, flux_ref, "Flux block")
