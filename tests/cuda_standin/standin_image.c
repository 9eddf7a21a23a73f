/* SPDX-License-Identifier: Apache-2.0 */
/* Fatbin, cubin and PTX reading, and the driver's choice of image
 * (standin_image.h says what each layout is and where it was measured). */
#define _POSIX_C_SOURCE 200809L

#include "standin_image.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

/* ---- bytes and reasons ---- */

static uint16_t
rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t
rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t
rd64(const uint8_t *p)
{
    return rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* Whether [off, off + len) lies within n bytes. */
static int
fits(size_t n, uint64_t off, uint64_t len)
{
    return off <= n && len <= n - off;
}

/* Writes the reason into why (CKCSI_WHY_MAX bytes) and returns code. */
static int refuse(char *why, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int
refuse(char *why, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, CKCSI_WHY_MAX, fmt, ap);
    va_end(ap);
    return code;
}

/* Appends to why, cutting what does not fit. */
static void append(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
append(char *why, const char *fmt, ...)
{
    size_t used = strlen(why);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + used, CKCSI_WHY_MAX - used, fmt, ap);
    va_end(ap);
}

/* "12.8" for 12080. */
static const char *
cuda_text(int version, char buf[16])
{
    snprintf(buf, 16, "%d.%d", version / 1000, version % 1000 / 10);
    return buf;
}

/* ---- PTX ISA versions ---- */

int
ckcsi_ptx_isa_cuda(int isa_major, int isa_minor)
{
    /* NVIDIA's PTX ISA release history (also cuda.bindings.utils'
     * get_minimal_required_cuda_ver_from_ptx_ver): ISA 6.0 came with CUDA 9.0. */
    static const int since[][3] = {
        {6, 0, 9000},  {6, 1, 9010},  {6, 2, 9020},  {6, 3, 10000}, {6, 4, 10010}, {6, 5, 10020}, {7, 0, 11000},
        {7, 1, 11010}, {7, 2, 11020}, {7, 3, 11030}, {7, 4, 11040}, {7, 5, 11050}, {7, 6, 11060}, {7, 7, 11070},
        {7, 8, 11080}, {8, 0, 12000}, {8, 1, 12010}, {8, 2, 12020}, {8, 3, 12030}, {8, 4, 12040}, {8, 5, 12050},
        {8, 6, 12070}, {8, 7, 12080}, {8, 8, 12090}, {9, 0, 13000}, {9, 1, 13010}};
    for (size_t i = 0; i < sizeof since / sizeof since[0]; i++) {
        if (since[i][0] == isa_major && since[i][1] == isa_minor) {
            return since[i][2];
        }
    }
    if (isa_major < 6) {
        return 0;
    }
    if (isa_major >= 9) {
        return 1000 * (isa_major + 4) + 10 * isa_minor;
    }
    return 1000 * (isa_major + 5); /* a minor past the table's last of its major: the next major's first */
}

/* ---- fatbin containers and entries ---- */

#define FATBIN_MAGIC 0xBA55ED50u
#define ENTRY_HEADER_MIN 64
#define FLAG_64BIT 0x1u
#define FLAG_LZ4 0x2000u
#define FLAG_ZSTD 0x8000u
#define SIZE_CAP ((uint64_t)1 << 30) /* a corrupt size is refused before anything is allocated */

static int
add_entry(ckcsi_fatbin *fb, const ckcsi_entry *e)
{
    if ((fb->count & (fb->count - 1)) == 0) { /* 0, 1, 2, 4, ...: as many as there is room for */
        size_t cap = fb->count ? 2 * (size_t)fb->count : 1;
        ckcsi_entry *grown = realloc(fb->entries, cap * sizeof *grown);
        if (!grown) {
            return refuse(fb->why, CKCSI_ERROR_OUT_OF_MEMORY, "no memory for the fatbin's entries");
        }
        fb->entries = grown;
    }
    fb->entries[fb->count++] = *e;
    return 0;
}

/* Where the entry's options are, and how it is stored. */
static int
entry_layout(ckcsi_fatbin *fb, ckcsi_entry *e, const uint8_t *h, size_t header, size_t payload, size_t at)
{
    if (header >= 72) {
        uint32_t off = rd32(h + 64), len = rd32(h + 68);
        if (!fits(header, off, len)) {
            return refuse(fb->why, CKCSI_ERROR_INVALID_IMAGE,
                          "entry at byte %zu: options (%u bytes at %u) outside its %zu-byte header", at, len, off,
                          header);
        }
        e->options = h + off;
        e->options_size = len;
    }
    if ((e->flags & FLAG_LZ4) && (e->flags & FLAG_ZSTD)) {
        return refuse(fb->why, CKCSI_ERROR_INVALID_IMAGE, "entry at byte %zu: flagged both LZ4 and zstd", at);
    }
    e->compression = e->flags & FLAG_LZ4 ? CKCSI_ZIP_LZ4 : e->flags & FLAG_ZSTD ? CKCSI_ZIP_ZSTD : CKCSI_ZIP_NONE;
    e->payload_size = payload;
    e->size = payload;
    if (e->compression == CKCSI_ZIP_NONE) {
        return 0;
    }
    uint32_t stored = rd32(h + 16);
    uint64_t size = rd64(h + 56);
    if (stored == 0 || stored > payload || size == 0 || size > SIZE_CAP) {
        return refuse(fb->why, CKCSI_ERROR_INVALID_IMAGE,
                      "entry at byte %zu: compressed %u bytes of a %zu-byte payload into %llu bytes", at, stored,
                      payload, (unsigned long long)size);
    }
    e->payload_size = stored;
    e->size = (size_t)size;
    return 0;
}

/* The entries of one container: n bytes at p, p being byte `base` of the image. */
static int
parse_entries(ckcsi_fatbin *fb, const uint8_t *p, size_t n, size_t base)
{
    size_t at = 0;
    while (at < n) {
        const uint8_t *h = p + at;
        if (n - at < ENTRY_HEADER_MIN) {
            return refuse(fb->why, CKCSI_ERROR_INVALID_IMAGE,
                          "entry at byte %zu: %zu bytes left in its container, a header takes %d", base + at, n - at,
                          ENTRY_HEADER_MIN);
        }
        uint32_t header = rd32(h + 4);
        uint64_t payload = rd64(h + 8);
        if (header < ENTRY_HEADER_MIN || !fits(n - at, header, payload)) {
            return refuse(fb->why, CKCSI_ERROR_INVALID_IMAGE,
                          "entry at byte %zu: a %u-byte header and %llu-byte payload overrun its container "
                          "(%zu bytes left)",
                          base + at, header, (unsigned long long)payload, n - at);
        }
        ckcsi_entry e = {.kind = rd16(h),
                         .version_minor = rd16(h + 24),
                         .version_major = rd16(h + 26),
                         .arch = (int)(rd32(h + 28) & 0xffff),
                         .flags = rd64(h + 40),
                         .payload = h + header};
        int err = entry_layout(fb, &e, h, header, (size_t)payload, base + at);
        if (!err) {
            err = add_entry(fb, &e);
        }
        if (err) {
            return err;
        }
        at += header + (size_t)payload;
    }
    return 0;
}

static int
all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i]) {
            return 0;
        }
    }
    return 1;
}

/* Containers back to back within n bytes (zero padding may follow the last);
 * n == 0: only the first, as long as its header says. */
static int
parse_containers(ckcsi_fatbin *fb, const uint8_t *p, size_t n)
{
    const int sized = n != 0;
    size_t at = 0;
    do {
        if (sized && at > 0 && (n - at < 16 || rd32(p + at) != FATBIN_MAGIC) && all_zero(p + at, n - at)) {
            break;
        }
        if (sized && n - at < 16) {
            return refuse(fb->why, CKCSI_ERROR_INVALID_IMAGE, "container at byte %zu: %zu bytes, a header takes 16", at,
                          n - at);
        }
        const uint8_t *c = p + at;
        uint16_t version = rd16(c + 4), header = rd16(c + 6);
        uint64_t size = rd64(c + 8);
        if (rd32(c) != FATBIN_MAGIC || version != 1 || header < 16 || size > SIZE_CAP) {
            return refuse(fb->why, CKCSI_ERROR_INVALID_IMAGE,
                          "container at byte %zu: magic 0x%08x, version %u, a %u-byte header, %llu bytes "
                          "(a fatbin's: 0x%08x, 1, 16 or more)",
                          at, rd32(c), version, header, (unsigned long long)size, FATBIN_MAGIC);
        }
        if (!sized) {
            n = header + (size_t)size;
        }
        if (!fits(n - at, header, size)) {
            return refuse(fb->why, CKCSI_ERROR_INVALID_IMAGE,
                          "container at byte %zu: %llu bytes of entries, the image ends %zu bytes after it starts", at,
                          (unsigned long long)size, n - at);
        }
        int err = parse_entries(fb, c + header, (size_t)size, at + header);
        if (err) {
            return err;
        }
        at += header + (size_t)size;
    } while (at < n);
    fb->image_size = sized ? n : at;
    return 0;
}

/* ---- decompression ---- */

/* LZ4's block format: sequences of a token (literal count, match length),
 * literals, a 2-byte back offset and the match, the last sequence without one. */
static size_t
lz4_count(const uint8_t *src, size_t n, size_t *i, size_t count, int *bad)
{
    if (count != 15) {
        return count;
    }
    uint8_t b;
    do {
        if (*i >= n || count > SIZE_CAP) {
            *bad = 1;
            return 0;
        }
        b = src[(*i)++];
        count += b;
    } while (b == 255);
    return count;
}

static int
lz4_block(const uint8_t *src, size_t n, uint8_t *dst, size_t cap, size_t *out)
{
    size_t i = 0, o = 0;
    int bad = 0;
    while (i < n) {
        const unsigned token = src[i++];
        size_t lit = lz4_count(src, n, &i, token >> 4, &bad);
        if (bad || lit > n - i || lit > cap - o) {
            return -1;
        }
        memcpy(dst + o, src + i, lit);
        i += lit;
        o += lit;
        if (i == n) {
            break;
        }
        if (n - i < 2) {
            return -1;
        }
        size_t back = rd16(src + i);
        i += 2;
        size_t len = lz4_count(src, n, &i, token & 15, &bad) + 4;
        if (bad || back == 0 || back > o || len > cap - o) {
            return -1;
        }
        for (size_t k = 0; k < len; k++, o++) { /* byte by byte: a match may overlap itself */
            dst[o] = dst[o - back];
        }
    }
    *out = o;
    return 0;
}

typedef size_t (*zstd_decompress_fn)(void *dst, size_t cap, const void *src, size_t n);
typedef unsigned (*zstd_is_error_fn)(size_t code);
typedef const char *(*zstd_error_name_fn)(size_t code);

static struct {
    zstd_decompress_fn decompress;
    zstd_is_error_fn is_error;
    zstd_error_name_fn error_name;
    char why[256];
} zstd;
static pthread_once_t zstd_once = PTHREAD_ONCE_INIT;

static void
zstd_open(void)
{
    const char *name = getenv("CKCSI_LIBZSTD");
    if (!name || !*name) {
        name = CKCSI_LIBZSTD_DEFAULT;
    }
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(zstd.why, sizeof zstd.why, "libzstd is missing: %s", dlerror());
        return;
    }
    void *f[3] = {dlsym(lib, "ZSTD_decompress"), dlsym(lib, "ZSTD_isError"), dlsym(lib, "ZSTD_getErrorName")};
    if (!f[0] || !f[1] || !f[2]) {
        snprintf(zstd.why, sizeof zstd.why, "%s lacks ZSTD_decompress, ZSTD_isError or ZSTD_getErrorName", name);
        return;
    }
    memcpy(&zstd.decompress, &f[0], sizeof f[0]);
    memcpy(&zstd.is_error, &f[1], sizeof f[1]);
    memcpy(&zstd.error_name, &f[2], sizeof f[2]);
}

/* Decompresses e into e->data (once). */
static int
inflate(ckcsi_entry *e, char *why)
{
    if (e->compression == CKCSI_ZIP_ZSTD) {
        pthread_once(&zstd_once, zstd_open);
        if (!zstd.decompress) {
            return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "a zstd-compressed entry, and %s", zstd.why);
        }
    }
    uint8_t *out = malloc(e->size);
    if (!out) {
        return refuse(why, CKCSI_ERROR_OUT_OF_MEMORY, "no memory for a %zu-byte entry", e->size);
    }
    size_t got = 0;
    if (e->compression == CKCSI_ZIP_LZ4) {
        if (lz4_block(e->payload, e->payload_size, out, e->size, &got) != 0) {
            free(out);
            return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "a corrupt LZ4 payload (%zu bytes)", e->payload_size);
        }
    } else {
        got = zstd.decompress(out, e->size, e->payload, e->payload_size);
        if (zstd.is_error(got)) {
            free(out);
            return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "a corrupt zstd payload (%zu bytes): %s", e->payload_size,
                          zstd.error_name(got));
        }
    }
    if (got != e->size) {
        free(out);
        return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "the payload decompresses to %zu bytes, the header says %zu", got,
                      e->size);
    }
    e->data = out;
    return 0;
}

/* The entry's bytes, decompressed. */
static int
entry_bytes(ckcsi_entry *e, const uint8_t **p, size_t *n, char *why)
{
    if (e->compression != CKCSI_ZIP_NONE && !e->data) {
        int err = inflate(e, why);
        if (err) {
            return err;
        }
    }
    *p = e->compression == CKCSI_ZIP_NONE ? e->payload : e->data;
    *n = e->size;
    return 0;
}

/* ---- cubins (ELF) ---- */

#define SHT_SYMTAB 2
#define SHT_NOBITS 8
#define STT_FUNC 2
#define STB_GLOBAL 1
#define STB_WEAK 2
#define STO_CUDA_ENTRY 0x10

enum {
    EIATTR_MAX_THREADS = 0x05,
    EIATTR_PARAM_CBANK = 0x0a,
    EIATTR_REQNTID = 0x10,
    EIATTR_KPARAM_INFO = 0x17,
    EIATTR_CBANK_PARAM_SIZE = 0x19,
    EIATTR_MAXREG_COUNT = 0x1b,
    EIATTR_REGCOUNT = 0x2f,
    EIATTR_CUDA_API_VERSION = 0x37,
    EIATTR_KPARAM_INFO_V2 = 0x45
};

typedef struct {
    const uint8_t *d;
    size_t n;
    int osabi, abi_version, arch;
    const uint8_t *sh; /* section headers */
    unsigned shnum, shentsize;
    const uint8_t *shstr; /* section names */
    size_t shstr_n;
} elf_file;

static const uint8_t *
sec(const elf_file *f, unsigned i)
{
    return f->sh + (size_t)i * f->shentsize;
}

/* The NUL-terminated string at off of a table of n bytes, or NULL. */
static const char *
str_at(const uint8_t *tab, size_t n, uint64_t off)
{
    if (off >= n || !memchr(tab + off, 0, n - (size_t)off)) {
        return NULL;
    }
    return (const char *)tab + off;
}

static const char *
sec_name(const elf_file *f, unsigned i)
{
    return str_at(f->shstr, f->shstr_n, rd32(sec(f, i)));
}

/* The bytes of section i, or -1 when they lie outside the file. */
static int
sec_bytes(const elf_file *f, unsigned i, const uint8_t **p, size_t *n)
{
    const uint8_t *s = sec(f, i);
    uint64_t off = rd64(s + 24), size = rd64(s + 32);
    if (rd32(s + 4) == SHT_NOBITS) {
        size = 0;
    }
    if (!fits(f->n, off, size)) {
        return -1;
    }
    *p = f->d + off;
    *n = (size_t)size;
    return 0;
}

static int
elf_open(elf_file *f, const uint8_t *d, size_t n, char *why)
{
    memset(f, 0, sizeof *f);
    f->d = d;
    f->n = n;
    if (n < 64 || memcmp(d, "\177ELF", 4) != 0 || d[4] != 2 || d[5] != 1) {
        return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "cubin: not a 64-bit little-endian ELF (%zu bytes)", n);
    }
    f->osabi = d[7];
    f->abi_version = d[8];
    uint32_t flags = rd32(d + 0x30);
    f->arch = (int)(f->abi_version >= 8 ? flags >> 8 & 0xff : flags & 0xff);
    uint64_t shoff = rd64(d + 0x28);
    f->shentsize = rd16(d + 0x3a);
    f->shnum = rd16(d + 0x3c);
    unsigned shstrndx = rd16(d + 0x3e);
    if (f->shentsize < 64 || f->shnum == 0 || !fits(n, shoff, (uint64_t)f->shnum * f->shentsize) ||
        shstrndx >= f->shnum) {
        return refuse(why, CKCSI_ERROR_INVALID_IMAGE,
                      "cubin: %u section headers of %u bytes at %llu (names in %u) do not fit its %zu bytes", f->shnum,
                      f->shentsize, (unsigned long long)shoff, shstrndx, n);
    }
    f->sh = d + shoff;
    if (sec_bytes(f, shstrndx, &f->shstr, &f->shstr_n) != 0) {
        return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "cubin: its section names lie outside it");
    }
    return 0;
}

/* The index of the section called prefix + name, or -1. */
static int
find_section(const elf_file *f, const char *prefix, const char *name)
{
    const size_t len = strlen(prefix);
    for (unsigned i = 0; i < f->shnum; i++) {
        const char *s = sec_name(f, i);
        if (s && strncmp(s, prefix, len) == 0 && strcmp(s + len, name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/* One attribute of an .nv.info section: format 4 carries `size` bytes, the
 * others a 16-bit value (a byte for format 2). */
typedef struct {
    int fmt, id;
    uint16_t value;
    const uint8_t *bytes;
    size_t size;
} eiattr;

/* The attribute at *at: 1, 0 at the end, -1 when corrupt. */
static int
next_attr(const uint8_t *p, size_t n, size_t *at, eiattr *a)
{
    if (*at >= n) {
        return 0;
    }
    if (n - *at < 4) {
        return -1;
    }
    const uint8_t *h = p + *at;
    *a = (eiattr){.fmt = h[0], .id = h[1], .value = rd16(h + 2)};
    if (a->fmt == 4) {
        if (a->value > n - *at - 4) {
            return -1;
        }
        a->bytes = h + 4;
        a->size = a->value;
        *at += 4 + (size_t)a->value;
    } else if (a->fmt >= 1 && a->fmt <= 3) {
        *at += 4;
    } else {
        return -1;
    }
    return 1;
}

/* EIATTR_CUDA_API_VERSION (130: CUDA 13.0) as 1000 * major + 10 * minor. */
static int
api_version_cuda(const eiattr *a)
{
    if (a->size < 4) {
        return 0;
    }
    uint32_t v = rd32(a->bytes);
    return v > 1000 ? 0 : (int)(v / 10 * 1000 + v % 10 * 10);
}

/* The toolkit that built the cubin: its kernels' EIATTR_CUDA_API_VERSION;
 * without one, what its ELF ABI implies (ABI 8 for an arch below sm_100:
 * CUDA 13; ABI 8 otherwise: CUDA 12.8 on; else CUDA 12). */
static int
elf_toolkit(const elf_file *f, int *cuda, char *why)
{
    *cuda = 0;
    for (unsigned i = 0; i < f->shnum; i++) {
        const char *s = sec_name(f, i);
        const uint8_t *p;
        size_t n, at = 0;
        eiattr a;
        int more;
        if (!s || strncmp(s, ".nv.info.", 9) != 0) {
            continue;
        }
        if (sec_bytes(f, i, &p, &n) != 0) {
            return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "cubin: section %s lies outside it", s);
        }
        while ((more = next_attr(p, n, &at, &a)) > 0) {
            if (a.id == EIATTR_CUDA_API_VERSION && api_version_cuda(&a) > *cuda) {
                *cuda = api_version_cuda(&a);
            }
        }
        if (more < 0) {
            return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "cubin: a corrupt attribute at byte %zu of %s", at, s);
        }
    }
    if (*cuda == 0) {
        *cuda = f->abi_version >= 8 ? (f->arch < 100 ? 13000 : 12080) : 12000;
    }
    return 0;
}

/* ---- cubin kernels ---- */

typedef struct {
    unsigned sym; /* symbol index (EIATTR_REGCOUNT names it) */
} elf_kernel;

/* Whether symbol s (24 bytes) names a kernel whose code is in .text.<name>. */
static int
is_kernel(const elf_file *f, const uint8_t *s, const char *name)
{
    const unsigned info = s[4], other = s[5], shndx = rd16(s + 6);
    if ((info & 0xf) != STT_FUNC || ((info >> 4) != STB_GLOBAL && (info >> 4) != STB_WEAK) ||
        !(other & STO_CUDA_ENTRY) || shndx == 0 || shndx >= f->shnum) {
        return 0;
    }
    const char *t = sec_name(f, shndx);
    return t && strncmp(t, ".text.", 6) == 0 && strcmp(t + 6, name) == 0;
}

/* Records one parameter (KPARAM_INFO, or _V2 for large ones). */
static int
kparam(ckcsi_function *fn, const eiattr *a, int *seen, char *why)
{
    if (a->size < 12) {
        return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "cubin: %s: a %zu-byte parameter record", fn->name, a->size);
    }
    const unsigned ordinal = rd16(a->bytes + 4), offset = rd16(a->bytes + 6);
    const uint32_t tail = rd32(a->bytes + 8);
    /* V1: the size in bits 18-31 of the last word (below: pointee alignment,
     * space, constant bank); V2: the size in its low half. */
    const uint32_t size = a->id == EIATTR_KPARAM_INFO ? tail >> 18 : tail & 0xffff;
    if ((int)ordinal >= fn->param_count || seen[ordinal]) {
        return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "cubin: %s: parameter ordinal %u (of %d) twice or out of range",
                      fn->name, ordinal, fn->param_count);
    }
    seen[ordinal] = 1;
    fn->params[ordinal] = (ckcsi_param){.offset = offset, .size = size, .align = 0};
    return 0;
}

/* The 3-word block shape of MAX_THREADS / REQNTID, and its product. */
static uint32_t
block_shape(const eiattr *a, uint32_t out[3])
{
    uint64_t product = 1;
    for (int k = 0; k < 3; k++) {
        out[k] = a->size >= 12 ? rd32(a->bytes + 4 * k) : 0;
        product *= out[k];
    }
    return product > 0xffffffffu ? 0xffffffffu : (uint32_t)product;
}

/* One attribute of a kernel's .nv.info.<name> other than its parameters. */
static void
kernel_attr(ckcsi_function *fn, const eiattr *a, uint32_t *cbank)
{
    uint32_t shape[3];
    switch (a->id) {
    case EIATTR_MAX_THREADS:
        fn->max_threads = block_shape(a, shape);
        break;
    case EIATTR_REQNTID: {
        uint32_t threads = block_shape(a, fn->reqntid);
        if (!fn->max_threads) {
            fn->max_threads = threads;
        }
        break;
    }
    case EIATTR_CBANK_PARAM_SIZE:
        fn->param_bytes = a->value;
        break;
    case EIATTR_PARAM_CBANK:
        if (a->size >= 8) {
            *cbank = rd32(a->bytes + 4) >> 16;
        }
        break;
    case EIATTR_MAXREG_COUNT:
        fn->max_registers = a->value >= 255 ? 0 : a->value;
        break;
    default:
        break;
    }
}

/* Reads .nv.info.<name> (n bytes at p) into fn. */
static int
kernel_info(ckcsi_function *fn, const uint8_t *p, size_t n, char *why)
{
    size_t at = 0;
    eiattr a;
    int more, count = 0;
    while ((more = next_attr(p, n, &at, &a)) > 0) {
        count += a.id == EIATTR_KPARAM_INFO || a.id == EIATTR_KPARAM_INFO_V2;
    }
    if (more < 0) {
        return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "cubin: %s: a corrupt attribute at byte %zu", fn->name, at);
    }
    fn->params = calloc(count ? (size_t)count : 1, sizeof *fn->params);
    int *seen = calloc(count ? (size_t)count : 1, sizeof *seen);
    if (!fn->params || !seen) {
        free(seen);
        return refuse(why, CKCSI_ERROR_OUT_OF_MEMORY, "no memory for %s's parameters", fn->name);
    }
    fn->param_count = count;
    uint32_t cbank = 0;
    int err = 0;
    for (at = 0; !err && next_attr(p, n, &at, &a) > 0;) {
        if (a.id == EIATTR_KPARAM_INFO || a.id == EIATTR_KPARAM_INFO_V2) {
            err = kparam(fn, &a, seen, why);
        } else {
            kernel_attr(fn, &a, &cbank);
        }
    }
    free(seen);
    if (!fn->param_bytes) {
        fn->param_bytes = cbank;
    }
    return err;
}

/* Checks that the parameters lie within the buffer (sizing it where no
 * attribute did). */
static int
check_params(ckcsi_function *fn, char *why)
{
    uint32_t end = 0;
    for (int i = 0; i < fn->param_count; i++) {
        uint32_t e = fn->params[i].offset + fn->params[i].size;
        end = e > end ? e : end;
    }
    if (!fn->param_bytes) {
        fn->param_bytes = end;
    }
    if (end > fn->param_bytes) {
        return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "cubin: %s: parameters end at byte %u of a %u-byte buffer",
                      fn->name, end, fn->param_bytes);
    }
    return 0;
}

/* Static shared memory, parameters, launch bounds of kernel fn. */
static int
kernel_records(const elf_file *f, ckcsi_function *fn, char *why)
{
    int s = find_section(f, ".nv.shared.", fn->name);
    if (s >= 0) {
        uint64_t size = rd64(sec(f, (unsigned)s) + 32);
        fn->static_shared = size > 0xffffffffu ? 0xffffffffu : (uint32_t)size;
    }
    s = find_section(f, ".nv.info.", fn->name);
    if (s >= 0) {
        const uint8_t *p;
        size_t n;
        if (sec_bytes(f, (unsigned)s, &p, &n) != 0) {
            return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "cubin: .nv.info.%s lies outside it", fn->name);
        }
        int err = kernel_info(fn, p, n, why);
        if (err) {
            return err;
        }
    }
    return check_params(fn, why);
}

/* EIATTR_REGCOUNT of the global .nv.info: (symbol, registers) pairs. */
static int
register_counts(const elf_file *f, const elf_kernel *ks, ckcsi_module *m)
{
    int s = find_section(f, ".nv.info", "");
    const uint8_t *p;
    size_t n, at = 0;
    eiattr a;
    int more;
    if (s < 0) {
        return 0;
    }
    if (sec_bytes(f, (unsigned)s, &p, &n) != 0) {
        return refuse(m->why, CKCSI_ERROR_INVALID_IMAGE, "cubin: .nv.info lies outside it");
    }
    while ((more = next_attr(p, n, &at, &a)) > 0) {
        if (a.id != EIATTR_REGCOUNT || a.size < 8) {
            continue;
        }
        for (int i = 0; i < m->count; i++) {
            if (ks[i].sym == rd32(a.bytes)) {
                m->functions[i].registers = rd32(a.bytes + 4);
            }
        }
    }
    if (more < 0) {
        return refuse(m->why, CKCSI_ERROR_INVALID_IMAGE, "cubin: a corrupt attribute at byte %zu of .nv.info", at);
    }
    return 0;
}

/* The symbol table (.symtab): *count symbols of *stride bytes, and its strings. */
static int
symbols(const elf_file *f, const uint8_t **syms, size_t *count, size_t *stride, const uint8_t **str, size_t *str_n,
        char *why)
{
    int s = find_section(f, ".symtab", "");
    size_t n;
    *count = 0;
    if (s < 0) {
        return 0;
    }
    const uint8_t *h = sec(f, (unsigned)s);
    unsigned link = rd32(h + 40);
    uint64_t entsize = rd64(h + 56);
    if (rd32(h + 4) != SHT_SYMTAB || entsize < 24 || entsize > 256 || link >= f->shnum ||
        sec_bytes(f, (unsigned)s, syms, &n) != 0 || sec_bytes(f, link, str, str_n) != 0) {
        return refuse(why, CKCSI_ERROR_INVALID_IMAGE, "cubin: a corrupt symbol table");
    }
    *stride = (size_t)entsize;
    *count = n / *stride;
    return 0;
}

/* The kernels' names into m, their symbols and code sections into *out. */
static int
elf_kernels(const elf_file *f, ckcsi_module *m, elf_kernel **out)
{
    const uint8_t *syms = NULL, *str = NULL;
    size_t count, stride = 0, str_n = 0;
    int err = symbols(f, &syms, &count, &stride, &str, &str_n, m->why);
    if (err) {
        return err;
    }
    m->functions = calloc(count ? count : 1, sizeof *m->functions);
    *out = calloc(count ? count : 1, sizeof **out);
    if (!m->functions || !*out) {
        return refuse(m->why, CKCSI_ERROR_OUT_OF_MEMORY, "no memory for the cubin's kernels");
    }
    for (size_t i = 0; i < count; i++) {
        const uint8_t *s = syms + i * stride;
        const char *name = str_at(str, str_n, rd32(s));
        if (!name || !is_kernel(f, s, name)) {
            continue;
        }
        ckcsi_function *fn = &m->functions[m->count];
        if (!(fn->name = strdup(name))) {
            return refuse(m->why, CKCSI_ERROR_OUT_OF_MEMORY, "no memory for a kernel's name");
        }
        (*out)[m->count++] = (elf_kernel){.sym = (unsigned)i};
    }
    return 0;
}

static int
elf_load(const uint8_t *d, size_t n, ckcsi_module *m)
{
    elf_file f;
    elf_kernel *ks = NULL;
    int err = elf_open(&f, d, n, m->why);
    if (err) {
        return err;
    }
    m->kind = CKCSI_IMAGE_ELF;
    m->arch = f.arch;
    m->elf_osabi = f.osabi;
    m->elf_abi_version = f.abi_version;
    err = elf_kernels(&f, m, &ks);
    for (int i = 0; !err && i < m->count; i++) {
        err = kernel_records(&f, &m->functions[i], m->why);
    }
    if (!err) {
        err = register_counts(&f, ks, m);
    }
    free(ks);
    if (!err) {
        err = elf_toolkit(&f, &m->cuda_version, m->why);
    }
    return err;
}

/* ---- PTX ---- */

typedef struct {
    const char *s;
    size_t n, at;
} ptx_lex;

typedef struct {
    const char *p;
    size_t len;
} ptx_tok;

static int
word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
           c == '%' || c == '.';
}

/* Skips blanks, comments; 0 at the end of the text (its length or a NUL). */
static int
ptx_skip(ptx_lex *x)
{
    while (x->at < x->n && x->s[x->at]) {
        const char c = x->s[x->at];
        const char d = x->at + 1 < x->n ? x->s[x->at + 1] : 0;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            x->at++;
        } else if (c == '/' && d == '/') {
            while (x->at < x->n && x->s[x->at] && x->s[x->at] != '\n') {
                x->at++;
            }
        } else if (c == '/' && d == '*') {
            for (x->at += 2; x->at < x->n && x->s[x->at]; x->at++) {
                if (x->s[x->at] == '*' && x->at + 1 < x->n && x->s[x->at + 1] == '/') {
                    x->at += 2;
                    break;
                }
            }
        } else {
            return 1;
        }
    }
    return 0;
}

/* The next token: a word (identifiers, directives, numbers: letters, digits,
 * _ $ % .), a quoted string, or one other character.  0 at the end. */
static int
ptx_next(ptx_lex *x, ptx_tok *t)
{
    if (!ptx_skip(x)) {
        return 0;
    }
    const size_t start = x->at;
    if (x->s[start] == '"') {
        x->at++;
        while (x->at < x->n && x->s[x->at] && x->s[x->at] != '"') {
            x->at++;
        }
        if (x->at < x->n && x->s[x->at] == '"') {
            x->at++;
        }
    } else if (word_char(x->s[start])) {
        while (x->at < x->n && word_char(x->s[x->at])) {
            x->at++;
        }
    } else {
        x->at++;
    }
    t->p = x->s + start;
    t->len = x->at - start;
    return 1;
}

static int
tok_is(const ptx_tok *t, const char *w)
{
    return t->len == strlen(w) && memcmp(t->p, w, t->len) == 0;
}

/* A decimal (or 0x hex) number below 2^31; -1 otherwise. */
static long
tok_number(const ptx_tok *t)
{
    size_t i = 0;
    int base = 10;
    long v = 0;
    if (t->len > 2 && t->p[0] == '0' && (t->p[1] == 'x' || t->p[1] == 'X')) {
        base = 16;
        i = 2;
    }
    if (i == t->len) {
        return -1;
    }
    for (; i < t->len; i++) {
        const char c = t->p[i];
        int digit = c >= '0' && c <= '9'                 ? c - '0'
                    : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : base == 16 && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                         : -1;
        if (digit < 0 || v > (0x7fffffffL - digit) / base) {
            return -1;
        }
        v = v * base + digit;
    }
    return v;
}

/* The PTX text's .version and .target (arch and its 'a'/'f' suffix). */
static int
ptx_header(const char *s, size_t n, ckcsi_module *m)
{
    ptx_lex x = {s, n, 0};
    ptx_tok t, v;
    int have_version = 0, have_target = 0;
    while ((!have_version || !have_target) && ptx_next(&x, &t)) {
        if (!(tok_is(&t, ".version") || tok_is(&t, ".target")) || !ptx_next(&x, &v)) {
            continue;
        }
        char buf[32] = {0};
        memcpy(buf, v.p, v.len < sizeof buf - 1 ? v.len : sizeof buf - 1);
        char suffix = 0, extra = 0;
        if (t.p[1] == 'v') {
            have_version = sscanf(buf, "%d.%d%c", &m->isa_major, &m->isa_minor, &extra) == 2;
        } else if (sscanf(buf, "sm_%d%c%c", &m->arch, &suffix, &extra) >= 1 && !extra) {
            have_target = suffix == 0 || suffix == 'a' || suffix == 'f';
            m->arch_suffix = suffix;
        }
    }
    if (!have_version || !have_target || m->isa_major < 0 || m->isa_minor < 0 || m->arch <= 0) {
        return refuse(m->why, CKCSI_ERROR_INVALID_IMAGE, "PTX: no .version X.Y and .target sm_NN at its start");
    }
    m->kind = CKCSI_IMAGE_PTX;
    m->cuda_version = ckcsi_ptx_isa_cuda(m->isa_major, m->isa_minor);
    return 0;
}

/* Bytes of a PTX parameter type (.u64: 8), 0 for another word. */
static uint32_t
ptx_type_size(const ptx_tok *t)
{
    static const struct {
        const char *name;
        uint32_t size;
    } types[] = {{".b8", 1},   {".u8", 1},  {".s8", 1},  {".b16", 2}, {".u16", 2},  {".s16", 2},   {".f16", 2},
                 {".bf16", 2}, {".b32", 4}, {".u32", 4}, {".s32", 4}, {".f32", 4},  {".f16x2", 4}, {".bf16x2", 4},
                 {".b64", 8},  {".u64", 8}, {".s64", 8}, {".f64", 8}, {".b128", 16}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (tok_is(t, types[i].name)) {
            return types[i].size;
        }
    }
    return 0;
}

/* One `.param [.align A] .type [.ptr [.space] [.align P]] name[[N]]`, up to
 * its ',' or ')' (in *end). */
static int
ptx_param(ptx_lex *x, ckcsi_param *p, ptx_tok *end)
{
    ptx_tok t;
    uint32_t elem = 0, align = 0;
    long count = 1;
    while (ptx_next(x, &t) && !tok_is(&t, ",") && !tok_is(&t, ")")) {
        if (tok_is(&t, ".align")) {
            long a = ptx_next(x, &t) ? tok_number(&t) : -1;
            if (a <= 0 || (a & (a - 1))) {
                return -1;
            }
            if (!elem) { /* before the type: the parameter's own; after .ptr: its pointee's */
                align = (uint32_t)a;
            }
        } else if (tok_is(&t, "[")) {
            if (!ptx_next(x, &t) || (count = tok_number(&t)) <= 0 || !ptx_next(x, &t) || !tok_is(&t, "]")) {
                return -1;
            }
        } else if (!elem) {
            elem = ptx_type_size(&t);
        }
    }
    *end = t;
    if (!elem || !(tok_is(end, ",") || tok_is(end, ")")) || (uint64_t)count * elem > 0x100000) {
        return -1;
    }
    p->size = (uint32_t)count * elem;
    p->align = align ? align : elem;
    return 0;
}

/* The parameter list after `.entry name(`, laid out as the driver lays a
 * launch's parameters out: each at the next multiple of its alignment. */
static int
ptx_params(ptx_lex *x, ckcsi_function *fn)
{
    ptx_tok t;
    size_t cap = 0;
    uint32_t offset = 0;
    for (;;) {
        if (!ptx_next(x, &t)) {
            return -1;
        }
        if (tok_is(&t, ")")) {
            break;
        }
        if (!tok_is(&t, ".param")) {
            return -1;
        }
        if ((size_t)fn->param_count == cap) {
            cap = cap ? 2 * cap : 8;
            ckcsi_param *grown = realloc(fn->params, cap * sizeof *grown);
            if (!grown) {
                return -2;
            }
            fn->params = grown;
        }
        ckcsi_param *p = &fn->params[fn->param_count++];
        if (ptx_param(x, p, &t) != 0) {
            return -1;
        }
        offset = (offset + p->align - 1) / p->align * p->align;
        p->offset = offset;
        offset += p->size;
        if (offset > 0x100000) {
            return -1;
        }
        if (tok_is(&t, ")")) {
            break;
        }
    }
    fn->param_bytes = offset;
    return 0;
}

/* Up to three numbers "x[, y[, z]]" (missing ones: 1), and their product. */
static uint32_t
ptx_shape(ptx_lex *x, uint32_t out[3])
{
    ptx_tok t;
    out[0] = out[1] = out[2] = 1;
    for (int k = 0; k < 3; k++) {
        size_t mark = x->at;
        long v = ptx_next(x, &t) ? tok_number(&t) : -1;
        if (v < 0) {
            x->at = mark;
            break;
        }
        out[k] = (uint32_t)v;
        mark = x->at;
        if (!(ptx_next(x, &t) && tok_is(&t, ","))) {
            x->at = mark;
            break;
        }
    }
    uint64_t product = (uint64_t)out[0] * out[1] * out[2];
    return product > 0xffffffffu ? 0xffffffffu : (uint32_t)product;
}

/* The directives between a kernel's parameters and its body: 1 at the body,
 * 0 for a declaration without one. */
static int
ptx_directives(ptx_lex *x, ckcsi_function *fn)
{
    ptx_tok t;
    uint32_t shape[3];
    while (ptx_next(x, &t)) {
        if (tok_is(&t, "{")) {
            return 1;
        }
        if (tok_is(&t, ";")) {
            return 0;
        }
        if (tok_is(&t, ".maxntid")) {
            fn->max_threads = ptx_shape(x, shape);
        } else if (tok_is(&t, ".reqntid")) {
            uint32_t threads = ptx_shape(x, fn->reqntid);
            if (!fn->max_threads) {
                fn->max_threads = threads;
            }
        } else if (tok_is(&t, ".maxnreg")) {
            long v = ptx_next(x, &t) ? tok_number(&t) : -1;
            fn->max_registers = v > 0 && v < 255 ? (uint32_t)v : 0;
        } else if (tok_is(&t, ".pragma")) {
            int more = 1;
            while (more && ptx_next(x, &t)) { /* its strings, up to its ';' */
                more = !tok_is(&t, ";");
            }
        }
    }
    return 0;
}

static void
function_free(ckcsi_function *fn)
{
    free(fn->name);
    free(fn->params);
    memset(fn, 0, sizeof *fn);
}

/* Appends fn to m (which then owns it). */
static int
add_function(ckcsi_module *m, size_t *cap, ckcsi_function *fn)
{
    if ((size_t)m->count == *cap) {
        size_t grown_cap = *cap ? 2 * *cap : 16;
        ckcsi_function *grown = realloc(m->functions, grown_cap * sizeof *grown);
        if (!grown) {
            return refuse(m->why, CKCSI_ERROR_OUT_OF_MEMORY, "no memory for the PTX's kernels");
        }
        m->functions = grown;
        *cap = grown_cap;
    }
    m->functions[m->count++] = *fn;
    return 0;
}

/* One `.entry name[(params)] directives {`: added to m when it has a body
 * (the first of a name). */
static int
ptx_entry(ptx_lex *x, ckcsi_module *m, size_t *cap)
{
    ptx_tok t;
    ckcsi_function fn = {0};
    if (!ptx_next(x, &t) || !word_char(t.p[0]) || t.p[0] == '.') {
        return refuse(m->why, CKCSI_ERROR_INVALID_IMAGE, "PTX: an .entry without a name at byte %zu", x->at);
    }
    if (!(fn.name = strndup(t.p, t.len))) {
        return refuse(m->why, CKCSI_ERROR_OUT_OF_MEMORY, "no memory for a kernel's name");
    }
    const size_t mark = x->at;
    int r = 0;
    if (ptx_next(x, &t) && tok_is(&t, "(")) {
        r = ptx_params(x, &fn);
    } else {
        x->at = mark;
    }
    if (r == 0 && ptx_directives(x, &fn) && !ckcsi_module_function(m, fn.name)) {
        return add_function(m, cap, &fn);
    }
    int code = r == -2 ? refuse(m->why, CKCSI_ERROR_OUT_OF_MEMORY, "no memory for %s's parameters", fn.name)
               : r < 0 ? refuse(m->why, CKCSI_ERROR_INVALID_IMAGE, "PTX: %s: a malformed parameter list", fn.name)
                       : 0;
    function_free(&fn);
    return code;
}

static int
ptx_load(const uint8_t *d, size_t n, ckcsi_module *m)
{
    const char *s = (const char *)d;
    int err = ptx_header(s, n, m);
    ptx_lex x = {s, n, 0};
    ptx_tok t;
    size_t cap = 0;
    while (!err && ptx_next(&x, &t)) {
        if (tok_is(&t, ".entry")) {
            err = ptx_entry(&x, m, &cap);
        }
    }
    return err;
}

/* ---- images ---- */

/* A bare cubin's length from its headers (the furthest table or section). */
static size_t
elf_extent(const uint8_t *d)
{
    uint64_t shoff = rd64(d + 0x28), phoff = rd64(d + 0x20);
    unsigned shentsize = rd16(d + 0x3a), shnum = rd16(d + 0x3c), phentsize = rd16(d + 0x36), phnum = rd16(d + 0x38);
    uint64_t end = shoff + (uint64_t)shentsize * shnum;
    if (phoff + (uint64_t)phentsize * phnum > end) {
        end = phoff + (uint64_t)phentsize * phnum;
    }
    for (unsigned i = 0; shentsize >= 64 && i < shnum; i++) {
        const uint8_t *s = d + shoff + (size_t)i * shentsize;
        if (rd32(s + 4) != SHT_NOBITS && rd64(s + 24) + rd64(s + 32) > end) {
            end = rd64(s + 24) + rd64(s + 32);
        }
    }
    return end > SIZE_CAP ? (size_t)SIZE_CAP : (size_t)end;
}

/* The image as one entry of its own (a cubin, PTX text). */
static int
parse_bare(ckcsi_fatbin *fb, const uint8_t *p, size_t n)
{
    ckcsi_module m = {0};
    int is_elf = n >= 4 ? memcmp(p, "\177ELF", 4) == 0 : n == 0 && memcmp(p, "\177ELF", 4) == 0;
    if (is_elf && n == 0) {
        n = elf_extent(p);
    }
    if (!is_elf && n == 0) {
        n = strlen((const char *)p);
    }
    ckcsi_entry e = {.kind = is_elf ? CKCSI_IMAGE_ELF : CKCSI_IMAGE_PTX,
                     .flags = FLAG_64BIT,
                     .payload = p,
                     .payload_size = n,
                     .size = n};
    if (is_elf) {
        elf_file f;
        int err = elf_open(&f, p, n, fb->why);
        if (err) {
            return err;
        }
        e.arch = f.arch;
        e.version_major = 1;
        e.version_minor = f.abi_version;
    } else {
        int err = ptx_header((const char *)p, n, &m);
        if (err) {
            return refuse(fb->why, err, "neither a fatbin nor a cubin, nor PTX text: %s", m.why);
        }
        e.arch = m.arch;
        e.version_major = m.isa_major;
        e.version_minor = m.isa_minor;
    }
    fb->bare = e.kind;
    fb->image_size = n;
    return add_entry(fb, &e);
}

int
ckcsi_fatbin_parse(ckcsi_fatbin *fb, const void *image, size_t size)
{
    memset(fb, 0, sizeof *fb);
    fb->image = image;
    if (!image) {
        return refuse(fb->why, CKCSI_ERROR_INVALID_VALUE, "no image");
    }
    const uint8_t *p = image;
    if (size != 0 && size < 4) {
        return refuse(fb->why, CKCSI_ERROR_INVALID_IMAGE, "a %zu-byte image", size);
    }
    if (rd32(p) == FATBIN_MAGIC) {
        return parse_containers(fb, p, size);
    }
    return parse_bare(fb, p, size);
}

void
ckcsi_fatbin_free(ckcsi_fatbin *fb)
{
    for (int i = 0; i < fb->count; i++) {
        free(fb->entries[i].data);
    }
    free(fb->entries);
    fb->entries = NULL;
    fb->count = 0;
}

/* ---- the driver's choice ---- */

/* "sm_90 SASS", "compute_120 PTX". */
static const char *
entry_text(const ckcsi_entry *e, char buf[48])
{
    if (e->kind == CKCSI_IMAGE_ELF) {
        snprintf(buf, 48, "sm_%d SASS", e->arch);
    } else if (e->kind == CKCSI_IMAGE_PTX) {
        snprintf(buf, 48, "compute_%d PTX", e->arch);
    } else {
        snprintf(buf, 48, "kind %d (arch %d)", e->kind, e->arch);
    }
    return buf;
}

/* Whether the driver reads the entry's compression: 1, or 0 with the reason. */
static int
reads_compression(const ckcsi_entry *e, int driver, char *why, size_t n)
{
    char v[16];
    if (e->compression == CKCSI_ZIP_ZSTD && driver < 12040) {
        snprintf(why, n, "zstd-compressed, which needs CUDA 12.4, the driver is CUDA %s", cuda_text(driver, v));
        return 0;
    }
    return 1;
}

/* Whether SASS entry i loads: 1, 0 with the reason, or a CUresult (> 1)
 * where reading it failed (fb->why). */
static int
sass_usable(ckcsi_fatbin *fb, int i, int major, int minor, int driver, char *why, size_t n)
{
    ckcsi_entry *e = &fb->entries[i];
    char v[2][16];
    if (e->arch / 10 != major || e->arch % 10 > minor) {
        snprintf(why, n, "compute capability %d.%d %s", major, minor,
                 e->arch / 10 != major ? "has another major" : "is lower");
        return 0;
    }
    if (!(e->flags & FLAG_64BIT)) {
        snprintf(why, n, "a 32-bit cubin");
        return 0;
    }
    if (!reads_compression(e, driver, why, n)) {
        return 0;
    }
    const uint8_t *d;
    size_t size;
    elf_file f;
    int cuda, err = entry_bytes(e, &d, &size, fb->why);
    if (!err) {
        err = elf_open(&f, d, size, fb->why);
    }
    if (!err) {
        err = elf_toolkit(&f, &cuda, fb->why);
    }
    if (!err && f.arch != e->arch) {
        err = refuse(fb->why, CKCSI_ERROR_INVALID_IMAGE, "entry %d: the fatbin says sm_%d, its cubin sm_%d", i, e->arch,
                     f.arch);
    }
    if (err) {
        return err;
    }
    if (driver / 1000 < cuda / 1000) {
        snprintf(why, n, "built by CUDA %s (ELF ABI %d), the driver is CUDA %s", cuda_text(cuda, v[0]), f.abi_version,
                 cuda_text(driver, v[1]));
        return 0;
    }
    return 1;
}

/* Whether PTX entry i loads: as sass_usable; *isa_only: passed over for its ISA alone. */
static int
ptx_usable(ckcsi_fatbin *fb, int i, int major, int minor, int driver, char *why, size_t n, int *isa_only)
{
    ckcsi_entry *e = &fb->entries[i];
    const int cc = 10 * major + minor;
    const int needs = ckcsi_ptx_isa_cuda(e->version_major, e->version_minor);
    char v[2][16];
    if (e->arch > cc) {
        snprintf(why, n, "compute capability %d.%d is lower", major, minor);
        return 0;
    }
    if (driver < needs) {
        snprintf(why, n, "PTX ISA %d.%d needs CUDA %s, the driver is CUDA %s", e->version_major, e->version_minor,
                 cuda_text(needs, v[0]), cuda_text(driver, v[1]));
        *isa_only = 1;
        return 0;
    }
    if (!reads_compression(e, driver, why, n)) {
        return 0;
    }
    const uint8_t *d;
    size_t size;
    ckcsi_module m = {0};
    int err = entry_bytes(e, &d, &size, fb->why);
    if (err) {
        return err;
    }
    if (ptx_header((const char *)d, size, &m) != 0) {
        return refuse(fb->why, CKCSI_ERROR_INVALID_IMAGE, "entry %d: %s", i, m.why);
    }
    if (m.arch_suffix && (m.arch_suffix == 'a' ? e->arch != cc : e->arch / 10 != major)) {
        snprintf(why, n, "sm_%d%c: a target for compute capability %d.%d%s only", m.arch, m.arch_suffix, e->arch / 10,
                 e->arch % 10, m.arch_suffix == 'a' ? "" : " and its family");
        return 0;
    }
    return 1;
}

/* The best entry of one kind (highest arch, the first of equals), or -1;
 * passed-over entries are appended to `passed`. */
static int
best_of(ckcsi_fatbin *fb, int kind, int major, int minor, int driver, char *passed, int *isa_only)
{
    int best = -1;
    for (int i = 0; i < fb->count; i++) {
        ckcsi_entry *e = &fb->entries[i];
        char name[48], why[256] = "";
        if (e->kind != kind) {
            continue;
        }
        int r = kind == CKCSI_IMAGE_ELF ? sass_usable(fb, i, major, minor, driver, why, sizeof why)
                                        : ptx_usable(fb, i, major, minor, driver, why, sizeof why, isa_only);
        if (r > 1) {
            return -r;
        }
        if (r == 0) {
            append(passed, "%s%s: %s", passed[0] ? "; " : "", entry_text(e, name), why);
        } else if (best < 0 || e->arch > fb->entries[best].arch) {
            best = i;
        }
    }
    return best;
}

int
ckcsi_fatbin_choose(ckcsi_fatbin *fb, int cc_major, int cc_minor, int driver, int *index)
{
    char passed[CKCSI_WHY_MAX] = "", name[48], v[16];
    int isa_only = 0;
    *index = -1;
    int best = best_of(fb, CKCSI_IMAGE_ELF, cc_major, cc_minor, driver, passed, &isa_only);
    if (best == -1) {
        best = best_of(fb, CKCSI_IMAGE_PTX, cc_major, cc_minor, driver, passed, &isa_only);
    }
    if (best < -1) {
        return -best;
    }
    if (best >= 0) {
        *index = best;
        return refuse(fb->why, 0, "%s", entry_text(&fb->entries[best], name));
    }
    for (int i = 0; i < fb->count; i++) {
        if (fb->entries[i].kind != CKCSI_IMAGE_ELF && fb->entries[i].kind != CKCSI_IMAGE_PTX) {
            append(passed, "%s%s: neither SASS nor PTX", passed[0] ? "; " : "", entry_text(&fb->entries[i], name));
        }
    }
    return refuse(fb->why, isa_only ? CKCSI_ERROR_UNSUPPORTED_PTX_VERSION : CKCSI_ERROR_NO_BINARY_FOR_GPU,
                  "no image for compute capability %d.%d under CUDA %s: %s", cc_major, cc_minor, cuda_text(driver, v),
                  passed[0] ? passed : "the image has no entries");
}

/* ---- loading ---- */

int
ckcsi_fatbin_load(ckcsi_fatbin *fb, int index, ckcsi_module *m)
{
    memset(m, 0, sizeof *m);
    if (index < 0 || index >= fb->count) {
        return refuse(m->why, CKCSI_ERROR_INVALID_VALUE, "no entry %d (of %d)", index, fb->count);
    }
    ckcsi_entry *e = &fb->entries[index];
    const uint8_t *d;
    size_t n;
    int err = entry_bytes(e, &d, &n, m->why);
    if (err) {
        return err;
    }
    if (e->kind == CKCSI_IMAGE_ELF) {
        return elf_load(d, n, m);
    }
    if (e->kind == CKCSI_IMAGE_PTX) {
        return ptx_load(d, n, m);
    }
    return refuse(m->why, CKCSI_ERROR_INVALID_IMAGE, "entry %d: kind %d is neither PTX nor a cubin", index, e->kind);
}

const ckcsi_function *
ckcsi_module_function(const ckcsi_module *m, const char *name)
{
    for (int i = 0; i < m->count; i++) {
        if (strcmp(m->functions[i].name, name) == 0) {
            return &m->functions[i];
        }
    }
    return NULL;
}

void
ckcsi_module_free(ckcsi_module *m)
{
    for (int i = 0; i < m->count; i++) {
        function_free(&m->functions[i]);
    }
    free(m->functions);
    m->functions = NULL;
    m->count = 0;
}
