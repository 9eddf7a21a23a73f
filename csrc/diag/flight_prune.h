/* SPDX-License-Identifier: Apache-2.0 */
/* Old flight-record files go when a new one is created (flight_prune.c). */
#ifndef CKC_DIAG_FLIGHT_PRUNE_H
#define CKC_DIAG_FLIGHT_PRUNE_H

/* Longest record-file path (with its NUL): the ring's path buffer (flight.h) and
 * the folder's name here are both this long. */
#define CKC_FLIGHT_PATH_MAX 1024

/* Removes the oldest files named prefix...suffix in path's folder but path
 * itself and those of running processes (the pid in prefix<ms>-<pid>suffix), so
 * that `keep` of the others remain (path included); what cannot be removed
 * (held open on Windows, or gone already) is left. */
void ckc_flight_prune(const char *path, const char *prefix, const char *suffix, unsigned keep);

#endif /* CKC_DIAG_FLIGHT_PRUNE_H */
