# SPDX-License-Identifier: Apache-2.0
"""quantize_w4a8_int8_weight of backend "c" (comfy_kitchen 0.2.40's signature): a floating weight
into W4A8 / W6A8 storage (qdata, s_rel, s_channel, correction, codebook).  Re-exported by
``comfy_kitchen_c.ops``.

The work per value is C's: the rotation (rotate_int8_convrot_weight's C op) and the quantizer
on the rotated weight (the C op quantize_w4a8_int8_weight, csrc/math/w4a8_quant.h: group scales,
two ALS passes, the int8-grid codes, the 6-bit scale search, the uniform and asymmetric forms),
on CPU and CUDA tensors.  Two things stay torch's, as eager computes them, because they are
decisions from seeded samples, not per-value work:

* the codebook (4 bits, symmetric, no codebook_tensor given): a kurtosis gate over up to 2^19
  seeded samples of the group-normalized rotated weight, then eager's frozen table or a Lloyd-Max
  fit (torch.quantile, 25 passes over 300,000 samples), on a sample of at most 2^22 values;
* the noise of stochastic rounding: torch.rand from eager's seed per chunk of rows.

The rows go through in eager's chunks (2^22 values), each chunk's noise seeded as eager seeds it,
so the call adds a chunk's worth of memory (its rotated copy, its noise, its scratch), and the
codebook's choice a sample of at most 2^22 values.  Parity (docs/parity.md): on the same
rotated weight the codes, scales and correction are eager's bit for bit; our rotation is within
the rotated ops' bound of eager's, so a value that lies that close to a decision boundary may
take the neighbouring code."""
from __future__ import annotations

import torch

from . import _checks as check
from ._C import ArgumentError, ArgumentTypeError
from ._call import _run
from ._proved import checked as _checked

_SCALE_DTYPES = (torch.float32, torch.float8_e4m3fn)
MODE_ALS, MODE_UNIFORM, MODE_ASYM = 0, 1, 2   # csrc/math/w4a8_quant.h's ckc_w4a8q_mode
CHUNK_VALUES = 1 << 22                         # eager's rows per chunk: this many values
CODEBOOK_SAMPLE_VALUES = 1 << 22               # the codebook's row sample (eager's)
KURTOSIS_SAMPLE = 1 << 19                      # the gate's value sample
KURTOSIS_GATE = -0.1                           # excess kurtosis at or below: the frozen table
FIT_SAMPLE, FIT_PASSES, LEVELS = 300000, 25, 16


def _frozen_table(device) -> torch.Tensor:
    from comfy_kitchen.tensor.w4a8_packed import default_w4a8_codebook
    return default_w4a8_codebook().to(device)


# ---- the codebook: torch's sampling, as eager's ------------------------------------------------

def _fit(values: torch.Tensor) -> torch.Tensor:
    """A 16-level Lloyd-Max table fitted to a seeded sample of the values: quantile start, then
    each level the mean of the samples nearest it (a level no sample is nearest keeps its value)."""
    samples = values.flatten()
    if samples.numel() > FIT_SAMPLE:
        pick = torch.randint(0, samples.numel(), (FIT_SAMPLE,), device=samples.device,
                             generator=torch.Generator(device=samples.device).manual_seed(0))
        samples = samples[pick]
    samples = samples.float()
    table = torch.quantile(samples, torch.linspace(0, 1, LEVELS, device=samples.device))
    for _ in range(FIT_PASSES):
        nearest = (samples.unsqueeze(-1) - table).abs().argmin(-1)
        moved = table.clone()
        for level in range(LEVELS):
            mine = nearest == level
            if mine.any():
                moved[level] = samples[mine].mean()
        table = moved
    return table.contiguous()


def _table_for(normalized: torch.Tensor) -> torch.Tensor:
    """The frozen table unless the group-normalized values are heavy-tailed (excess kurtosis of
    a seeded sample above the gate), then a fitted one."""
    x = normalized.detach().flatten()
    if x.numel() > KURTOSIS_SAMPLE:
        pick = torch.randint(0, x.numel(), (KURTOSIS_SAMPLE,), device=x.device,
                             generator=torch.Generator(device=x.device).manual_seed(0))
        x = x[pick]
    x = x.float()
    excess = ((x - x.mean()) / (x.std() + 1e-9)).pow(4).mean() - 3.0
    if excess.item() <= KURTOSIS_GATE:
        return _frozen_table(normalized.device)
    return _fit(normalized)


def _decide_table(op: str, weight: torch.Tensor, group: int, convrot: int) -> torch.Tensor:
    """One table for the whole weight, from evenly strided rows (at most CODEBOOK_SAMPLE_VALUES
    values), rotated by our C op and normalized per group by its absmax."""
    n, k = weight.shape
    most = max(1, CODEBOOK_SAMPLE_VALUES // max(k, 1))
    sample = weight.index_select(0, torch.linspace(0, n - 1, most, device=weight.device).long()) if n > most \
        else weight
    grouped = _rotated(op, sample.contiguous(), convrot).float().view(sample.shape[0], k // group, group)
    return _table_for(grouped / grouped.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8))


# ---- the C ops -------------------------------------------------------------------------------

def _rotated(op: str, w: torch.Tensor, convrot: int) -> torch.Tensor:
    out = torch.empty_like(w)
    if w.numel():
        _run("rotate_int8_convrot_weight", op, w.device, (w, out), (convrot,))
    return out


def _noise(rows: int, k: int, group: int, mode: int, seed: int, device) -> torch.Tensor | None:
    """Stochastic rounding's uniform values for a chunk, drawn as eager draws them: float32 in
    the shape of the tensor eager rounds ([rows * groups, group] on the grid, else
    [rows, groups, group]: the same values in the same order), from its seed."""
    if seed <= 0:
        return None
    shape = (rows * (k // group), group) if mode == MODE_ALS else (rows, k // group, group)
    return torch.rand(shape, generator=torch.Generator(device=device).manual_seed(seed), device=device,
                      dtype=torch.float32)


def _quantize_chunk(op: str, rotated, table, out, r0: int, group: int, bits: int, mode: int, search: bool,
                    seed: int) -> None:
    """The C op on a chunk of rotated rows starting at row r0, into out's rows."""
    qdata, s_rel, s_channel, correction = out
    rows, k = rotated.shape
    r1 = r0 + rows
    e4m3 = s_rel.dtype == torch.float8_e4m3fn
    scratch = torch.empty(2 * rows * (k // group), dtype=torch.float32, device=rotated.device)
    corr = None if correction is None else torch.empty(size=(k // group, rows), dtype=correction.dtype,
                                                       device=rotated.device)
    srel = s_rel[r0:r1].view(torch.uint8) if e4m3 else s_rel[r0:r1]
    _run("quantize_w4a8_int8_weight", op, rotated.device,
         (rotated, _noise(rows, k, group, mode, seed, rotated.device), table, scratch,
          qdata[r0:r1].view(torch.uint8), srel, s_channel[r0:r1], corr),
         (group, bits, mode, int(search), int(e4m3)))
    if corr is not None:
        correction[:, r0:r1] = corr


# ---- the op ----------------------------------------------------------------------------------

def _mode(op: str, symmetric: bool, codebook: bool, bits: int) -> int:
    if bits == 6:
        if not symmetric:
            raise ArgumentError(f"{op}: argument 'symmetric': 6-bit storage is symmetric only")
        return MODE_ALS
    if symmetric:
        return MODE_ALS if codebook else MODE_UNIFORM
    return MODE_ASYM


def check_quantize_w4a8_int8_weight(weight, group_size=16, convrot_groupsize=256, symmetric=True,
                                    scale_dtype=torch.float8_e4m3fn, codebook=True, codebook_tensor=None,
                                    stochastic_rounding=0, bits=4, scale_search=True):
    """eager's validate_w4a8_weight_shape and its types; non-finite weights refused (eager's codes
    for them are a float-to-int cast of NaN, or an index error).  Returns (mode, seed)."""
    op = "quantize_w4a8_int8_weight"
    check.tensor(op, "weight", weight, check.FLOAT_DTYPES, ndim=2, empty=True)
    k = weight.shape[1]
    group = check.integer(op, "group_size", group_size)
    if check.integer(op, "bits", bits) not in (4, 6):
        raise ArgumentError(f"{op}: argument 'bits': must be 4 or 6, got {bits}")
    convrot = check.integer(op, "convrot_groupsize", convrot_groupsize)
    if (k % 16 or group < 4 or k % group or (16 % group and group % 16) or convrot <= 0 or k % convrot
            or (bits == 6 and (k % 32 or group % 16))):
        raise ArgumentError(f"{op}: argument 'weight': K={k} must be divisible by 16 (32 at 6 bits), group_size="
                            f"{group} and convrot_groupsize={convrot}; group_size must be >= 4 and divide 16 or be "
                            "a multiple of 16 (of 16 at 6 bits)")
    check.group_size(op, convrot, k, "convrot_groupsize")
    if scale_dtype not in _SCALE_DTYPES:
        raise ArgumentError(f"{op}: argument 'scale_dtype': must be float32 or float8_e4m3fn, got {scale_dtype}")
    mode = _mode(op, check.boolean(op, "symmetric", symmetric), check.boolean(op, "codebook", codebook), bits)
    check.boolean(op, "scale_search", scale_search)
    if codebook_tensor is not None:  # checked as a tensor even where the form does not use it
        check.tensor(op, "codebook_tensor", codebook_tensor, check.FLOAT_DTYPES, ndim=1)
        if mode == MODE_ALS and bits == 4 and codebook_tensor.numel() != LEVELS:
            raise ArgumentError(f"{op}: argument 'codebook_tensor': expected {LEVELS} levels, got "
                                f"{codebook_tensor.numel()}")
    if stochastic_rounding is None:  # eager compares it with 0: None is a TypeError there, not "off"
        raise ArgumentTypeError(f"{op}: argument 'stochastic_rounding': expected an int, got None")
    seed = check.seed(op, stochastic_rounding)
    if weight.shape[0] == 0 and mode == MODE_ALS and bits == 4 and codebook_tensor is None:
        raise ArgumentError(f"{op}: argument 'weight': an empty weight has no values to choose a codebook from")
    # the extremes propagate a NaN and show an infinity: one reduction (torch.isfinite(weight).all()
    # costs 30x as much on a bfloat16 CPU weight, 35 ms at 3072 x 3072, as much as the quantizer's own
    # uniform forms)
    if weight.numel() and not bool(torch.isfinite(torch.stack(torch.aminmax(weight))).all()):
        raise ArgumentError(f"{op}: argument 'weight': holds NaN or infinite values (no code represents them)")
    return mode, seed


def quantize_w4a8_int8_weight(weight, group_size=16, convrot_groupsize=256, symmetric=True,
                              scale_dtype=torch.float8_e4m3fn, codebook=True, codebook_tensor=None,
                              stochastic_rounding=0, bits=4, scale_search=True):
    """(qdata int8 [N, K*bits/8], s_rel [N, K/group_size] of scale_dtype, s_channel float32 [N],
    correction [K/group_size, N] of weight's dtype or None, codebook float32 [16] or None): the
    weight rotated group-wise, then eager's W4A8 / W6A8 quantizer, chunk by chunk of rows."""
    op = "quantize_w4a8_int8_weight"
    mode, seed = _checked(check_quantize_w4a8_int8_weight, weight, group_size, convrot_groupsize, symmetric,
                          scale_dtype, codebook, codebook_tensor, stochastic_rounding, bits, scale_search)
    n, k = weight.shape
    dev = weight.device
    table = None
    if mode == MODE_ALS and bits == 4:
        table = codebook_tensor.to(device=dev, dtype=torch.float32).contiguous() if codebook_tensor is not None \
            else _decide_table(op, weight, group_size, convrot_groupsize)
    out = (torch.empty(size=(n, k * bits // 8), dtype=torch.int8, device=dev),
           torch.empty(size=(n, k // group_size), dtype=scale_dtype, device=dev),
           torch.empty(size=(n,), dtype=torch.float32, device=dev),
           torch.empty(size=(k // group_size, n), dtype=weight.dtype, device=dev) if mode == MODE_ASYM else None)
    block = max(1, CHUNK_VALUES // max(k, 1))
    for r0 in range(0, n, block):
        chunk = weight[r0:r0 + block].contiguous()
        _quantize_chunk(op, _rotated(op, chunk, convrot_groupsize), table, out, r0, group_size, bits, mode,
                        bool(scale_search), seed + r0 if seed > 0 else 0)  # eager's seed per chunk
    return out + (table,)
