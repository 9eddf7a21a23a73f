/* SPDX-License-Identifier: Apache-2.0 */
/* The flight record: a fixed-size ring of records in a memory-mapped file, one
 * file per process, one record per GPU op and per staged copy.  The host writes
 * a record when it queues the work; the stream itself writes the record's
 * completion word (the record's seq) when the work has completed, so the file
 * tells what the GPU finished even after the device is lost or the process is
 * killed.  comfy_kitchen_c/flight.py reads it (the format below is its
 * contract: little-endian, explicit sizes; bump CKC_FLIGHT_VERSION on change).
 *
 * Where the stream writes a completion (csrc/diag/marks.c decides, per mark):
 *   - the record's own `done` word, when the device can write the file mapping
 *     (the runtime registered it);
 *   - else the slot's word in `words`, pinned host memory the device can always
 *     write (Linux >= 6.5 refuses long-term pins of file-backed pages).  The
 *     mirror (flight_mirror.h) copies those words into the records' `done`.
 * Every reader in this process (ckc_flight_is_done and the scans, fences, the
 * watchdog, flush, abandon) looks at both, so it sees a completion the moment
 * the device wrote it.  The file itself: exact after a lost device (the process
 * lives on: the mirror and flush keep copying the pinned words, which the device
 * wrote before it was lost); after the process is killed, behind the device by
 * at most one mirror period (CKC_FLIGHT_MIRROR_US, plus the thread's scheduling
 * delay) in the pinned-words case, exact in the registered case.
 *
 * The ring is one per process: _C owns it and _C_emu uses the same one.
 *
 * CUDA graphs (format 2).  An op captured into a CUDA graph is queued once, at
 * capture, and runs at every replay.  Its record goes to the capture area after
 * the ring (its own slots, so that the graph's marks never land in a newer op's
 * record), with `capture` the capture's id.  The first captured op of a capture
 * queues a replay-begin kernel before its work: at every replay it bumps the
 * device's replay counter n and writes (capture, n) into the header's replay
 * words.  A captured op's completion mark writes CKC_FLIGHT_REPLAY_DONE(n, seq):
 * so after a lost device the file says which replay of which graph ran last, and
 * which of its ops completed in that replay.  A replayed graph keeps writing its
 * slots until it is destroyed: a graph captured more than
 * CKC_FLIGHT_CAPTURE_CAPACITY captured ops ago may write into slots reused by a
 * newer capture (whose records then read as not completed in their replay). */
#ifndef CKC_DIAG_FLIGHT_H
#define CKC_DIAG_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "flight_prune.h"
#include "platform/mapped_file.h"
#include "platform/threads.h"

#define CKC_FLIGHT_MAGIC "CKCFLIGHT\0\0\0\0\0\0" /* 16 bytes */
#define CKC_FLIGHT_VERSION 3u /* 2: host_memory carries CKC_FLIGHT_EMULATED; 3: the capture area */
#define CKC_FLIGHT_HEADER_SIZE 256u
#define CKC_FLIGHT_RECORD_SIZE 512u
#define CKC_FLIGHT_CAPACITY 4096u
#define CKC_FLIGHT_CAPTURE_CAPACITY 4096u
/* Completion words the device writes (pinned words, arrival counters): the
 * ring's, the capture area's, then the two replay words. */
#define CKC_FLIGHT_WORDS (CKC_FLIGHT_CAPACITY + CKC_FLIGHT_CAPTURE_CAPACITY + 2u)
#define CKC_FLIGHT_REPLAY_CAPTURE_WORD (CKC_FLIGHT_CAPACITY + CKC_FLIGHT_CAPTURE_CAPACITY)
#define CKC_FLIGHT_REPLAY_NUMBER_WORD (CKC_FLIGHT_REPLAY_CAPTURE_WORD + 1u)
/* The arrival counters (ckc_gpu_mark_arrivals) hold one per completion word
 * but the replay words, then the device's replay counter. */
#define CKC_FLIGHT_REPLAY_COUNTER (CKC_FLIGHT_CAPACITY + CKC_FLIGHT_CAPTURE_CAPACITY)
/* A captured op's completion in replay n: n in the high half, seq's low half below. */
#define CKC_FLIGHT_REPLAY_DONE(n, seq) (((uint64_t)(n) << 32) | ((uint64_t)(seq) & 0xFFFFFFFFu))

enum { CKC_FLIGHT_OP = 1, CKC_FLIGHT_COPY = 2 };
/* Host-written states; "completed" is done == seq, written by the stream. */
enum { CKC_FLIGHT_QUEUED = 0, CKC_FLIGHT_FAILED = 2, CKC_FLIGHT_HANG = 3 };
/* Source memory of a copy (ckc_gpu_host_memory's names, in this order from 1). */
enum { CKC_HOST_NONE = 0, CKC_HOST_PINNED, CKC_HOST_REGISTERED, CKC_HOST_PAGEABLE, CKC_HOST_FILE_MAPPED,
       CKC_HOST_UNKNOWN };
/* Bit of host_memory set in records written by the emulated device (_C_emu), so a
 * reader never mistakes them for work of a real GPU (format version 2; version 1
 * records have it clear and came from a GPU). */
#define CKC_FLIGHT_EMULATED 0x10000u
#if defined(CKC_EMULATED)
#define CKC_FLIGHT_DEVICE_KIND CKC_FLIGHT_EMULATED
#else
#define CKC_FLIGHT_DEVICE_KIND 0u
#endif

typedef struct {
    char magic[16];
    uint32_t version;
    uint32_t header_size;
    uint32_t record_size;
    uint32_t capacity;
    uint64_t pid;
    double started_unix;
    uint64_t written;          /* seq of the newest record */
    char host[64];
    char python[32];
    char package_version[32];
    uint64_t replay_capture;   /* written by the device at each replay of a captured graph: its capture id */
    uint64_t replay_number;    /* and the replay's number (the device's count of replays begun) */
    uint32_t capture_capacity; /* records in the capture area after the ring */
    uint32_t reserved32;
    char reserved[48];
} ckc_flight_header;

typedef struct {
    uint64_t seq;              /* 0: empty or being written */
    uint64_t done;             /* == seq once the stream completed the work */
    uint32_t kind;             /* CKC_FLIGHT_OP / CKC_FLIGHT_COPY */
    uint32_t state;            /* CKC_FLIGHT_QUEUED / FAILED / HANG */
    int32_t device;
    uint32_t host_memory;      /* CKC_HOST_* for copies (low 8 bits); CKC_FLIGHT_EMULATED */
    uint64_t stream;
    double queued_unix;
    double completed_unix;     /* when the host saw it complete (fences), 0 if it did not look */
    uint64_t bytes;
    uint64_t host_ptr;
    uint64_t host_bytes;
    uint64_t device_ptr;
    uint64_t capture;          /* the CUDA-graph capture it was recorded in (capture area), 0: none */
    char op[40];
    char tensors[160];
    char params[112];
    char error[104];
} ckc_flight_record;

/* ckc_flight.mirror_from when no seq was marked since the mirror looked (above any seq). */
#define CKC_MIRROR_AWAKE UINT64_MAX
#define CKC_MIRROR_ASLEEP (UINT64_MAX - 1)

typedef struct {
    ckc_mutex lock;
    int state;                 /* 0: not opened yet, 1: open, -1: failed (no ring) */
    int ops;                   /* records ops (COMFY_KITCHEN_C_FLIGHT != 0); copies are always recorded */
    char path[CKC_FLIGHT_PATH_MAX]; /* file to create; "" keeps the ring in memory */
    char prune_prefix[32];     /* when it is created, the folder keeps the `keep` newest files */
    char prune_suffix[16];     /* named prefix...suffix (this one among them): flight_prune.c */
    unsigned keep;
    char python[32];
    char package_version[32];
    ckc_mapped_file file;
    ckc_flight_header *header;
    ckc_flight_record *records;
    ckc_flight_record *captures;   /* the capture area: CKC_FLIGHT_CAPTURE_CAPACITY records */
    volatile uint64_t seq;
    volatile uint64_t captured;    /* capture-area records begun */
    volatile uint64_t reset_below; /* records below this seq were abandoned by a device reset */
    /* Completion words in pinned host memory, one per slot (NULL until a
     * device could not write the file): see the top of this file. */
    void *volatile words;
    /* The mirror of words into the file (flight_mirror.c). */
    ckc_mutex mirror_lock;
    ckc_cond mirror_wake;
    volatile uint64_t mirror_from; /* lowest seq marked into words since the mirror last looked, or
                                      CKC_MIRROR_AWAKE / CKC_MIRROR_ASLEEP when none was */
    volatile uint64_t mirror_wakeups;  /* times the mirror woke (for the tests of its idleness) */
    int mirror;                    /* 0: not started, 1: running, -1: could not start a thread */
} ckc_flight;

/* The process's ring (module init sets it: _C's own, _C_emu's from _C). */
extern ckc_flight *ckc_flight_ring;

void ckc_flight_init(ckc_flight *f);

/* What the file is and where, and whether to record ops; takes effect at the
 * first record, which creates the file. */
typedef struct {
    const char *path;          /* NULL: the record stays in memory */
    int ops;
    const char *python;
    const char *package_version;
    /* When the file is created, its folder keeps the `keep` newest record files
     * (names prefix...suffix, sorted by name: they start with the start time). */
    const char *prune_prefix;
    const char *prune_suffix;
    unsigned keep;
} ckc_flight_config;

void ckc_flight_configure(const ckc_flight_config *c);

/* The file's path, or "" when the ring is in memory only (or not open). */
const char *ckc_flight_path(void);

/* Reserves the next record (opening the ring on first use): returns it emptied
 * (seq 0) with its seq in *seq, or NULL without a ring. */
ckc_flight_record *ckc_flight_begin(uint32_t kind, uint64_t *seq);

/* The same for an op captured into a CUDA graph (capture: its id), in the
 * capture area; its seq comes from the one sequence of the ring. */
ckc_flight_record *ckc_flight_begin_captured(uint64_t capture, uint64_t *seq);

/* ---- replays of captured graphs (see the top of this file) ---- */

/* The latest replay the device began: 1 with its capture id and number, 0 when
 * none (the file's header words or the pinned ones, whichever is newer). */
int ckc_flight_latest_replay(uint64_t *capture, uint64_t *number);

/* Whether captured record r (of seq) completed in replay n. */
int ckc_flight_done_in_replay(const ckc_flight_record *r, uint64_t seq, uint64_t n);

/* Of the latest replay's captured records: the first (lowest seq) that did not
 * complete in it, and the last (highest seq) that did; NULL when none. */
ckc_flight_record *ckc_flight_replay_first_incomplete(void);
ckc_flight_record *ckc_flight_replay_last_completed(void);

/* Publishes a record filled after ckc_flight_begin. */
void ckc_flight_publish(ckc_flight_record *r, uint64_t seq);

/* The record of seq, or NULL once its slot was reused. */
ckc_flight_record *ckc_flight_find(uint64_t seq);

/* Index of r's completion word among CKC_FLIGHT_WORDS (and its arrival counter). */
static inline uint32_t
ckc_flight_slot(const ckc_flight_record *r)
{
    const ckc_flight *f = ckc_flight_ring;
    return r >= f->captures && r < f->captures + CKC_FLIGHT_CAPTURE_CAPACITY
               ? CKC_FLIGHT_CAPACITY + (uint32_t)(r - f->captures)
               : (uint32_t)(r - f->records);
}

/* Whether the device completed the work of r (the record of seq), in the
 * file's word or in the pinned one.  A captured op: in some replay. */
static inline int
ckc_flight_is_done(const ckc_flight_record *r, uint64_t seq)
{
    const uint64_t *words = (const uint64_t *)ckc_atomic_load_ptr(&ckc_flight_ring->words);
    const uint64_t word = ckc_atomic_load64(&r->done);
    const uint64_t pinned = words != NULL ? ckc_atomic_load64(&words[ckc_flight_slot(r)]) : 0;
    if (r->capture != 0) {
        const uint64_t low = seq & 0xFFFFFFFFu;
        return ((word & 0xFFFFFFFFu) == low && word >> 32 != 0) || ((pinned & 0xFFFFFFFFu) == low && pinned >> 32 != 0);
    }
    return word == seq || pinned == seq;
}

/* Marks a record failed or hang-suspected with a note (no-op for NULL). */
void ckc_flight_mark(ckc_flight_record *r, uint32_t state, const char *note);

/* The oldest record with seq < below (0: any) that is neither completed nor
 * failed, on stream (UINT64_MAX: any stream); NULL if none. */
ckc_flight_record *ckc_flight_first_incomplete(uint64_t stream, uint64_t below);

/* The newest completed record of kind (0: any) with seq < below (0: any). */
ckc_flight_record *ckc_flight_last_completed(uint32_t kind, uint64_t below);

/* Marks every record still queued as failed with note (after a device reset,
 * their work will never complete); hang-suspected ones keep their state.  No
 * record from before the reset is waited on again (fences, the mirror), and no
 * replay of a captured graph counts as in flight. */
void ckc_flight_abandon(const char *note);

/* Appenders for record text, cheap enough for every op: they never overflow
 * and keep the text NUL-terminated. */
size_t ckc_text_append(char *buf, size_t cap, size_t used, const char *s);
size_t ckc_text_append_int(char *buf, size_t cap, size_t used, long long v);

#endif /* CKC_DIAG_FLIGHT_H */
