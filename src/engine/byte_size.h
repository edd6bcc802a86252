// Byte sizes as users write them: "536870912", "512MiB", "1.5GiB", "2G", "100kb".
#pragma once
#include <cstddef>
#include <string_view>

namespace gs {

// K/M/G/T (optionally followed by "i" and/or "B", any case) are powers of 1024, as
// vLLM's --kv-cache-memory reads them. Throws gs::Error naming `what` on bad input.
size_t parse_byte_size(std::string_view text, std::string_view what = "size");

}  // namespace gs
