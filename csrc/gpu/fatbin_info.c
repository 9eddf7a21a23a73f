/* SPDX-License-Identifier: Apache-2.0 */
/* The embedded fatbins' entries and the drivers they need (see fatbin_info.h). */
#if defined(CKC_WITH_CUDA)

#include <string.h>

#include "fatbin_info.h"
#include "fatbins.h"
#include "gpu.h"

#define FATBIN_MAGIC 0xBA55ED50u
#define FLAG_ZSTD 0x8000u

static unsigned
u16_at(const unsigned char *p)
{
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static unsigned long
u32_at(const unsigned char *p)
{
    return (unsigned long)u16_at(p) | (unsigned long)u16_at(p + 2) << 16;
}

static unsigned long long
u64_at(const unsigned char *p)
{
    return (unsigned long long)u32_at(p) | (unsigned long long)u32_at(p + 4) << 32;
}

/* The first CUDA release whose driver JITs PTX of ISA major.minor (NVIDIA's PTX ISA
 * history: 8.0-8.5 are CUDA 12.0-12.5, 8.6 12.7, 8.7 12.8, 8.8 12.9; 9.N is 13.N). */
static int
ptx_isa_driver(int major, int minor)
{
    if (major == 8) {
        return minor <= 5 ? 12000 + 10 * minor : 12000 + 10 * (minor + 1);
    }
    return major < 8 ? 12000 : 1000 * (major + 4) + 10 * minor;
}

/* The driver SASS of arch needs: the major of the toolchain that built it (the
 * build's record); else, for a fatbin from elsewhere, the ELF ABI's guess (ABI 8
 * is also CUDA 12.9's for sm_100 and newer, so it may ask too much). */
static int
sass_driver(int arch, int abi)
{
    for (int i = 0; i < ckc_kernels_sass_count; i++) {
        if (ckc_kernels_sass[i].arch == arch) {
            return ckc_kernels_sass[i].cuda / 1000 * 1000;
        }
    }
    return abi >= 8 ? 13000 : 12000;
}

static int
entry_driver(const ckc_image_entry *e)
{
    int driver = e->kind == CKC_IMAGE_PTX ? ptx_isa_driver(e->version_major, e->version_minor)
                                          : sass_driver(e->arch, e->version_minor);
    return e->zstd && driver < 12040 ? 12040 : driver;
}

int
ckc_fatbin_entries(const unsigned char *image, size_t bytes, ckc_image_entry *out, int cap)
{
    size_t at = 0;
    int n = 0;
    while (at + 16 <= bytes && u32_at(image + at) == FATBIN_MAGIC) {
        const size_t header = u16_at(image + at + 6);
        const unsigned long long body = u64_at(image + at + 8);
        size_t e = at + header;
        const size_t end = body > bytes - at - header ? bytes : at + header + (size_t)body;
        while (e + 64 <= end) {
            const size_t entry_header = u32_at(image + e + 4);
            const unsigned long long payload = u64_at(image + e + 8);
            if (entry_header < 64 || entry_header > end - e || payload > end - e - entry_header) {
                break; /* a damaged entry: what follows cannot be found */
            }
            if (n < cap) {
                ckc_image_entry *x = &out[n];
                x->kind = (int)u16_at(image + e);
                x->version_minor = (int)u16_at(image + e + 24);
                x->version_major = (int)u16_at(image + e + 26);
                x->arch = (int)u32_at(image + e + 28);
                x->zstd = (u64_at(image + e + 40) & FLAG_ZSTD) != 0;
                x->driver = entry_driver(x);
            }
            n++;
            e += entry_header + (size_t)payload;
        }
        at = end;
    }
    return at == 0 ? -1 : n;
}

int
ckc_image_runs_on(const ckc_image_entry *e, int cc)
{
    if (e->kind == CKC_IMAGE_SASS) {
        return e->arch / 10 == cc / 10 && e->arch % 10 <= cc % 10;
    }
    return e->kind == CKC_IMAGE_PTX && e->arch <= cc;
}

#define MAX_ENTRIES 32

/* The oldest driver that loads something of fatbin f for cc: 0 when nothing runs on it. */
static int
fatbin_driver_for(const ckc_fatbin *f, int cc)
{
    ckc_image_entry entries[MAX_ENTRIES];
    const int n = ckc_fatbin_entries(f->data, f->size, entries, MAX_ENTRIES);
    int best = 0;
    for (int i = 0; i < n && i < MAX_ENTRIES; i++) {
        if (ckc_image_runs_on(&entries[i], cc) && (best == 0 || entries[i].driver < best)) {
            best = entries[i].driver;
        }
    }
    return best;
}

int
ckc_kernels_driver_for(int cc)
{
    int needed = 0;
    for (int i = 0; i < ckc_fatbin_count; i++) {
        const int d = fatbin_driver_for(&ckc_fatbins[i], cc);
        if (d == 0) {
            return 0; /* a module with no code for this GPU: no driver helps */
        }
        needed = d > needed ? d : needed;
    }
    return needed;
}

int
ckc_kernels_driver_min(void)
{
    ckc_image_entry entries[MAX_ENTRIES];
    int lowest = 0;
    const int n = ckc_fatbin_count > 0 ? ckc_fatbin_entries(ckc_fatbins[0].data, ckc_fatbins[0].size, entries,
                                                             MAX_ENTRIES)
                                       : 0;
    for (int i = 0; i < n && i < MAX_ENTRIES; i++) {
        const int cc = entries[i].arch; /* a GPU of exactly the entry's architecture */
        const int d = ckc_kernels_driver_for(cc);
        if (d != 0 && (lowest == 0 || d < lowest)) {
            lowest = d;
        }
    }
    return lowest;
}

int
ckc_gpu_kernel_images(ckc_kernel_image *out, int cap)
{
    int n = 0;
    for (int i = 0; i < ckc_fatbin_count; i++) {
        ckc_image_entry entries[MAX_ENTRIES];
        const int count = ckc_fatbin_entries(ckc_fatbins[i].data, ckc_fatbins[i].size, entries, MAX_ENTRIES);
        for (int j = 0; j < count && j < MAX_ENTRIES; j++, n++) {
            if (n < cap) {
                const ckc_image_entry *e = &entries[j];
                const ckc_kernel_image x = {ckc_fatbins[i].name, e->kind == CKC_IMAGE_SASS, e->arch, e->version_major,
                                         e->version_minor, e->zstd, e->driver};
                out[n] = x;
            }
        }
    }
    return n;
}

const unsigned char *
ckc_gpu_kernel_image(const char *module, size_t *bytes)
{
    for (int i = 0; i < ckc_fatbin_count; i++) {
        if (strcmp(ckc_fatbins[i].name, module) == 0) {
            *bytes = ckc_fatbins[i].size;
            return ckc_fatbins[i].data;
        }
    }
    *bytes = 0;
    return NULL;
}

const char *
ckc_driver_branch(int cuda_version)
{
    static const struct {
        int cuda;
        const char *branch;
    } branches[] = {{13000, "R580"}, {12090, "R575"}, {12080, "R570"}, {12060, "R560"}, {12040, "R550"},
                    {12030, "R545"}, {12020, "R535"}, {12000, "R525"}};
    for (size_t i = 0; i < sizeof branches / sizeof branches[0]; i++) {
        if (cuda_version >= branches[i].cuda) {
            return branches[i].branch;
        }
    }
    return "older than R525";
}

#endif /* CKC_WITH_CUDA */
