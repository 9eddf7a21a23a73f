/* SPDX-License-Identifier: Apache-2.0 */
/* What an op call reads and writes, told to the emulated device's cross-stream
 * hazard detector (csrc/emu/emu_hazards.cpp); nothing in other builds.  The
 * router (ops/route.c) calls these around every GPU entry; the module exposes
 * the detector's controls to the tests (module/hazards.c). */
#ifndef CKC_OPS_HAZARDS_H
#define CKC_OPS_HAZARDS_H

#include <stddef.h>
#include <stdint.h>

#include "contract/call.h"

/* Before the entry runs (begin 1): every input tensor is read on the call's
 * stream; after it (begin 0): every output tensor was written there. */
void ckc_op_hazards(const char *op, const ckc_op_args *a, int begin);

/* The detector's controls (emu_api.h), for the emulated-device module only;
 * no-ops (and 0) in other builds. */
void ckc_hazards_track(int on);
uint64_t ckc_hazards_record(uintptr_t stream);
int ckc_hazards_wait(uintptr_t stream, uint64_t event);
size_t ckc_hazards_take(char *buf, size_t cap);

#endif /* CKC_OPS_HAZARDS_H */
