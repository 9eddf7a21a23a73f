/* SPDX-License-Identifier: Apache-2.0 */
/* Folder listing on Windows (see directory.h). */
#include <stdio.h>
#include <string.h>
#include <windows.h>

#include "directory.h"

int
ckc_directory_each(const char *dir, void (*visit)(void *ctx, const char *name), void *ctx)
{
    char pattern[MAX_PATH];
    WIN32_FIND_DATAA found;
    HANDLE h;
    if (snprintf(pattern, sizeof pattern, "%s\\*", dir) >= (int)sizeof pattern) {
        return -1;
    }
    h = FindFirstFileA(pattern, &found);
    if (h == INVALID_HANDLE_VALUE) {
        return -1;
    }
    do {
        if (strcmp(found.cFileName, ".") != 0 && strcmp(found.cFileName, "..") != 0) {
            visit(ctx, found.cFileName);
        }
    } while (FindNextFileA(h, &found));
    FindClose(h);
    return 0;
}
