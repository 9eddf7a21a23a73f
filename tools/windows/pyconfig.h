/* SPDX-License-Identifier: Apache-2.0 */
/* What CPython's Windows build (the python.org installers' PC/pyconfig.h) tells
 * the headers of the limited API, for compiling the extension's C for Windows
 * on Linux: .ci/windows_compile_check.py and tools/windows/build.py put this
 * file in place of the host Python's pyconfig.h in a copy of its include
 * folder.  x64 only: LLP64 (long is 32 bits), Python in a DLL, no POSIX
 * headers. */
#ifndef Py_CONFIG_H
#define Py_CONFIG_H

#include <basetsd.h>
#include <float.h>
#include <io.h>
#include <stdio.h>

#define MS_WIN32
#define MS_WIN64
#define MS_WINDOWS
#define NT_THREADS
#define WITH_THREAD
#define PLATFORM "win32"

/* A DLL core, imported through __declspec(dllimport). */
#define Py_ENABLE_SHARED 1
#define HAVE_DECLSPEC_DLL

/* Python.h gives every extension an ssize_t on Windows. */
typedef __int64 ssize_t;
#define HAVE_SSIZE_T 1

#define LONG_BIT 32
#define WORD_BIT 32
#define SIZEOF_SHORT 2
#define SIZEOF_INT 4
#define SIZEOF_LONG 4
#define SIZEOF_LONG_LONG 8
#define SIZEOF_VOID_P 8
#define SIZEOF_SIZE_T 8
#define SIZEOF_TIME_T 8
#define SIZEOF_OFF_T 4
#define SIZEOF_FPOS_T 8
#define SIZEOF_WCHAR_T 2
#define SIZEOF__BOOL 1
#define SIZEOF_PID_T SIZEOF_INT
#define SIZEOF_FLOAT 4
#define SIZEOF_DOUBLE 8
#define HAVE_UINTPTR_T 1
#define HAVE_INTPTR_T 1
#define DOUBLE_IS_LITTLE_ENDIAN_IEEE754 1

#define HAVE_STDDEF_H 1
#define HAVE_WCHAR_H 1
#define HAVE_ERRNO_H 1
#define HAVE_FCNTL_H 1
#define HAVE_SIGNAL_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_SYS_TYPES_H 1

#endif /* !Py_CONFIG_H */
