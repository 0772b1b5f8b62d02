// What a launch costs by itself: the time per launch of back-to-back empty kernels in a CUDA graph
// (200 launches, median of 20 replays), by grid, threads per CTA, dynamic shared memory and the
// size of the parameters (16 bytes, or 384 bytes of __grid_constant__ like the native kernel's
// three tensor maps), with and without reading them ("touch": 1 word, or 3 words on 3 lines).
// Build and run on the GPU machine: nvcc -O2 -arch=sm_90a -o build/launch_cost bench/launch_cost.cu
// && build/launch_cost
#include "graph_timer.cuh"
#include <cstdio>
struct alignas(64) Big { unsigned long long w[48]; }; // 384 B, like three tensor maps
__global__ void k_small(int *p, int n) { if (threadIdx.x == 0 && blockIdx.x == n) p[0] = 1; }
__global__ void k_big(const __grid_constant__ Big a, int *p, int n) { if (threadIdx.x == 0 && blockIdx.x == n) p[0] = (int)a.w[5]; }
__global__ void k_bigtouch(const __grid_constant__ Big a, int *p, int n) { if (threadIdx.x == 0) p[blockIdx.x] = (int)(a.w[5] + a.w[21] + a.w[37]); }
__global__ void k_smalltouch(int *p, int n) { if (threadIdx.x == 0) p[blockIdx.x] = n; }
int main() {
  int *p; cudaMalloc(&p, 1 << 20); cudaStream_t s; cudaStreamCreate(&s); Big big{}; big.w[5] = 3;
  int smems[] = {0, 53 * 1024, 100 * 1024};
  cudaFuncSetAttribute(k_small, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  cudaFuncSetAttribute(k_big, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  cudaFuncSetAttribute(k_bigtouch, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  cudaFuncSetAttribute(k_smalltouch, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  for (int rep = 0; rep < 2; rep++)
  for (int grid : {132, 224, 264})
    for (int thr : {128, 256, 384})
      for (int sm : smems) {
        float a = per_launch_us([&](int) { k_small<<<grid, thr, sm, s>>>(p, -1); }, s);
        float b = per_launch_us([&](int) { k_big<<<grid, thr, sm, s>>>(big, p, -1); }, s);
        float c = per_launch_us([&](int) { k_smalltouch<<<grid, thr, sm, s>>>(p, 7); }, s);
        float d = per_launch_us([&](int) { k_bigtouch<<<grid, thr, sm, s>>>(big, p, 7); }, s);
        printf("grid %d threads %d smem %6d: small %.3f big %.3f | touch small %.3f big %.3f us\n", grid, thr, sm, a, b, c, d);
      }
  printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
