/* SPDX-License-Identifier: Apache-2.0 */
/* The table of every op the extension exposes (op.h), from the one list (op_list.h). */
#include "op.h"
#include "op_list.h"

#define DECLARE_SPEC(name) extern const ckc_op_spec ckc_op_##name;
CKC_OP_LIST(DECLARE_SPEC)
#undef DECLARE_SPEC

#define SPEC_ENTRY(name) &ckc_op_##name,
const ckc_op_spec *const ckc_op_table[] = {CKC_OP_LIST(SPEC_ENTRY) NULL};
#undef SPEC_ENTRY
