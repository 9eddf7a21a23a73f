# SPDX-License-Identifier: Apache-2.0
"""The stress harness's workload: a DiT-like stack of int8 ConvRot linears whose weights stream
per layer from a file on disk, through a pinned host buffer, into device memory, as ComfyUI's
DynamicVRAM does (docs/field-guide.md, "Stress harness").

Shapes are modelled on the field report's video model (MiniMax H3; root-cause-notes: hidden
5376, MLP 14336, ~80k tokens at 0.7 MP x 243 frames; a 31.7 GB int8 file is ~90 blocks of
~347 M weights) and scaled by ``Shapes.scaled``.  A block: ``qkv = x Wqkv`` (3h), the first h
columns stand in for attention, ``x += qkv[:, :h] Wo``, then the SwiGLU MLP
``x += int8_linear(x Wup, Wdown, input_act="swiglu")`` (Wup gives [gate | up], 2 x ffn wide).
Every weight is ConvRot int8 (group 256) with a per-channel float32 scale.

Streaming, per layer: the layer's bytes are read from the file into the staging buffer (host
regime ``page-cache``: as fast as the OS serves them; ``disk-paced``: throttled to a given
MB/s, the report's 32 GB control where the file was re-read at 600-976 MB/s), then copied to
one of two device slots with ``comfy_kitchen_c.stage`` on the copy stream (an offload stream
on a GPU), and the compute stream waits for it.  The option says what happens to the staging
buffer right after its copy was issued: ``reuse`` (the next layer is read into it at once:
ComfyUI's pin stealing without a fence), ``unregister`` (cudaHostUnregister at once: ComfyUI's
pin eviction; GPU only); ``+fence`` first waits for the copies from it (comfy_kitchen_c.fence).
"""
from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass

import torch

from . import faults, ops, testing
from ._kernels import KERNELS

GROUP = 256
# (name, rows N, columns K) of one block's weights, as multiples of (hidden h, mlp ffn)
MATRICES = (("qkv", (3, 0), (1, 0)), ("o", (1, 0), (1, 0)), ("up", (0, 2), (1, 0)), ("down", (1, 0), (0, 1)))


@dataclass(frozen=True)
class Shapes:
    hidden: int
    ffn: int
    tokens: int
    layers: int

    @staticmethod
    def scaled(scale: float, layers: int | None = None, tokens: int | None = None) -> "Shapes":
        """The report's model (hidden 5376, MLP 14336, 80640 tokens, 90 blocks) times scale."""
        def dim(value: int) -> int:
            return max(GROUP, int(round(value * scale / GROUP)) * GROUP)
        return Shapes(dim(5376), dim(14336), tokens or max(16, int(80640 * scale)),
                      layers or max(2, int(round(90 * min(1.0, scale * 4)))))

    def matrix(self, name: str) -> tuple[int, int]:
        _, (nh, nf), (kh, kf) = next(m for m in MATRICES if m[0] == name)
        return nh * self.hidden + nf * self.ffn, kh * self.hidden + kf * self.ffn

    def layer_bytes(self) -> int:
        return sum(n * k + 4 * n for n, k in (self.matrix(m[0]) for m in MATRICES))


def write_weights(path: str, shapes: Shapes, seed: int = 0) -> list[dict]:
    """Writes every layer's quantized weights to path; returns per layer {name: (offset, n, k)}."""
    layout = []
    generator = torch.Generator().manual_seed(seed)
    offset = 0
    with open(path, "wb") as f:
        for _ in range(shapes.layers):
            layer = {}
            for name, *_ in MATRICES:
                n, k = shapes.matrix(name)
                w = torch.randn(n, k, generator=generator) / math.sqrt(k)
                q, scale = ops.quantize_int8_convrot_weight(w, GROUP)
                f.write(q.numpy().tobytes())
                f.write(scale.reshape(-1).numpy().tobytes())
                layer[name] = (offset, n, k)
                offset += n * k + 4 * n
            layout.append(layer)
    return layout


def views(buffer: torch.Tensor, layer: dict, base: int) -> dict:
    """{name: (int8 weight [n, k], float32 scale [n])} viewed in a layer's bytes."""
    out = {}
    for name, (offset, n, k) in layer.items():
        at = offset - base
        out[name] = (buffer[at:at + n * k].view(torch.int8).view(n, k),
                     buffer[at + n * k:at + n * k + 4 * n].view(torch.float32))
    return out


class Device:
    """Where the layers run: "cuda" (a GPU, with an offload stream), "emulated" (the GPU kernels
    on the CPU, testing.emulated_device) or "cpu" (the C CPU kernels; staging is a memcpy)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.torch = torch.device("cuda") if kind == "cuda" else torch.device("cpu")
        self.copy_stream = torch.cuda.Stream() if kind == "cuda" else None

    def context(self):
        return testing.emulated_device() if self.kind == "emulated" else contextlib.nullcontext()

    def empty(self, nbytes: int) -> torch.Tensor:
        t = torch.empty(nbytes, dtype=torch.uint8, device=self.torch)
        return testing.device_memory(t) if self.kind == "emulated" else t

    def host(self, nbytes: int, option: str) -> torch.Tensor:
        if self.kind == "cuda" and not option.startswith("unregister"):
            return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)  # cudaHostAlloc: the pin
        return torch.empty(nbytes, dtype=torch.uint8)

    def fence_all(self) -> None:
        """Waits for everything queued (under the watchdog: a hang raises HangSuspected)."""
        kernels = KERNELS.get()
        if self.kind == "cuda":
            for stream in (self.copy_stream, torch.cuda.current_stream()):
                kernels.fence_stream("generation", self.torch.index or 0, stream.cuda_stream)
        elif self.kind == "emulated":
            kernels.fence_stream("generation", 0, 0)


class Stager:
    """Reads layers from the weight file into the staging buffer and copies them to the device."""

    def __init__(self, device: Device, path: str, layout: list[dict], shapes: Shapes, option: str,
                 regime: str, disk_mbps: float):
        self.device, self.layout, self.option, self.regime = device, layout, option, regime
        self.rate = disk_mbps * 1e6
        self.file = open(path, "rb", buffering=0)
        size = shapes.layer_bytes()
        self.host = device.host(size, option)
        self.slots = [device.empty(size), device.empty(size)]
        self.ready = [None, None]
        self.registered = False
        self.cudart = torch.cuda.cudart() if device.kind == "cuda" else None

    def close(self) -> None:
        self._unregister()
        self.file.close()

    def _register(self) -> None:
        if self.option.startswith("unregister") and not self.registered:
            if self.cudart.cudaHostRegister(self.host.data_ptr(), self.host.nbytes, 0) != 0:
                raise RuntimeError("cudaHostRegister failed")
            self.registered = True

    def _unregister(self) -> None:
        if self.registered:
            self.cudart.cudaHostUnregister(self.host.data_ptr())
            self.registered = False

    def read(self, index: int) -> None:
        layer = self.layout[index]
        first = min(o for o, _, _ in layer.values())
        start = time.perf_counter()
        view = memoryview(self.host.numpy())
        self.file.seek(first)
        done = 0
        while done < self.host.nbytes:
            got = self.file.readinto(view[done:])
            if not got:
                break
            done += got
        if self.regime == "disk-paced":
            left = done / self.rate - (time.perf_counter() - start)
            if left > 0:
                time.sleep(left)

    def stage(self, index: int) -> dict:
        """Layer index into its device slot; returns its weight views there."""
        slot = index % 2
        self._register()
        self.read(index)
        dst, src = self.slots[slot], self.host
        if self.device.kind == "cpu":
            dst.copy_(src)
        elif self.device.kind == "cuda":
            compute = torch.cuda.current_stream()
            copy = self.device.copy_stream
            copy.wait_stream(compute)  # the slot's last reader (two layers ago) has been queued before this
            with torch.cuda.stream(copy):
                faults.stage(dst, src, True)
                event = torch.cuda.Event()
                event.record(copy)
            compute.wait_event(event)
        else:
            faults.stage(dst, src, True)
        # The option: what happens to the staging buffer right after its copy was issued.
        if self.option.endswith("+fence"):
            faults.fence(src)
        if self.option.startswith("unregister"):
            self._unregister()
        first = min(o for o, _, _ in self.layout[index].values())
        return views(dst, self.layout[index], first)


def block(x: torch.Tensor, w: dict, linear) -> torch.Tensor:
    """One DiT-like block (see the module doc); linear(x, weight, scale, input_act)."""
    h = x.shape[-1]
    qkv = linear(x, *w["qkv"], None)
    x = x + linear(qkv[:, :h].contiguous(), *w["o"], None)
    up = linear(x, *w["up"], None)
    return x + linear(up, *w["down"], "swiglu")


def linear_for(backend: str):
    """int8_linear through comfy_kitchen's registry with one backend forced (as ComfyUI calls it)."""
    import comfy_kitchen as ck

    def linear(x, weight, scale, act):
        with ck.use_backend(backend):
            return ck.int8_linear(x, weight, scale, None, torch.bfloat16, True, GROUP, act)
    return linear


class GraphBlocks:
    """A block's compute captured in a CUDA graph per device slot and replayed for every layer
    staged into that slot (GPU only): the addresses of the capture are reused while the slot's
    weights are restaged between replays, as ComfyUI's model_prefetch does (hypothesis H8).
    Flight records of the ops are written at capture; replays add none."""

    def __init__(self, linear):
        self.linear, self.graphs, self.inputs, self.outputs = linear, {}, {}, {}

    def __call__(self, slot: int, x: torch.Tensor, w: dict) -> torch.Tensor:
        if slot not in self.graphs:
            self.inputs[slot] = x.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                block(self.inputs[slot], w, self.linear)  # warm-up outside the capture
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.outputs[slot] = block(self.inputs[slot], w, self.linear)
            self.graphs[slot] = graph
        self.inputs[slot].copy_(x)
        self.graphs[slot].replay()
        return self.outputs[slot].clone()


def generation(stager: Stager, shapes: Shapes, x0: torch.Tensor, linear, steps: int,
               graphs: GraphBlocks | None = None) -> torch.Tensor:
    """steps passes through every layer, streaming each layer's weights every time."""
    x = x0
    for _ in range(steps):
        for index in range(shapes.layers):
            w = stager.stage(index)
            x = graphs(index % 2, x, w) if graphs is not None else block(x, w, linear)
            x = x / x.float().abs().amax(dim=-1, keepdim=True).clamp_min(1e-3).to(x.dtype)  # keep it bounded
    stager.device.fence_all()
    return x


def initial_input(device: Device, shapes: Shapes, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shapes.tokens, shapes.hidden, generator=g).to(device.torch, torch.bfloat16)


def same_result(out: torch.Tensor, ref: torch.Tensor, exact: bool) -> bool:
    if exact:
        return torch.equal(out, ref)
    o, r = out.float(), ref.float()
    return bool(((o - r).abs().max() <= 1e-2 * r.abs().max().clamp_min(1e-6)).item())


def remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
