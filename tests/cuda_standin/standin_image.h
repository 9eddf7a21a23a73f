/* SPDX-License-Identifier: Apache-2.0 */
/* The images cuModuleLoadData receives, read as a driver reads them
 * (standin_image.c): a fatbin as nvcc and fatbinary write it (or a bare cubin,
 * or PTX text), the entry the driver picks for a device and a driver version,
 * and the records of each kernel of that entry that launches are checked
 * against (parameters, launch bounds, static shared memory, registers).
 *
 * Every read is bounds-checked: a truncated or corrupt image is refused with
 * CUDA_ERROR_INVALID_IMAGE and a reason, never read past.  The one exception
 * is the API's own: cuModuleLoadData gets no length, so an image passed with
 * size 0 is trusted to be as long as its headers say.
 *
 * The layouts, as measured on nvcc 13.0 / fatbinary / ptxas 12.9 output and
 * checked against cuobjdump (tests/test_standin_image.py):
 *   fatbin container: u32 magic 0xBA55ED50, u16 version 1, u16 header size,
 *     u64 bytes of entries; containers may follow each other.
 *   entry: u16 kind (1 PTX, 2 ELF), u16 0x0101, u32 header size, u64 payload
 *     size (padded); +16 u32 compressed size; +24 u16 minor, +26 u16 major
 *     (PTX: the ISA; ELF: 1.7 for an ELF ABI 7 cubin, 1.8 for ABI 8);
 *     +28 u32 arch (90, 120); +40 u64 flags (0x1 64-bit, 0x2000 LZ4 block,
 *     0x8000 zstd); +56 u64 decompressed size; a header longer than 64 bytes
 *     holds u32 offset, u32 length of its options at +64 (PTX: the ptxas
 *     options text; ELF: a binary copy of the cubin's .nv.compat records).
 *   cubin: kernels are STT_FUNC symbols (global or weak) marked as entries
 *     (st_other 0x10) in section .text.<name>; .nv.info.<name> holds their
 *     attributes (u8 format, u8 id, u16 value or, for format 4, size + bytes),
 *     the global .nv.info their register counts, .nv.shared.<name>'s size is
 *     their static shared memory; e_flags holds the arch (bits 0-7 for ELF
 *     ABI 7, bits 8-15 for ABI 8); EIATTR_CUDA_API_VERSION the toolkit that
 *     built it (130: CUDA 13.0). */
#ifndef CKC_STANDIN_IMAGE_H
#define CKC_STANDIN_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* Entry kinds (fatbin entry header) and compressions. */
enum { CKCSI_IMAGE_PTX = 1, CKCSI_IMAGE_ELF = 2 };
enum { CKCSI_ZIP_NONE = 0, CKCSI_ZIP_LZ4 = 1, CKCSI_ZIP_ZSTD = 2 };

/* Reasons are kept to this many bytes (longer ones are cut). */
#define CKCSI_WHY_MAX 1024

/* libzstd is opened at run time (dlopen), once per process, by this name
 * unless the environment variable CKCSI_LIBZSTD names another (tests name a
 * missing one). */
#define CKCSI_LIBZSTD_DEFAULT "libzstd.so.1"

/* One entry of a fatbin, as its header describes it. */
typedef struct {
    int kind;                         /* CKCSI_IMAGE_PTX, CKCSI_IMAGE_ELF, or another kind (never chosen) */
    int arch;                         /* 10 * major + minor: sm_90 / compute_90 is 90 */
    int version_major, version_minor; /* PTX: ISA version (9.0); ELF: cubin version (1.7, 1.8) */
    uint64_t flags;                   /* the header's flags */
    int compression;                  /* CKCSI_ZIP_* */
    const uint8_t *payload;           /* the stored bytes, inside the image */
    size_t payload_size;              /* stored bytes, without padding */
    size_t size;                      /* bytes once decompressed */
    const uint8_t *options;           /* inside the image; not NUL-terminated */
    size_t options_size;
    uint8_t *data;                    /* private: the decompressed bytes, once needed */
} ckcsi_entry;

/* A parsed image.  Owns nothing of the image: it must outlive this.  One
 * thread at a time: choosing and loading decompress entries into it. */
typedef struct {
    const uint8_t *image;
    size_t image_size; /* bytes read: the containers, the cubin or the PTX text */
    int bare;          /* 0 for a fatbin; CKCSI_IMAGE_ELF / _PTX: the image was that alone */
    int count;
    ckcsi_entry *entries;
    char why[CKCSI_WHY_MAX]; /* the last refusal's reason; after a choice, what was chosen */
} ckcsi_fatbin;

/* One kernel parameter: its byte offset in the parameter buffer, size and
 * alignment (PTX only: a cubin records no alignment, there it is 0). */
typedef struct {
    uint32_t offset, size, align;
} ckcsi_param;

/* One kernel of a loaded entry. */
typedef struct {
    char *name;
    int param_count;
    ckcsi_param *params;    /* in order */
    uint32_t param_bytes;   /* the parameter buffer's size */
    uint32_t max_threads;   /* launch bounds: threads per block at most (maxntid, else reqntid); 0: none */
    uint32_t reqntid[3];    /* the block shape a kernel requires; zeros: none */
    uint32_t max_registers; /* register cap (maxnreg, __maxnreg__); 0: none below the hardware's 255 */
    uint32_t static_shared; /* bytes (ELF only; 0 for PTX, which ptxas has not yet laid out) */
    uint32_t registers;     /* per thread (ELF only; 0 for PTX) */
} ckcsi_function;

/* A loaded entry: independent of the image and of the ckcsi_fatbin. */
typedef struct {
    int kind;         /* CKCSI_IMAGE_PTX or CKCSI_IMAGE_ELF */
    int arch;         /* ELF: from e_flags; PTX: from .target */
    char arch_suffix; /* PTX .target's 'a' or 'f' (sm_90a, sm_100f); 0: none */
    int cuda_version; /* ELF: the toolkit that built it; PTX: the first CUDA of its ISA (1000 * major + 10 * minor) */
    int elf_osabi, elf_abi_version;
    int isa_major, isa_minor; /* PTX */
    int count;
    ckcsi_function *functions;
    char why[CKCSI_WHY_MAX]; /* the refusal's reason when loading failed */
} ckcsi_module;

/* Parses the image at `image`: a fatbin (all containers within `size`, or
 * only the first when size is 0, as cuModuleLoadData reads it), a cubin or
 * PTX text.  0, CKCSI_ERROR_INVALID_IMAGE or CKCSI_ERROR_OUT_OF_MEMORY, with
 * fb->why set.  Free with ckcsi_fatbin_free whatever it returns. */
int ckcsi_fatbin_parse(ckcsi_fatbin *fb, const void *image, size_t size);

/* The entry the driver loads for a device of compute capability
 * (cc_major, cc_minor) under a driver of version `driver` (12080: CUDA 12.8):
 * the highest usable SASS, else the highest usable PTX.  SASS of arch sm_XY is
 * usable iff X == cc_major and Y <= cc_minor, the driver's major is at least
 * that of the toolkit that built it (EIATTR_CUDA_API_VERSION; the ELF ABI
 * where absent) and it reads the entry's compression (zstd: 12.4 on).  PTX of
 * compute_XY is usable iff XY <= the device's (an 'a' target: equal; 'f': same
 * major), the driver reads its ISA and its compression.  0 with *index set and
 * fb->why naming the choice; CKCSI_ERROR_NO_BINARY_FOR_GPU, or
 * CKCSI_ERROR_UNSUPPORTED_PTX_VERSION where a PTX of a usable arch was passed
 * over for its ISA alone, with fb->why naming each entry and why it was passed
 * over; CKCSI_ERROR_INVALID_IMAGE where an entry that might be chosen is
 * corrupt. */
int ckcsi_fatbin_choose(ckcsi_fatbin *fb, int cc_major, int cc_minor, int driver, int *index);

/* Decompresses entry `index` and reads its kernels into *m.  0,
 * CKCSI_ERROR_INVALID_IMAGE (m->why says why) or CKCSI_ERROR_OUT_OF_MEMORY.
 * Free m with ckcsi_module_free whatever it returns. */
int ckcsi_fatbin_load(ckcsi_fatbin *fb, int index, ckcsi_module *m);

/* The kernel called `name`, or NULL. */
const ckcsi_function *ckcsi_module_function(const ckcsi_module *m, const char *name);

void ckcsi_module_free(ckcsi_module *m);
void ckcsi_fatbin_free(ckcsi_fatbin *fb);

/* The first CUDA version (1000 * major + 10 * minor) whose driver reads PTX
 * of ISA isa_major.isa_minor (NVIDIA's PTX ISA release history: 8.0 to 8.5 are
 * CUDA 12.0 to 12.5, 8.6 12.7, 8.7 12.8, 8.8 12.9, 9.0 13.0, 9.1 13.1); an ISA
 * newer than the table is taken to follow its rule (9.x: CUDA 13.x). */
int ckcsi_ptx_isa_cuda(int isa_major, int isa_minor);

#endif /* CKC_STANDIN_IMAGE_H */
