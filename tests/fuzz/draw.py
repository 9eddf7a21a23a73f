# SPDX-License-Identifier: Apache-2.0
"""What the fuzzer draws: values (normal, huge, subnormal, zero, NaN and inf sprinkled in),
tensors laid out every way a caller can hand them over (contiguous, strided, with a storage
offset that misaligns the data pointer, expanded with stride 0, negated views, the imaginary
part of a conjugate), and hostile non-tensor arguments.

Everything comes from one ``random.Random`` per input, seeded from (run seed, input index), so
any input is replayed alone from its two numbers (tests/fuzz/run.py --replay)."""
from __future__ import annotations

import random

import torch

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
# dtypes no op takes as a float input: each must be refused by dtype
ODD_DTYPES = (torch.float64, torch.int32, torch.int8, torch.uint8, torch.bool, torch.complex64,
              torch.float8_e4m3fn, torch.int64)
PRIMES = (1, 2, 3, 5, 7, 13, 31, 67, 127)


class Draw:
    """The random source of one input."""

    def __init__(self, seed: int, index: int):
        self.r = random.Random(seed * 1_000_003 + index)
        self.g = torch.Generator().manual_seed(self.r.getrandbits(62))

    # ---- plain choices ----
    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def pick(self, items):
        return items[self.r.randrange(len(items))]

    def int_in(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def extent(self, small: int = 9) -> int:
        """A dimension: mostly small, sometimes 0, 1 or a prime."""
        u = self.r.random()
        if u < 0.05:
            return 0
        if u < 0.2:
            return 1
        if u < 0.4:
            return self.pick(PRIMES[:6])
        return self.int_in(1, small)

    def multiple(self, unit: int, most: int = 4) -> int:
        """A multiple of unit (0 rarely)."""
        return unit * (0 if self.chance(0.03) else self.int_in(1, most))

    def float_dtype(self, p_odd: float = 0.03) -> torch.dtype:
        return self.pick(ODD_DTYPES) if self.chance(p_odd) else self.pick(FLOATS)

    # ---- values ----
    def values(self, shape, dtype: torch.dtype) -> torch.Tensor:
        """A float tensor of one of the value families, in float32 before the cast."""
        n = 1
        for s in shape:
            n *= s
        kind = self.r.random()
        if kind < 0.45:
            x = torch.randn(n, generator=self.g) * 10.0 ** self.r.uniform(-3, 3)
        elif kind < 0.55:  # at the dtype's limits
            fmax = torch.finfo(dtype).max if dtype.is_floating_point else 127.0
            x = (torch.rand(n, generator=self.g) * 2 - 1) * min(fmax, 3e38)
        elif kind < 0.65:  # subnormal (of the dtype), with zeros
            tiny = torch.finfo(dtype).tiny if dtype.is_floating_point else 1.0
            x = (torch.rand(n, generator=self.g) * 2 - 1) * tiny * 0.9
        elif kind < 0.72:
            x = torch.zeros(n)
        elif kind < 0.8:  # small integers: ties of the int8 and e2m1 grids
            x = torch.randint(-12, 13, (n,), generator=self.g).float() * 0.5
        else:
            x = torch.randn(n, generator=self.g) * 3
        if n and self.chance(0.15):  # NaN / inf / -0.0 sprinkled in
            for _ in range(self.int_in(1, 3)):
                x[self.int_in(0, n - 1)] = self.pick((float("nan"), float("inf"), -float("inf"), -0.0))
        return x.to(dtype).reshape(shape) if dtype.is_floating_point else x.reshape(shape).to(dtype)

    def codes(self, shape, dtype=torch.int8) -> torch.Tensor:
        lo, hi = (-128, 128) if dtype == torch.int8 else (0, 256)
        return torch.randint(lo, hi, tuple(shape), generator=self.g, dtype=torch.int32).to(dtype)

    # ---- layouts ----
    def layout(self, t: torch.Tensor, p: float = 0.35) -> torch.Tensor:
        """t itself, or the same values in another layout (same shape, same values)."""
        if not self.chance(p) or t.numel() == 0:
            return t
        how = self.r.random()
        if how < 0.25:  # storage offset of 1..3 elements: a data pointer off 16-byte alignment
            off = self.int_in(1, 3)
            base = torch.empty(t.numel() + off, dtype=t.dtype)
            view = base[off:].view(t.shape)
            view.copy_(t)
            return view
        if how < 0.45 and t.dim() >= 1:  # every other element of a wider buffer
            wide = torch.empty((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype)
            view = wide[..., ::2]
            view.copy_(t)
            return view
        if how < 0.6 and t.dim() >= 2:  # a transposed buffer, transposed back
            return t.transpose(-1, -2).contiguous().transpose(-1, -2)
        if how < 0.75 and t.dtype.is_floating_point and t.dtype != torch.bool:
            return torch._neg_view(-t)  # the negation bit on the negated values
        if how < 0.85 and t.dtype in (torch.float32,):  # -imag(z) of conj(z): a negated, strided view
            z = torch.complex(torch.zeros_like(t), -t)
            return z.conj().imag
        if t.dim() >= 1 and t.shape[0] > 1 and bool((t == t[:1]).all()):
            return t[:1].expand(t.shape)  # stride 0 (only where the rows agree)
        return t.clone()

    def expanded_huge(self, dtype, rows: int, cols: int) -> torch.Tensor:
        """rows x cols without the memory: one element expanded (rows and cols up to 2^40)."""
        return torch.zeros(1, 1, dtype=dtype).expand(rows, cols)

    # ---- hostile non-tensor values ----
    def junk(self):
        return self.pick((None, "x", 1.5, -1, 2**70, True, [1.0], object(), float("nan"), torch.tensor([1, 2])))

    def group(self, k: int | None = None) -> int:
        """A Hadamard group size: mostly one that divides k (4..1024), sometimes a bad one."""
        u = self.r.random()
        if u < 0.08:
            return self.pick((0, -4, 2, 3, 8, 32, 2048, 4096, 2**40, 64.0, True, None, "16"))
        # mostly the small groups: a row of a few groups keeps an input cheap (eager's rotation is a matmul)
        groups = [g for g in (4, 16, 4, 16, 64, 64, 256, 1024) if k is None or (k and k % g == 0)]
        return self.pick(groups) if groups else 4
