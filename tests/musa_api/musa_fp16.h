// Declaration-only stand-in for musa_fp16.h (see musa_runtime.h).
#pragma once
struct __half { unsigned short x; };
typedef __half half;
__device__ half __float2half(float);
__device__ float __half2float(half);
