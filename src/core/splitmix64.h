// splitmix64: a 64-bit mixing function whose outputs pass as independent random numbers for
// consecutive inputs (a counter-based generator): dummy weights' values and the default seeds of
// requests come from it.
#pragma once
#include <cstdint>

#include "core/host_device.h"

namespace gs {

GS_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace gs
