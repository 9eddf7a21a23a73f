/* SPDX-License-Identifier: Apache-2.0 */
/* Folder listing on POSIX (see directory.h). */
#include <dirent.h>
#include <string.h>

#include "directory.h"

int
ckc_directory_each(const char *dir, void (*visit)(void *ctx, const char *name), void *ctx)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            visit(ctx, e->d_name);
        }
    }
    closedir(d);
    return 0;
}
