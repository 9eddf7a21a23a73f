# SPDX-License-Identifier: Apache-2.0
"""Stand-in of ComfyUI's comfy package (tests only; see ../README.md)."""
