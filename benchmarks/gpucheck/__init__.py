# SPDX-License-Identifier: Apache-2.0
"""gpu_check's parts (benchmarks/gpu_check.py is the command): timing, the workers, the
targets, the report and the steps."""
