#include "core/check.h"
#include "kernels/quant.h"
#include "model/batch.h"

namespace moeserve {

namespace model {
size_t KvLayout::BlockBytes(size_t block_size) const {
  switch (dtype) {
    case DType::kBF16:
      return block_size * num_kv_heads * head_dim * sizeof(bf16);
    case DType::kF8E4M3:
      return kernels::KvBlockBytesFp8(block_size, num_kv_heads, head_dim);
    default:
      MOESERVE_CHECK(false, "unsupported KV cache dtype ", DTypeName(dtype));
  }
  return 0;
}

size_t KvLayout::BytesPerToken() const {
  const size_t per_head =
      dtype == DType::kF8E4M3 ? head_dim + sizeof(float) : head_dim * sizeof(bf16);
  return num_layers * 2 * num_kv_heads * per_head;
}
}  // namespace model

}  // namespace moeserve
