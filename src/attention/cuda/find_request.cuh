// The request a token of a packed batch belongs to, on the device.
#pragma once
#include <cstdint>

namespace gs::cuda {

// Largest r in [0, n] with qsl[r] <= t (qsl is non-decreasing, qsl[0] = 0): for t <
// qsl[n], the request holding token t (empty requests before it share its start).
__device__ __forceinline__ int find_request(const int32_t* qsl, int n, int t) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (qsl[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace gs::cuda
