/* SPDX-License-Identifier: Apache-2.0 */
/* The settings the C side acts on, as comfy_kitchen_c/settings.py parsed them
 * (from the environment and the settings file, refused values already replaced
 * by their defaults).  Python hands them over in one call (_C.configure), at
 * import and whenever a running process changes them; C reads no environment
 * variable itself.  Until that call, every field holds its default, which is
 * also what a C program that never calls it (the ThreadSanitizer test) gets. */
#ifndef CKC_PLATFORM_SETTINGS_H
#define CKC_PLATFORM_SETTINGS_H

#define CKC_SETTING_PATH 1024
#define CKC_DEFAULT_HANG_MS 1500u
#define CKC_DEFAULT_HANG_RAISE_MS 5000u

typedef struct {
    char cpu_isa[16];                  /* "": the best this CPU runs (COMFY_KITCHEN_C_CPU_ISA) */
    int cpu_threads_pool;              /* 1: our pool even where torch's libgomp is loaded (CPU_THREADS) */
    int huge_pages;                    /* 1: hint transparent huge pages on large outputs (HUGE_PAGES) */
    unsigned hang_ms;                  /* a fence with no progress this long writes the hang record (HANG_MS) */
    unsigned hang_raise_ms;            /* ... and this long raises HangSuspected (HANG_RAISE_MS) */
    int gemm_tuning;                   /* 1: time int8_linear's eligible algorithms (GEMM_TUNING) */
    char gemm_cache[CKC_SETTING_PATH]; /* "": none (GEMM_CACHE) */
    char cuda_driver[CKC_SETTING_PATH]; /* "": the OS's names (CUDA_DRIVER) */
    char cublaslt[CKC_SETTING_PATH];   /* "": torch's, else the search (CUBLASLT) */
    char cuda_home[CKC_SETTING_PATH];  /* the environment's CUDA_HOME: one of cuBLASLt's search folders */
} ckc_settings;

/* The defaults. */
void ckc_settings_default(ckc_settings *s);

/* A copy of the settings in force (any thread). */
void ckc_settings_read(ckc_settings *out);

/* Puts s in force for every later read. */
void ckc_settings_set(const ckc_settings *s);

/* How many times the settings were set: a reader on a hot path keeps what it
 * derived from them until this changes (no lock, no copy). */
long ckc_settings_generation(void);

#endif /* CKC_PLATFORM_SETTINGS_H */
