/* SPDX-License-Identifier: Apache-2.0 */
/* Prints what standin_image.c reads from fatbins (or cubins, PTX files), one
 * JSON object per file and line: the entries, each entry's kernels and their
 * parameters, and the driver's choice for each --choose given
 * (tests/test_standin_image.py compares them with cuobjdump and the rules).
 *
 *   image_dump [--unsized] [--choose MAJOR.MINOR@DRIVER]... FILE...
 *
 * --unsized passes the image without its length, as cuModuleLoadData gets it
 * (intact files only: a truncated one would then be read past its end).
 * Exit status 0 when every file was read (whatever it held), 2 otherwise. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"
#include "standin_image.h"

#define CHOICES_MAX 64

static void
json_string(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20 || c >= 0x7f) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

static void
json_text(const char *s)
{
    json_string(s, strlen(s));
}

static const char *
kind_name(int kind)
{
    return kind == CKCSI_IMAGE_PTX ? "ptx" : kind == CKCSI_IMAGE_ELF ? "elf" : "other";
}

static void
print_function(const ckcsi_function *fn)
{
    printf("{\"name\": ");
    json_text(fn->name);
    printf(", \"params\": [");
    for (int i = 0; i < fn->param_count; i++) {
        printf("%s{\"offset\": %u, \"size\": %u, \"align\": %u}", i ? ", " : "", fn->params[i].offset,
               fn->params[i].size, fn->params[i].align);
    }
    printf("], \"param_bytes\": %u, \"max_threads\": %u, \"reqntid\": [%u, %u, %u], \"max_registers\": %u, "
           "\"static_shared\": %u, \"registers\": %u}",
           fn->param_bytes, fn->max_threads, fn->reqntid[0], fn->reqntid[1], fn->reqntid[2], fn->max_registers,
           fn->static_shared, fn->registers);
}

static void
print_module(ckcsi_fatbin *fb, int index)
{
    ckcsi_module m;
    int code = ckcsi_fatbin_load(fb, index, &m);
    printf("{\"code\": %d, \"why\": ", code);
    json_text(code ? m.why : "");
    if (!code) {
        printf(", \"kind\": \"%s\", \"arch\": %d, \"arch_suffix\": \"%s\", \"cuda_version\": %d, \"osabi\": %d, "
               "\"abi_version\": %d, \"isa\": [%d, %d], \"functions\": [",
               kind_name(m.kind), m.arch,
               m.arch_suffix == 'a'   ? "a"
               : m.arch_suffix == 'f' ? "f"
                                      : "",
               m.cuda_version, m.elf_osabi, m.elf_abi_version, m.isa_major, m.isa_minor);
        for (int i = 0; i < m.count; i++) {
            printf(i ? ", " : "");
            print_function(&m.functions[i]);
        }
        printf("]");
    }
    printf("}");
    ckcsi_module_free(&m);
}

static void
print_entry(ckcsi_fatbin *fb, int i)
{
    static const char *zips[] = {"none", "lz4", "zstd"};
    const ckcsi_entry *e = &fb->entries[i];
    printf("{\"index\": %d, \"kind\": \"%s\", \"kind_id\": %d, \"arch\": %d, \"version\": [%d, %d], "
           "\"flags\": %llu, \"compression\": \"%s\", \"payload_size\": %zu, \"size\": %zu, \"options\": ",
           i, kind_name(e->kind), e->kind, e->arch, e->version_major, e->version_minor, (unsigned long long)e->flags,
           zips[e->compression], e->payload_size, e->size);
    json_string((const char *)e->options, e->options_size);
    printf(", \"module\": ");
    print_module(fb, i);
    printf("}");
}

typedef struct {
    int major, minor, driver;
} choice;

static void
print_choices(ckcsi_fatbin *fb, const choice *c, int count)
{
    printf(", \"choices\": [");
    for (int i = 0; i < count; i++) {
        int index;
        int code = ckcsi_fatbin_choose(fb, c[i].major, c[i].minor, c[i].driver, &index);
        printf("%s{\"cc\": [%d, %d], \"driver\": %d, \"code\": %d, \"index\": %d, \"why\": ", i ? ", " : "", c[i].major,
               c[i].minor, c[i].driver, code, index);
        json_text(fb->why);
        printf("}");
    }
    printf("]");
}

/* The file's bytes (malloc'd: aligned as a fatbin wants), or NULL. */
static unsigned char *
read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *d = NULL;
    long size;
    if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (d = malloc((size_t)size + 1)) && fread(d, 1, (size_t)size, f) == (size_t)size) {
        d[size] = 0; /* PTX text ends here when read without its length */
        *n = (size_t)size;
    } else {
        free(d);
        d = NULL;
    }
    if (f) {
        fclose(f);
    }
    return d;
}

static int
dump(const char *path, int unsized, const choice *c, int choices)
{
    size_t n;
    unsigned char *d = read_file(path, &n);
    if (!d) {
        fprintf(stderr, "image_dump: cannot read %s\n", path);
        return 2;
    }
    ckcsi_fatbin fb = {0};
    /* an empty file has no size to pass: 0 means none given */
    int code = n ? ckcsi_fatbin_parse(&fb, d, unsized ? 0 : n) : CKCSI_ERROR_INVALID_IMAGE;
    if (!n) {
        snprintf(fb.why, sizeof fb.why, "an empty file");
    }
    printf("{\"file\": ");
    json_text(path);
    printf(", \"file_size\": %zu, \"code\": %d, \"why\": ", n, code);
    json_text(code ? fb.why : "");
    printf(", \"image_size\": %zu, \"bare\": %d, \"entries\": [", fb.image_size, fb.bare);
    for (int i = 0; !code && i < fb.count; i++) {
        printf(i ? ", " : "");
        print_entry(&fb, i);
    }
    printf("]");
    if (!code) {
        print_choices(&fb, c, choices);
    }
    printf("}\n");
    fflush(stdout);
    ckcsi_fatbin_free(&fb);
    free(d);
    return 0;
}

int
main(int argc, char **argv)
{
    static choice c[CHOICES_MAX];
    int choices = 0, unsized = 0, status = 0, files = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--unsized") == 0) {
            unsized = 1;
        } else if (strcmp(argv[i], "--choose") == 0 && i + 1 < argc && choices < CHOICES_MAX) {
            choice *k = &c[choices++];
            if (sscanf(argv[++i], "%d.%d@%d", &k->major, &k->minor, &k->driver) != 3) {
                fprintf(stderr, "image_dump: --choose MAJOR.MINOR@DRIVER, not %s\n", argv[i]);
                return 2;
            }
        } else {
            files++;
            if (dump(argv[i], unsized, c, choices)) {
                status = 2;
            }
        }
    }
    if (!files) {
        fprintf(stderr, "usage: image_dump [--unsized] [--choose MAJOR.MINOR@DRIVER]... FILE...\n");
    }
    return files ? status : 2;
}
