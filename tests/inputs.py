# SPDX-License-Identifier: Apache-2.0
"""Synthetic inputs for the parity tests: each case is a name and a builder
(rows, cols, dtype) -> tensor.  Edge cases follow the foundation issue."""
import torch


def normal(rows, cols, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, cols, generator=g) * 3).to(dtype)


def outliers(rows, cols, dtype):
    x = normal(rows, cols, dtype, seed=1).float()
    x[:, :: max(cols // 7, 1)] *= 40  # a few large channels, as in DiT activations
    return x.to(dtype)


def zero_rows(rows, cols, dtype):
    x = normal(rows, cols, dtype, seed=2)
    x[::2] = 0
    return x


def denormals(rows, cols, dtype):
    """Values in the dtype's subnormal range (and some zeros)."""
    tiny = torch.finfo(dtype).tiny
    g = torch.Generator().manual_seed(3)
    x = torch.rand(rows, cols, generator=g) * tiny * 0.9
    x[:, ::3] *= -1
    return x.to(dtype)


def at_limits(rows, cols, dtype):
    """Row maxima at the dtype's largest finite value, mixed with small values."""
    x = normal(rows, cols, dtype, seed=4).float()
    big = torch.finfo(dtype).max
    x[:, 0] = big
    x[1::2, 1] = -big
    return x.to(dtype)


CASES = {
    "normal": normal,
    "outliers": outliers,
    "zero_rows": zero_rows,
    "denormals": denormals,
    "at_limits": at_limits,
}


# ---- a CPU tensor that claims to be on a GPU (the routing tests, without a GPU) ----

class FakeCudaTensor(torch.Tensor):
    """A CPU tensor that claims to be on cuda:<fake_device_index> (0 here; a subclass sets
    another), to test the compute-capability and per-device rules without a GPU."""
    fake_device_index = 0

    @property
    def is_cuda(self):
        return True

    @property
    def device(self):
        return torch.device("cuda", self.fake_device_index)
