/* SPDX-License-Identifier: Apache-2.0 */
/* ckc_error_set: format a failure once, keeping where it was detected. */
#include <stdarg.h>
#include <stdio.h>

#include "contract/status.h"

ckc_status
ckc_error_set(ckc_error *err, ckc_status status, const char *file, int line,
              const char *func, const char *fmt, ...)
{
    va_list ap;
    err->status = status;
    err->file = file;
    err->line = line;
    err->func = func;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return status;
}
