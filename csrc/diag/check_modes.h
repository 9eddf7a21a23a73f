/* SPDX-License-Identifier: Apache-2.0 */
/* The checking modes of checked execution (checked.h says what each does),
 * in a header of their own: checked.c runs them and capture.c refuses the
 * waiting ones during a CUDA-graph capture, and neither file leans on the other
 * for them.  Python passes them as the op functions' `check` (0, 1, 2). */
#ifndef CKC_DIAG_CHECK_MODES_H
#define CKC_DIAG_CHECK_MODES_H

enum { CKC_CHECK_LAUNCH = 0, CKC_CHECK_BOUNDARY = 1, CKC_CHECK_OP = 2 };

#endif /* CKC_DIAG_CHECK_MODES_H */
