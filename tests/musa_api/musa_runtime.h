// A declaration-only stand-in for the subset of the MUSA runtime API that tiledsl's MUSA
// output uses, written from the S4000 seed's usage, so that a C++ front end (clang in
// CUDA host-only mode) can type-check generated .mu files without MUSA installed.
#pragma once
typedef unsigned long size_t;
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __align__(n) __attribute__((aligned(n)))
struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int x = 1, unsigned int y = 1, unsigned int z = 1) : x(x), y(y), z(z) {}
};
struct uint4 { unsigned int x, y, z, w; };
struct uint2 { unsigned int x, y; };
extern const __device__ uint3 threadIdx;
extern const __device__ uint3 blockIdx;
extern const __device__ dim3 blockDim;
extern const __device__ dim3 gridDim;
__device__ void __syncthreads();
__device__ int min(int, int);
typedef int musaError_t;
enum musaFuncAttribute { musaFuncAttributeMaxDynamicSharedMemorySize = 8 };
typedef struct MUstream_st* musaStream_t;
musaError_t musaDeviceSynchronize();
template <class T> musaError_t musaFuncSetAttribute(T* entry, musaFuncAttribute attr, int value);
// What clang lowers `kernel<<<grid, block, smem>>>(…)` to in host-only mode.
extern "C" unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem = 0,
                                                void* stream = 0);
