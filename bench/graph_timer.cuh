// The per-launch time of the launch probes (launch_cost.cu, launch_steps.cu): `launch(i)` issued
// 200 times into one CUDA graph, the graph replayed 25 times with CUDA events around each
// replay, the first 5 replays dropped as warm-up, the median of the other 20 divided by 200.
#pragma once
#include <algorithm>
#include <cuda_runtime.h>
#include <vector>

template <typename F> float per_launch_us(F launch, cudaStream_t s)
{
    const int launches = 200;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < launches; i++)
        launch(i);
    cudaStreamEndCapture(s, &g);
    cudaGraphInstantiate(&ge, g, 0);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<float> v;
    for (int r = 0; r < 25; r++) {
        cudaEventRecord(a, s);
        cudaGraphLaunch(ge, s);
        cudaEventRecord(b, s);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (r >= 5)
            v.push_back(ms * 1000 / launches);
    }
    std::sort(v.begin(), v.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return v[v.size() / 2];
}
