/* SPDX-License-Identifier: Apache-2.0 */
/* A stand-in cublasLt64_13.dll for tests/windows/blas_load_test.c: the search only opens it. */
__declspec(dllexport) unsigned long long
cublasLtGetVersion(void)
{
    return 130000;
}
