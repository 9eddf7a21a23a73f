/* SPDX-License-Identifier: Apache-2.0 */
/* Listing a folder's files, one implementation per OS (directory_posix.c,
 * directory_win32.c): the flight record prunes its old files with it when it
 * creates a new one. */
#ifndef CKC_PLATFORM_DIRECTORY_H
#define CKC_PLATFORM_DIRECTORY_H

/* Calls visit(ctx, name) for every entry of the folder dir but "." and "..".
 * Returns 0, or -1 when the folder cannot be read. */
int ckc_directory_each(const char *dir, void (*visit)(void *ctx, const char *name), void *ctx);

#endif /* CKC_PLATFORM_DIRECTORY_H */
