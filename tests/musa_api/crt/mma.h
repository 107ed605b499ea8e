// Declaration-only stand-in for MUSA's crt/mma.h: mtmusa::wmma (see ../musa_runtime.h).
#pragma once
#ifndef __MUSA_INCLUDE_COMPILER_INTERNAL_HEADERS__
#error "crt/mma.h is included through __MUSA_INCLUDE_COMPILER_INTERNAL_HEADERS__"
#endif
namespace mtmusa { namespace wmma {
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
struct row_major {}; struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment { T x[1]; };
template <class Use, int M, int N, int K, class T, class L>
__device__ void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const T* p, unsigned ldm);
template <int M, int N, int K, class T>
__device__ void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const T* p, unsigned ldm,
                                 layout_t layout);
template <int M, int N, int K, class T>
__device__ void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm,
                                  layout_t layout);
template <int M, int N, int K, class T>
__device__ void fill_fragment(fragment<accumulator, M, N, K, T>& f, T value);
template <int M, int N, int K, class TC, class TAB, class LA, class LB>
__device__ void mma_sync(fragment<accumulator, M, N, K, TC>& d,
                         const fragment<matrix_a, M, N, K, TAB, LA>& a,
                         const fragment<matrix_b, M, N, K, TAB, LB>& b,
                         const fragment<accumulator, M, N, K, TC>& c);
}}  // namespace mtmusa::wmma
